"""Optimizer → norm: race several update rules from W = 0 and see which Att-SVM each one's
direction approaches (docs/followups.md §5: which cells are theorems, which are open)."""

import streamlit as st

from attsvm import limits, studies
from attsvm.experiments.lp_mirror_descent import default_lr
from attsvm_charts import optimizers as opt_charts
from ui import about, cache
from ui.sidebar import specs
from ui.views import optimizers as view
from ui.widgets import build, check_gd, check_svm, explained

view.intro()
THEORY = studies.OPTIMIZER_THEORY
names, p, steps, scale, thr, measure = view.controls()
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
with explained():
    race_s = studies.RaceSettings(
        runs=tuple((o, o, LR[o] * scale, float(p) if o in ("md", "nmd") else None) for o in names),
        steps=steps,
    )
NORMS = studies.race_norms(p)
check_gd(prob, tspec.with_(param="W"), runs=len(names), steps=steps, svms=())
check_svm(len(names) * len(NORMS), prob, norm="nuc")
with explained():
    race = cache.optimizer_race(pspec, race_s)
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
view.selected_tokens(out["selected"])
st.altair_chart(opt_charts.norm_growth(out["growth"]))
about.explain(st, "optimizers-growth")
st.caption(
    "Step sizes: "
    + ", ".join(f"{THEORY[o][0]} {lr:.3g}" for o, _, lr, _ in race_s.runs)
    + f". Budget mode: {limits.mode()}. Sign and spectral on attention are open "
    "questions: their cells report what is measured here, not a theorem."
)
