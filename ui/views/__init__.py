"""Streamlit rendering of each page's result: verdict boxes, chart panels, explanations.

One module per page that needs more than a few lines to show its result; each function takes
library results (and the settings records) and draws them. No computation happens here.
"""
