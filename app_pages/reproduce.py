"""Reproduce the paper: one card per experiment with the stored result of the paper's
settings (computed once on the server, in the background, for every visitor), our statistic
next to the paper's, the chart and the files; and a run with other settings, priced for the
visitor. Below them the follow-up papers' experiments get the same cards."""

import streamlit as st

from attsvm import experiments
from ui import results
from ui.views.reproduce import card, link_settings, store_status

paper, followups = tuple(experiments.EXPERIMENTS), tuple(experiments.FOLLOWUPS)
link_settings(paper + followups)  # before the cards: the link's settings they can run
results.start_filler()
st.title("Reproduce the paper")
st.markdown(
    "Every experiment of *Transformers as Support Vector Machines*, with the authors' "
    "settings. Each card shows the statistic the paper reports next to ours, computed once "
    "on the server and stored; *Run with other settings* runs a variant for you. The same "
    "runs are available headless: `python -m attsvm reproduce NAME` (or `all`)."
)
store_status()
for exp in paper:
    card(exp, paper, "the paper's experiment")

st.header("Follow-up papers")
st.markdown(
    "Later papers that carry the attention–SVM picture further: *Mechanics of Next Token "
    "Prediction with Self-Attention* (arXiv 2403.08081: token-priority graphs, the "
    "Graph-SVM), ℓp mirror descent on attention (arXiv 2410.14581) and adaptive step sizes "
    "(arXiv 2402.05738). Each card puts the authors' numbers (their notebooks' printed "
    "outputs, where they exist) next to ours; the notes say where attsvm measures "
    "differently. Headless: `python -m attsvm reproduce followups` (not part of `all`)."
)
for exp in followups:
    card(exp, followups, "follow-up")
