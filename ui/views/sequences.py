"""The Sequences page's panels: intro, verdict, per-query softmax map, convergence curves."""

from __future__ import annotations

import numpy as np
import streamlit as st

import attsvm
from attsvm.trajectory import saturation_message
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import about
from ui.widgets import svm_status

VERDICTS = {
    "global": "**Globally optimal**: every query selects its highest-score attendable token, "
    "and the per-query SVM is feasible.",
    "local": "**Locally optimal**: the SVM for GD's selection is feasible and every support "
    "token scores below the selected one, but some queries differ from opt.",
    "feasible": "**Not locally optimal**: the SVM is feasible but a support token outscores "
    "the selected one for some query (GD may not have settled).",
    "infeasible": "**The SVM for GD's selection is infeasible** (`{status}`): no W gives every "
    "query its margin.",
}


def intro():
    st.title("Sequences and causal attention")
    st.markdown(
        "In sequence-to-sequence attention every token x_ik is also a query z_ik with its own "
        "label Y_ik; with a **causal** mask query k may only attend to tokens t ≤ k. The SVM "
        "gets one constraint block per (sequence, query), over the tokens that query may see:"
    )
    st.latex(
        r"\min_W\|W\|\quad\text{s.t.}\quad (x_{i\alpha_{ik}}-x_{it})^\top W z_{ik}\ \ge\ 1"
        r"\quad\forall i,\ k,\ t\ne\alpha_{ik}\ \ (t\le k\ \text{if causal})"
    )


def verdict(prob, tspec, run, sol, kind: str, opt):
    """The verdict box: how many queries select opt, the SVM's status, saturation."""
    st.markdown(f"#### Verdict after {tspec.steps:,} steps")
    if opt is not None:
        match = run.alpha == opt
        st.metric("queries whose selection is optimal", f"{int(match.sum())} / {match.size}")
    text = VERDICTS[kind].format(status=sol.status)
    (st.success if kind == "global" else st.info if kind == "local" else st.warning)(text)
    if sol.feasible:
        corr = attsvm.correlation(run.W[-1], sol.W)
        st.markdown(
            f"- SVM ({'Frobenius' if tspec.norm == 'fro' else 'nuclear'}): "
            f"{svm_status(sol)}, ‖W‖ = {sol.objective:.4g}, "
            f"rank {attsvm.numerical_rank(sol.W)}, "
            f"{int(sol.support.sum())} support tokens"
        )
        st.markdown(f"- corr(W(k), SVM) at the end: **{corr:.4f}**")
    # A causal query that sees one token has no other mass at all: not a saturation.
    sat = run.saturated_at[:, prob.query_view()[2].sum(1) > 1]
    if np.any(sat >= 0):
        st.warning(
            f"Softmax saturated in float64 from iteration {int(sat[sat >= 0].min()):,} "
            f"for some queries: {saturation_message(run.saturation_tol)}"
        )
    st.caption(
        "With causal masking query 0 sees only token 0: it always selects it and adds "
        "no constraint."
    )


def convergence(run, refs: dict, steps: int):
    """corr(W(k), each SVM) and the selected tokens' softmax weight over iterations."""
    c1, c2 = st.columns(2)
    c1.altair_chart(
        charts.curves(
            frames.correlations(run.steps, run.W, refs),
            y="corr",
            color="reference",
            x_max=steps,
            title="corr(W(k), SVM solution)",
            y_title="correlation",
        )
    )
    about.explain(c1, "sequences-corr")
    c2.altair_chart(
        charts.curves(
            frames.query_selected_weight(run),
            y="weight",
            color="over queries",
            x_max=steps,
            y_domain=(0, 1),
            title="Softmax weight of the selected tokens",
            y_title="s_ik,α_ik",
        )
    )
    about.explain(c2, "sequences-weight")
