"""Start here: the guided tour, one claim of the paper per step, each opening its page with
prepared settings (ui/tour.py)."""

import streamlit as st

from ui import tour

st.title("Start here: a tour in seven views")
st.markdown(
    "Each step opens a page with settings prepared to show one claim of *Transformers as "
    "Support Vector Machines* (arXiv 2308.16898). A banner above the page says what to look "
    "at and what to try next, with links to the previous and next step. Every setting is in "
    "the link, so you can change anything and come back."
)
for k, s in enumerate(tour.STEPS):
    with st.container(border=True):
        st.markdown(f"**{k + 1}. {s.title}.** {s.claim}")
        st.page_link(
            f"app_pages/{s.page}",
            label=f"Open step {k + 1}",
            icon=":material/arrow_forward:",
            query_params=tour.link_query(k),
        )
