"""The Next-token prediction page's Streamlit side: intro, the session's budget check and
the metered live run (the computations are `attsvm.ntp.session`)."""

from __future__ import annotations

import streamlit as st

from attsvm.ntp import session

from .. import hosted

# One chunk of the live run, metered: holds a compute slot and charges the session.
chunk = hosted.metered(session.chunk)


def check_budget(prob, steps: int) -> None:
    """Refuse a run over this session's allowance or the mode's budget."""
    hosted.check_session()
    session.check_budget(prob, steps)


def live_run(prob, W0, steps: int, lr: float, on_chunk=None) -> dict:
    """`attsvm.ntp.session.live_run` with metered chunks."""
    return session.live_run(prob, W0, steps, lr, on_chunk, chunk=chunk)


def intro():
    """The page's title and claim."""
    st.title("Next-token prediction")
    st.markdown(
        "One self-attention layer whose query is the **last token**, trained on next-token "
        "data (Li, Huang, Ildiz, Rawat, Oymak, arXiv 2403.08081). Per last token k the data "
        "define a **token-priority graph** G^(k): the label beats every other token of its "
        "sequence. GD retrieves the tokens of the highest-priority SCC of the context and "
        "composes them softly:"
    )
    st.latex(
        r"W(\tau)\approx W^{fin}+R(\tau)\,W^{svm},\quad W^{svm}=\arg\min\|W\|_F\ "
        r"\text{s.t.}\ (e_y-e_j)^\top W e_k \begin{cases}=0 & \text{same SCC of } "
        r"G^{(k)}\\ \ge 1 & \text{otherwise}\end{cases}"
    )
    st.caption("This page has its own settings (below); the sidebar's problem does not apply.")
