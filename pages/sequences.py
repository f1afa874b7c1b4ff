"""Sequences and causal attention: every token is a query; per-query selections and the SVM."""
import numpy as np
import pandas as pd
import streamlit as st

import attsvm
from attsvm_charts import explorer as charts, frames
from ui import cache, export_ui
from ui.sidebar import specs
from attsvm.config import ProblemSpec
from ui.widgets import BOUND, build, check_gd, explained

st.title("Sequences and causal attention")
st.markdown(
    "In sequence-to-sequence attention every token x_ik is also a query z_ik with its own "
    "label Y_ik; with a **causal** mask query k may only attend to tokens t ≤ k. The SVM gets "
    "one constraint block per (sequence, query), over the tokens that query may see:")
st.latex(r"\min_W\|W\|\quad\text{s.t.}\quad (x_{i\alpha_{ik}}-x_{it})^\top W z_{ik}\ \ge\ 1"
         r"\quad\forall i,\ k,\ t\ne\alpha_{ik}\ \ (t\le k\ \text{if causal})")

pspec_sb, tspec = specs()
if pspec_sb.source != "random":
    st.info("The sidebar shows a 2-D preset, which has one query per sequence; this page uses "
            "a random problem with n = 2, T = 6, d = 8 instead.", icon=":material/info:")
    pspec_sb = ProblemSpec(n=2, T=6, d=8, attention=pspec_sb.attention)
c1, c2 = st.columns([2, 3])
mode = c1.segmented_control("Queries", ["causal", "sequence"], key="seq_mode",
                            default="causal", required=True, **BOUND,
                            help="causal: query k sees tokens 0…k; sequence: all T tokens")
c2.caption(f"Problem from the sidebar ({pspec_sb.attention}-attention: "
           + ("z_ik = x_ik, the token itself" if pspec_sb.attention == "self"
              else "an own random query per position") + "). Labels are drawn per query.")
pspec = pspec_sb.with_(queries=mode)
prob = build(pspec)
if prob.T == 1:
    st.info("T = 1: one token, one query that can only attend to it — nothing to select.")
    st.stop()
check_gd(prob, tspec)
with explained():
    run = cache.train(pspec, tspec)
alpha = run.alpha                                                    # (n, T) per query
try:
    opt = attsvm.optimal_tokens(prob)
except ValueError as exc:
    opt = None
    st.warning(f"No unique optimal token for some query, so no global SVM: {exc}")
norm = tspec.norm
key = tuple(tuple(int(a) for a in row) for row in alpha)
with explained():
    sol = cache.svm(pspec, key, norm)
    kind = cache.classify(pspec, key, norm)

# -- verdict -------------------------------------------------------------------------------
left, right = st.columns([2, 3])
with left.container(border=True):
    st.markdown(f"#### Verdict after {tspec.steps:,} steps")
    match = None if opt is None else (alpha == opt)
    if match is not None:
        st.metric("queries whose selection is optimal", f"{int(match.sum())} / {match.size}")
    text = {"global": "**Globally optimal**: every query selects its highest-score attendable "
                      "token, and the per-query SVM is feasible.",
            "local": "**Locally optimal**: the SVM for GD's selection is feasible and every "
                     "support token scores below the selected one, but some queries differ "
                     "from opt.",
            "feasible": "**Not locally optimal**: the SVM is feasible but a support token "
                        "outscores the selected one for some query (GD may not have settled).",
            "infeasible": f"**The SVM for GD's selection is infeasible** (`{sol.status}`): no "
                          "W gives every query its margin."}[kind]
    (st.success if kind == "global" else st.info if kind == "local" else st.warning)(text)
    if sol.feasible:
        corr = attsvm.correlation(run.W[-1], sol.W)
        st.markdown(f"- SVM ({'Frobenius' if norm == 'fro' else 'nuclear'}): `{sol.status}`, "
                    f"‖W‖ = {sol.objective:.4g}, rank {attsvm.numerical_rank(sol.W)}, "
                    f"{int(sol.support.sum())} support tokens")
        st.markdown(f"- corr(W(k), SVM) at the end: **{corr:.4f}**")
    # A causal query that sees one token has no other mass at all: not a saturation.
    sat = run.saturated_at[:, prob.query_view()[2].sum(1) > 1]
    if np.any(sat >= 0):
        st.warning(f"Softmax saturated in float64 from iteration {int(sat[sat >= 0].min()):,} "
                   "for some queries: their direction is frozen, not converged.")
    st.caption("With causal masking query 0 sees only token 0: it always selects it and adds "
               "no constraint.")
with right:
    i = st.selectbox("sequence shown", list(range(prob.n)), key="seq_i", **BOUND)
    k, t = np.meshgrid(np.arange(prob.T), np.arange(prob.T), indexing="ij")
    P = run.probs[-1, i]                                             # (K, T)
    _, _, mask = prob.query_view()
    pm = pd.DataFrame({"query": k.ravel(), "token": t.ravel(),
                       "prob": np.where(mask, P, np.nan).ravel(),
                       "selected": (t == alpha[i][:, None]).ravel(),
                       "optimal": ((t == opt[i][:, None]) if opt is not None
                                   else np.zeros_like(t, bool)).ravel()})
    st.altair_chart(charts.prob_map(pm, x="token", y="query", x_title="token t",
                                    y_title="query k",
                                    title=f"Sequence {i}: final softmax of each query "
                                          "(□ GD's pick, ★ optimal)"))

# -- convergence -------------------------------------------------------------------------------
refs = {"SVM for GD's selection": sol.W if sol.feasible else None}
if opt is not None and not np.array_equal(alpha, opt):
    with explained():
        gsol = cache.svm(pspec, None, norm)
    refs["SVM for opt (global)"] = gsol.W if gsol.feasible else None
cdf = frames.correlations(run.steps, run.W, refs)
c1, c2 = st.columns(2)
c1.altair_chart(charts.curves(cdf, y="corr", color="reference", x_max=tspec.steps,
                              title="corr(W(k), SVM solution)", y_title="correlation"))
sel = np.take_along_axis(run.probs, np.broadcast_to(alpha[None, ..., None],
                                                    run.probs.shape[:-1] + (1,)), -1)[..., 0]
wdf = pd.DataFrame({"step": run.steps, "mean": sel.reshape(len(run.steps), -1).mean(1),
                    "min": sel.reshape(len(run.steps), -1).min(1)}).melt(
    id_vars="step", var_name="over queries", value_name="weight")
c2.altair_chart(charts.curves(wdf, y="weight", color="over queries", x_max=tspec.steps,
                              y_domain=(0, 1), title="Softmax weight of the selected tokens",
                              y_title="s_ik,α_ik"))
export_ui.export_button(
    key="seq_export", problem=prob, page="Sequences and causal attention",
    specs=(pspec, tspec), run=run, solutions={norm: sol}, init=tspec.init_for(prob))
