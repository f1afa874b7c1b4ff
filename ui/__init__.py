"""The Streamlit side of the attsvm explorer: widgets, sidebar, link handling, cache
wrappers over library calls, and the hosted-session machinery.

Dependencies point one way: pages -> ui -> attsvm (and attsvm_charts). Nothing here
computes science: every number comes from a library call.
"""
