"""App-side helpers of the attsvm explorer: settings, sidebar, cache wrappers, charts.

Dependencies point one way: pages -> ui -> attsvm. `ui.charts` and `ui.specs` are pure
(no Streamlit), so they can be tested and reused outside the app.
"""
