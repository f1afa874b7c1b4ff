"""The "Deeper: a hierarchy of SVMs" page's Streamlit side: intro, the budget check and the
metered live run (the computations are `attsvm.stack_live`)."""

from __future__ import annotations

import streamlit as st

from attsvm import stack_live

from .. import hosted

# One chunk of the live run, metered: holds a compute slot and charges the session.
chunk = hosted.metered(stack_live.chunk)


def check_budget(spec) -> None:
    """Refuse a run over this session's allowance or the mode's budget."""
    hosted.check_session()
    stack_live.check_budget(spec)


def live_run(spec, on_chunk=None):
    """`attsvm.stack_live.live_run` with metered chunks."""
    return stack_live.live_run(spec, on_chunk, chunk=chunk)


def intro():
    """The page's title, its model and the open label."""
    st.title("Deeper: a hierarchy of SVMs")
    st.warning(
        "**Open question — an empirical look, no theorem.** The paper closes by "
        "proposing to read a multi-layer transformer as “a hierarchy of SVMs that "
        "separate and select the best tokens” (arXiv 2308.16898). No result proves "
        "it for several layers or heads; this page only shows what GD does.",
        icon=":material/science:",
    )
    st.markdown(
        "L layers of H self-attention heads, h⁰ = X_i, the readout vᵀh^L at the "
        "query token q (the last one):"
    )
    st.latex(
        r"S^{l,h}_{ts}=\mathrm{softmax}_s\big((h^{l-1}_s)^\top W^{l,h} h^{l-1}_t\big),"
        r"\quad h^l_t=\rho\,h^{l-1}_t+\sum_h\sum_s S^{l,h}_{ts}\,(U^{l,h})^\top "
        r"h^{l-1}_s,\quad f_i=v^\top h^L_{q}"
    )
    st.caption(
        "Normalized GD moves each W^{l,h} by its own gradient over its own norm. "
        "Each head is then compared with the Att-SVM of the keys *it* selects at "
        "the end, on *its own* layer's inputs h^{l−1} (earlier layers: every token "
        "is a query). Values U = I/H (shared) or random orthogonal / H. This page has "
        "its own settings; the sidebar's problem does not apply."
    )
