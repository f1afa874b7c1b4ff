"""Optimizer → norm: race several update rules from W = 0 and see which Att-SVM each one's
direction approaches (docs/followups.md §5: which cells are theorems, which are open)."""

import pandas as pd
import streamlit as st

from attsvm import limits, studies
from attsvm.experiments.lp_mirror_descent import default_lr
from attsvm_charts import optimizers as opt_charts
from ui import about, cache
from ui.sidebar import specs
from ui.widgets import BOUND, build, check_gd, check_svm, explained

st.title("Optimizer → norm")
st.markdown(
    "Each optimizer has its own implicit bias: its W(k)/‖W(k)‖ approaches the "
    "attention SVM of *its* norm. All runs train the combined W from W = 0 on the "
    "sidebar's problem."
)
THEORY = studies.OPTIMIZER_THEORY
# the picker has a row of its own: in a narrow column its chips cut the names short
names = st.multiselect(
    "optimizers",
    list(THEORY),
    default=["ngd", "nmd", "sign", "spectral"],
    format_func=lambda o: THEORY[o][0],
    key="opt_names",
    **BOUND,
)
c = st.columns(4)
p = c[0].number_input("p (ℓp-MD)", 1.1, 4.0, 1.5, 0.05, key="opt_p", **BOUND)
steps = c[1].selectbox("steps", [500, 1000, 2000, 5000, 10000], index=2, key="opt_steps", **BOUND)
scale = c[2].number_input(
    "step-size × ",
    0.01,
    100.0,
    1.0,
    key="opt_scale",
    **BOUND,
    help="multiplies every optimizer's default step size",
)
thr = c[3].selectbox("threshold", [0.9, 0.99, 0.999], index=1, key="opt_thr", **BOUND)
measure = st.radio(
    "heat map",
    ["correlation", "margin ratio"],
    horizontal=True,
    key="opt_measure",
    **BOUND,
    help="margin ratio = 1 iff W/‖W‖ solves that "
    "norm's SVM — fair also where the SVM is not unique (ℓ∞, spectral)",
)
if not names:
    st.info("Pick at least one optimizer.")
    st.stop()
pspec, tspec = specs()
prob = build(pspec)
if prob.head != "linear" and "polyak" in names:  # L* = (1/n) Σ ℓ(γ*) needs the linear head
    st.warning("Polyak needs L* in closed form (linear head): left out for this head.")
    names = [o for o in names if o != "polyak"] or st.stop()
# default step sizes: ‖W‖ of order 10²–10³ after `steps` (normalized rules move ≈ η per step)
LR = dict(
    gd=1.0,
    ngd=300 / steps,
    polyak=0.5,
    md=1.0,
    nmd=default_lr(p) * 15000 / steps,
    sign=30 / steps,
    spectral=100 / steps,
)
runs = tuple((o, o, LR[o] * scale, float(p) if o in ("md", "nmd") else None) for o in names)
NORMS = studies.race_norms(p)
check_gd(prob, tspec.with_(param="W"), runs=len(names), steps=steps, svms=())
check_svm(len(names) * len(NORMS), prob, norm="nuc")
with explained():
    race = cache.optimizer_race(pspec, runs, steps)
with explained():
    out = studies.race_summary(
        prob,
        race,
        p=float(p),
        threshold=thr,
        steps=steps,
        solve=lambda key, norm, q: cache.svm_norm(pspec, key, norm, q),
    )
st.altair_chart(
    opt_charts.norm_heatmap(out["heat"], measure=measure, order=[n[2] for n in NORMS], steps=steps)
)
about.explain(st, "optimizers-heat")
st.markdown(
    f"**Steps to corr ≥ {thr:g} with the SVM theory names** (status per docs/followups.md §5)"
)
st.dataframe(out["reach"], hide_index=True, key="opt_reach")
sel = out["selected"]
distinct = len(set(sel.values()))
st.markdown(
    "**Selected tokens** α (argmax of each final W) — "
    + (
        "all optimizers select the same tokens."
        if distinct == 1
        else f"the optimizers **differ**: {distinct} distinct selections."
    )
)
st.dataframe(
    pd.DataFrame(list(sel.items()), columns=["optimizer", "α"]), hide_index=True, key="opt_sel"
)
st.altair_chart(opt_charts.norm_growth(out["growth"]))
about.explain(st, "optimizers-growth")
st.caption(
    "Step sizes: "
    + ", ".join(f"{THEORY[o][0]} {lr:.3g}" for o, _, lr, _ in runs)
    + f". Budget mode: {limits.mode()}. Sign and spectral on attention are open "
    "questions: their cells report what is measured here, not a theorem."
)
