"""Reproduce the paper: one card per experiment, the paper's settings as the preset, a Run
button with progress, the chart, our statistic next to the paper's, and downloads. Below them
the follow-up papers' experiments (next-token prediction, ℓp mirror descent, adaptive step
sizes) get the same cards, with the authors' settings and numbers where their code gives them."""
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

st.header("Follow-up papers")
st.markdown(
    "Later papers that carry the attention–SVM picture further: *Mechanics of Next Token "
    "Prediction with Self-Attention* (arXiv 2403.08081: token-priority graphs, the "
    "Graph-SVM), ℓp mirror descent on attention (arXiv 2410.14581) and adaptive step sizes "
    "(arXiv 2402.05738). Each card puts the authors' numbers (their notebooks' printed "
    "outputs, where they exist) next to ours; the notes say where attsvm measures "
    "differently. Headless: `python -m attsvm reproduce followups` (not part of `all`)."
)
for exp in experiments.FOLLOWUPS:
    card(exp)
