"""Small page helpers: error display, budget checks, a bound-widget shortcut."""

from __future__ import annotations

from contextlib import contextmanager

import streamlit as st

import attsvm
from attsvm import limits
from attsvm.config import ProblemSpec, TrainSpec

from . import cache, hosted

BOUND = dict(bind="query-params")


@contextmanager
def explained():
    """Show the library's ValueError (bad input, tie, over budget) as st.error and stop
    the page there; anything else propagates (tests see it)."""
    try:
        yield
    except ValueError as exc:
        st.error(f"**Cannot run this:** {hosted.escape_markdown(exc)}", icon="🚫")
        st.stop()


def build(pspec: ProblemSpec) -> attsvm.Problem:
    with explained():
        return pspec.build()


def check_gd(
    prob: attsvm.Problem,
    tspec: TrainSpec,
    *,
    runs: int = 1,
    steps: int | None = None,
    svms=("fro", "nuc"),
):
    """Refuse (st.error + stop) a GD action over the active mode's budget: `runs` runs, plus
    one SVM solve per norm in `svms` for its result (what the pages show beside GD)."""
    with explained():
        hosted.check_session()
        limits.check_gd(
            n=prob.n,
            T=prob.T,
            d=prob.d,
            queries=prob.queries,
            steps=steps or tspec.steps,
            runs=runs,
            param=tspec.param,
            m=tspec.m_for(prob),
            svms=svms,
        )


def stop_if_one_token(prob: attsvm.Problem, why: str):
    """Stop the page with `why` (st.info) when each sequence has a single token (T = 1):
    then there is nothing to select."""
    if prob.T == 1:
        st.info(why)
        st.stop()


def train_both(
    pspec: ProblemSpec, prob: attsvm.Problem, tspec: TrainSpec, labels=("W", "K Qᵀ")
) -> dict:
    """GD on W and on (K, Q) with `tspec`'s other settings, each checked against the budget
    and cached: {label: Trajectory}, `labels` naming the W run and the (K, Q) run."""
    runs = {}
    for param, label in zip(("W", "KQ"), labels, strict=True):
        t = tspec.with_(param=param)
        check_gd(prob, t)
        with explained():
            runs[label] = cache.train(pspec, t)
    return runs


def check_svm(solves: int, prob: attsvm.Problem | None = None, norm: str = "fro"):
    """Refuse (st.error + stop) `solves` SVM solves over budget (priced when `prob`, the
    largest problem solved, is given)."""
    with explained():
        hosted.check_session()
        if prob is None:
            limits.check_svm(solves=solves)
        else:
            limits.check_svm(
                solves=solves, n=prob.n, T=prob.T, d=prob.d, norm=norm, queries=prob.queries
            )


def svm_status(sol) -> str:
    """An SVM's status in backticks, with its certified relative duality gap where it has one
    (a nuclear solution above 1e-6 reads `optimal_inaccurate`: the gap says how far)."""
    gap = "" if sol.gap is None else f" (certified gap {sol.gap:.1e})"
    return f"`{sol.status}`{gap}"


def page_header(title: str, claim: str):
    st.title(title)
    st.markdown(claim)


def settings_caption(pspec: ProblemSpec, tspec: TrainSpec | None = None):
    """One line naming the problem and run settings (tests and users read numbers here)."""
    text = f"**Problem:** {pspec.label()}"
    if tspec is not None:
        text += f"  \n**GD:** {tspec.label()}"
    st.caption(text)


def optimal_or_warn(prob: attsvm.Problem, what: str = "No unique optimal token"):
    """opt (the optimal tokens), or None with a warning "`what`: the reason" (a tie)."""
    try:
        return attsvm.optimal_tokens(prob)
    except ValueError as exc:
        st.warning(f"{what}: {exc}")
        return None
