"""Rank from small init: (K, Q)-GD from scale α, the rank staircase of ΔW = KQᵀ − K₀Q₀ᵀ,
weight decay as a nuclear norm (attsvm.staircase; docs/staircase.md)."""

import streamlit as st

from attsvm import limits
from attsvm.training import INIT_KINDS
from attsvm_charts import staircase as charts
from ui import about, cache, export_ui
from ui.sidebar import specs
from ui.views import staircase as view
from ui.widgets import BOUND, build, check_gd, explained

ALPHAS = sorted({10.0**e for e in range(-8, 1)} | {0.3})
LAMBDAS = [0.0, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2]
view.intro()
c = st.columns(6)
alpha = c[0].select_slider(
    "init scale α",
    ALPHAS,
    value=1e-4,
    format_func="{:g}".format,
    key="stair_alpha",
    **BOUND,
    help="K₀, Q₀ at scale α (log slider)",
)
kind = c[1].selectbox(
    "init kind",
    INIT_KINDS,
    key="stair_kind",
    **BOUND,
    help="gaussian: α·N(0, 1) entries; diagonal: α·I; aligned: α times the "
    "singular vectors of −∇L(0)",
)
lam = c[2].select_slider(
    "weight decay λ",
    LAMBDAS,
    value=0.0,
    format_func="{:g}".format,
    key="stair_lambda",
    **BOUND,
    help="λ/2 (‖K‖² + ‖Q‖²) added to the loss",
)
rule = c[3].radio(
    "GD",
    ["gd", "ngd"],
    format_func={"gd": "plain", "ngd": "normalized"}.get,
    key="stair_rule",
    horizontal=True,
    **BOUND,
)
steps = c[4].selectbox(
    "steps", [1000, 2000, 5000, 10000, 20000], index=2, key="stair_steps", **BOUND
)
lr = c[5].number_input(
    "step size η",
    0.001,
    2.0,
    0.5,
    0.05,
    key="stair_lr",
    **BOUND,
    format="%.3f",
    help="normalized GD moves each factor by η per step: "
    "it needs η ≈ 0.01 or less to settle; plain GD is stable at 0.5 here",
)
view.claims(steps)
pspec, tspec = specs()
prob = build(pspec)
check_gd(prob, tspec.with_(param="KQ"), steps=steps, svms=("nuc", "nuc", "fro"))
with explained():
    limits.check_gd(
        n=prob.n,
        T=prob.T,
        d=prob.d,
        steps=steps,
        param="KQ",
        record_every=steps // 200,
        queries=prob.queries,
    )
    out = cache.staircase_study(pspec, float(alpha), kind, float(lam), rule, int(steps), float(lr))
spec_step = charts.spectrum(out["spectrum"], x="step")
c1, c2 = st.columns(2)
c1.altair_chart(spec_step)
if alpha < 1:
    c2.altair_chart(
        charts.spectrum(
            out["spectrum"], x="rescaled", title="… against rescaled time (the staircase)"
        )
    )
else:
    c2.info("t / log(1/α) needs α < 1.")
about.explain(st, "stair-spectrum")
c1, c2 = st.columns(2)
loss_chart = charts.loss(out["loss"])
gap_chart = charts.gap(out["gap"], predicted=out["predicted"])
about.chart(c1, loss_chart, "stair-loss")
about.chart(c2, gap_chart, "stair-gap")
with st.container(border=True):
    view.verdict_panel(out, alpha, float(lr))
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
