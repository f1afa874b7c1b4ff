"""Rank from small init: (K, Q)-GD from scale α, the rank staircase of ΔW = KQᵀ − K₀Q₀ᵀ,
weight decay as a nuclear norm (attsvm.staircase; docs/staircase.md)."""

import streamlit as st

from attsvm import limits
from attsvm_charts import staircase as charts
from ui import about, cache, export_ui
from ui.sidebar import specs
from ui.views import staircase as view
from ui.widgets import build, check_gd, explained

view.intro()
s = view.controls()
view.claims(s.steps)
pspec, tspec = specs()
prob = build(pspec)
check_gd(prob, tspec.with_(param="KQ"), steps=s.steps, svms=("nuc", "nuc", "fro"))
with explained():
    limits.check_gd(
        n=prob.n,
        T=prob.T,
        d=prob.d,
        steps=s.steps,
        param="KQ",
        record_every=s.record_every,
        queries=prob.queries,
    )
    out = cache.staircase_study(pspec, s)
spec_step = view.spectrum(out, s.init_scale)
about.explain(st, "stair-spectrum")
c1, c2 = st.columns(2)
loss_chart = charts.loss(out["loss"])
gap_chart = charts.gap(out["gap"], predicted=out["predicted"])
about.chart(c1, loss_chart, "stair-loss")
about.chart(c2, gap_chart, "stair-gap")
with st.container(border=True):
    view.verdict_panel(out, s.init_scale, s.lr)
export_ui.export_button(
    key="stair_export",
    problem=prob,
    page="Rank from small init",
    specs=(pspec,),
    charts={"spectrum": spec_step, "loss": loss_chart, "gap": gap_chart},
    tables={
        "spectrum": out["spectrum"],
        "loss": out["loss"],
        "gap": out["gap"],
        "takeoff": out["takeoff"],
    },
)
