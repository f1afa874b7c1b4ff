"""The "Train the head too" page's panels: intro, budget checks, preset and random views."""

from __future__ import annotations

import streamlit as st

from attsvm import limits
from attsvm.joint import joint_problem
from attsvm_charts import joint as charts
from ui import about, hosted
from ui.widgets import explained

SVM_SOLVES = 30  # per run: head, relaxed, tight and balanced SVMs (measured ≈ 24–28 solves)
SOURCES = ["mmts-relaxed", "mmts-tight", "mdatt-toy", "random"]


def intro():
    st.title("Train the head too")
    st.markdown(
        "Every other page keeps the prediction head v fixed. Here v is trained with the "
        "attention W, each by its own normalized step (as in the code of both papers). "
        "Theory (MMTS, arXiv 2306.13596) says v converges to the hard-margin SVM of the "
        "selected tokens, v^mm = argmin ‖v‖ s.t. Y_i vᵀx_{iα_i} ≥ 1, and W to a **relaxed** "
        "Att-SVM: margin ≥ 1 only on the support sequences S of v's SVM, ≥ 0 on the others. "
        "ℓp mirror descent on both (MD-Att, arXiv 2410.14581) reaches the ℓp versions, and "
        "its geometry decides which tokens are selected. Measured here: on the MMTS "
        "relaxed preset W does reach the relaxed SVM; on **random** instances it often does "
        "not, and comes closest to a *balanced* SVM derived on this page (see `random`)."
    )
    st.info(
        "**float64** runs attsvm's engine (exact, centred gradient, no ε). **float32** "
        "adds a numpy port of the authors' loop in float32 (plain softmax Jacobian, "
        "ε = 1e-19 / 1e-9 in the normalizers), which stalls near the *tight* "
        "direction: their notebook prints p = (0.983, 0.186); this port ends at "
        "(0.9825, 0.1863). In float64 with the exact gradient p reaches p^relax = (1, 0). "
        "The page uses its own instances: the sidebar's problem and training settings "
        "do not apply here.",
        icon=":material/info:",
    )


def check_budget(*, n: int, T: int, d: int, steps: int, runs: int):
    """Refuse (st.error + stop) joint training over the active mode's budget: the runs
    (priced as GD; the float32 loop is cheaper) and their SVM solves."""
    with explained():
        hosted.check_session()
        work = limits.check_gd(n=n, T=T, d=d, steps=steps, runs=runs)
        work += limits.check_svm(solves=SVM_SOLVES * runs, n=n, T=T, d=d, solver="CLARABEL")
        limits.check_work(work, what=f"joint training ({runs} run(s)) and its SVMs")


def preset(study: dict):
    """Paths of W z₁ and v against the SVM rays (each run drawn), the table and the SVMs."""
    cols = st.columns(len(study["paths"].run.unique()))
    for col, run in zip(cols, study["paths"].run.unique(), strict=True):
        about.chart(col, charts.paths(study, run=run), "joint-paths")
    st.dataframe(study["table"], hide_index=True, key="jt_table")
    sv, pre = study["svm"], study["preset"]
    alpha = tuple(int(a) for a in sv.alpha)
    S = [i + 1 for i in range(len(sv.support)) if sv.support[i]]
    rest = [i + 1 for i in range(len(sv.support)) if not sv.support[i]]
    st.markdown(
        f"**{pre.description}.** Selected tokens α = {alpha} (0-based). Head SVM "
        f"({sv.v_status}): v^mm = ({sv.v[0]:.4f}, {sv.v[1]:.4f}); support sequences "
        f"{S}"
        + (
            f", **not** support: {rest} — so the relaxed and tight Att-SVMs differ."
            if rest
            else " — every sequence, so relaxed = tight."
        )
        + f" Relaxed Att-SVM: {sv.W_status}; tight: {sv.tight.status}."
    )


def random_view(res: dict):
    c1, c2 = st.columns([3, 2])
    about.chart(c1, charts.corr_curves(res["curves"]), "joint-curves")
    about.chart(c2, charts.relaxed_vs_tight(res["final"]), "joint-scatter")
    st.dataframe(res["final"], hide_index=True, key="jt_final")
    f = res["final"]
    wins = int((f.corr_relaxed > f.corr_tight).sum())
    best = int(((f.corr_balanced >= f.corr_relaxed) & (f.corr_balanced >= f.corr_tight)).sum())
    st.markdown(
        f"Relaxed beats tight in **{wins}/{len(f)}** instances; the balanced SVM is the "
        f"closest of the three in **{best}/{len(f)}**. Under joint NGD ‖v_k‖ ≈ "
        "‖W_k‖, so a non-support sequence's loss weight is only e^{−(m_i − 1)‖v‖/‖v^mm‖} "
        "smaller, which buys it a margin (m_i − 1)ρ instead of freeing it: the "
        "**balanced** SVM W^bal (green; constraints ≥ max(0, 1 − (m_i − 1)ρ), ρ the fixed "
        "point of ‖v‖ = ‖W‖) is derived here, not in either paper. On the MMTS relaxed "
        "preset it coincides with p^relax."
    )


def problem_of(source: str):
    return joint_problem(source).prob
