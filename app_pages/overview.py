"""Overview: the paper's claims, one formula each, and where each one happens in the app."""

import streamlit as st

from ui import hero
from ui.sidebar import carried
from ui.views import overview as view

st.title("Transformers as Support Vector Machines")
st.markdown(
    "A one-layer softmax attention `f(X) = h(Xᵀ softmax(X W z))` trained by gradient descent "
    "does not just fit the labels: the direction of its key–query matrix converges to the "
    "solution of a **hard-margin SVM that separates one selected token per sequence from "
    "the others** (Tarzanagh, Li, Thrampoulidis, Oymak, 2023, arXiv 2308.16898). "
    "Each claim below links to the page where you can watch it — or watch it fail."
)
hero.render()
st.page_link(
    "app_pages/tour.py",
    label="New here? Take the guided tour (7 steps)",
    icon=":material/tour:",
    query_params=carried(),
)

view.claims()
view.underneath()
