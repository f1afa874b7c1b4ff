"""Sequences and causal attention: every token is a query; per-query selections and the SVM."""

import streamlit as st

from attsvm.config import ProblemSpec
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import about, cache, export_ui
from ui.sidebar import specs
from ui.views import sequences as view
from ui.widgets import BOUND, build, check_gd, explained, optimal_or_warn, stop_if_one_token

view.intro()
pspec_sb, tspec = specs()
if pspec_sb.source != "random":
    st.info(
        "The sidebar shows a 2-D preset, which has one query per sequence; this page uses "
        "a random problem with n = 2, T = 6, d = 8 instead.",
        icon=":material/info:",
    )
    pspec_sb = ProblemSpec(n=2, T=6, d=8, attention=pspec_sb.attention)
c1, c2 = st.columns([2, 3])
mode = c1.segmented_control(
    "Queries",
    ["causal", "sequence"],
    key="seq_mode",
    default="causal",
    required=True,
    **BOUND,
    help="causal: query k sees tokens 0…k; sequence: all T tokens",
)
c2.caption(
    f"Problem from the sidebar ({pspec_sb.attention}-attention: "
    + (
        "z_ik = x_ik, the token itself"
        if pspec_sb.attention == "self"
        else "an own random query per position"
    )
    + "). Labels are drawn per query."
)
pspec = pspec_sb.with_(queries=mode)
prob = build(pspec)
stop_if_one_token(
    prob, "T = 1: one token, one query that can only attend to it — nothing to select."
)
check_gd(prob, tspec)
with explained():
    run = cache.train(pspec, tspec)
opt = optimal_or_warn(prob, "No unique optimal token for some query, so no global SVM")
key = tuple(tuple(int(a) for a in row) for row in run.alpha)  # (n, T) per query
with explained():
    sol = cache.svm(pspec, key, tspec.norm)
    kind = cache.classify(pspec, key, tspec.norm)

left, right = st.columns([2, 3])
with left.container(border=True):
    view.verdict(prob, tspec, run, sol, kind, opt)
with right:
    i = st.selectbox("sequence shown", list(range(prob.n)), key="seq_i", **BOUND)
    st.altair_chart(
        charts.prob_map(
            frames.query_probs(prob, run, i, opt),
            x="token",
            y="query",
            x_title="token t",
            y_title="query k",
            title=f"Sequence {i}: final softmax of each query (□ GD's pick, ★ optimal)",
        )
    )
    about.explain(st, "sequences-probs")
refs = {"SVM for GD's selection": sol.W if sol.feasible else None}
if opt is not None and not (run.alpha == opt).all():
    with explained():
        gsol = cache.svm(pspec, None, tspec.norm)
    refs["SVM for opt (global)"] = gsol.W if gsol.feasible else None
view.convergence(run, refs, tspec.steps)
export_ui.export_button(
    key="seq_export",
    problem=prob,
    page="Sequences and causal attention",
    specs=(pspec, tspec),
    run=run,
    solutions={tspec.norm: sol},
    init=tspec.init_for(prob),
)
