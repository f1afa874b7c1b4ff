"""Reproduce the paper: one card per experiment, the paper's settings as the preset, a Run
button with progress, the chart, our statistic next to the paper's, and downloads."""
import streamlit as st

from attsvm import experiments
from ui.views.reproduce import card

st.title("Reproduce the paper")
st.markdown(
    "Every experiment of *Transformers as Support Vector Machines*, with the authors' "
    "settings as the preset. Each card shows the statistic the paper reports next to ours. "
    "The same runs are available headless: `python -m attsvm reproduce NAME` (or `all`)."
)
for exp in experiments.EXPERIMENTS:
    card(exp)
