"""Small page helpers: error display, budget checks, a bound-widget shortcut."""
from __future__ import annotations

from contextlib import contextmanager

import streamlit as st

import attsvm
from attsvm import limits

from .specs import ProblemSpec, TrainSpec

BOUND = dict(bind="query-params")


@contextmanager
def explained():
    """Show the library's ValueError (bad input, tie, over budget) as st.error and stop
    the page there; anything else propagates (tests see it)."""
    try:
        yield
    except ValueError as exc:
        st.error(f"**Cannot run this:** {exc}", icon="🚫")
        st.stop()


def build(pspec: ProblemSpec) -> attsvm.Problem:
    with explained():
        return pspec.build()


def check_gd(prob: attsvm.Problem, tspec: TrainSpec, *, runs: int = 1, steps: int | None = None):
    """Refuse (st.error + stop) a GD action over the active mode's budget."""
    with explained():
        limits.check_gd(n=prob.n, T=prob.T, d=prob.d, steps=steps or tspec.steps, runs=runs,
                        queries=prob.queries)


def check_svm(solves: int):
    with explained():
        limits.check_svm(solves=solves)


def page_header(title: str, claim: str):
    st.title(title)
    st.markdown(claim)


def settings_caption(pspec: ProblemSpec, tspec: TrainSpec | None = None):
    """One line naming the problem and run settings (tests and users read numbers here)."""
    text = f"**Problem:** {pspec.label()}"
    if tspec is not None:
        text += f"  \n**GD:** {tspec.label()}"
    st.caption(text)
