"""Local optima and basins: every selection's SVM status, and where GD from many starts lands."""

import numpy as np
import pandas as pd
import streamlit as st

from attsvm.config import ProblemSpec, selection_label
from attsvm.svm import MAX_SELECTIONS
from attsvm_charts import explorer as charts
from ui import about, cache, export_ui
from ui.sidebar import specs
from ui.views import basins as view
from ui.widgets import BOUND, build, check_gd, check_svm, explained, stop_if_one_token

view.intro()

_, tspec = specs()
c = st.columns(7)
n = c[0].number_input("n", 1, 8, 3, key="bas_n", **BOUND)
T = c[1].number_input("T", 1, 16, 3, key="bas_T", **BOUND)
d = c[2].number_input("d", 1, 32, 2, key="bas_d", **BOUND)
seed = c[3].number_input("data seed", 0, 100_000, 2, key="bas_seed", **BOUND)
runs = c[4].number_input("random starts", 1, 1024, 64, step=16, key="bas_runs", **BOUND)
radius = c[5].number_input(
    "init radius ‖W(0)‖_F",
    0.0,
    100.0,
    3.0,
    step=0.5,
    key="bas_radius",
    **BOUND,
    help="Starts far from 0 reach more basins; near 0 GD follows the "
    "initial gradient and usually lands in one.",
)
grid = c[6].number_input("map grid g (g×g starts)", 2, 40, 15, key="bas_grid", **BOUND)

pspec = ProblemSpec(n=int(n), T=int(T), d=int(d), seed=int(seed))
prob = build(pspec)
norm = tspec.norm
total = prob.T**prob.n
if total > MAX_SELECTIONS:
    st.error(
        f"**Too many selections:** Tⁿ = {prob.T}^{prob.n} = {total:,}; this page lists at "
        f"most {MAX_SELECTIONS:,}. Lower n or T.",
        icon="🚫",
    )
    st.stop()
check_svm(total, prob, norm)
stop_if_one_token(
    prob,
    "T = 1: the only selection is the single token of each sequence; "
    "there is nothing to choose and no basin to map.",
)

# -- 1. all selections -----------------------------------------------------------------------
with explained():
    table = cache.selections(pspec, norm)
status = view.selections(table, total, norm)

# -- 2. many random starts -------------------------------------------------------------------
st.subheader(f"2 · GD from {runs} random starts (‖W(0)‖_F = {radius:g})")
check_gd(prob, tspec, runs=int(runs) + int(grid) ** 2, svms=())
with explained():
    land = cache.batch_alphas(pspec, tspec, 0, int(runs), float(radius), False)
land["class"] = land["selection"].map(status)
land["selection"] = land["selection"].map(selection_label)
agg = land.groupby(["selection", "class"], as_index=False).size().rename(columns={"size": "runs"})
st.altair_chart(charts.selections_bar(agg, title="Where GD lands (selection at the last step)"))
about.explain(st, "basins-bar")
share = land["class"].value_counts(normalize=True)
st.caption(
    f"{share.get('global', 0):.0%} of starts reach the global selection, "
    f"{share.get('local', 0):.0%} a local one, {share.get('feasible', 0):.0%} a selection "
    f"that is not locally optimal (GD not settled after {tspec.steps} steps, or a limit "
    f"the theory does not cover), {share.get('infeasible', 0):.0%} an infeasible one. "
    f"Smallest selected softmax weight over runs: {land['prob'].min():.3f}."
)

# -- 3. basin map ----------------------------------------------------------------------------
st.subheader("3 · Basin map")
st.markdown(
    f"Starts W(0) = {radius:g}·(a·E₁ + b·E₂) on a {grid}×{grid} grid, a, b ∈ [−1, 1], "
    "with E₁ ⟂ E₂ two random unit directions (Frobenius); each cell is coloured by the "
    "selection GD reaches. A dot marks selections that are not the global one."
)
with explained():
    plane = cache.batch_alphas(pspec, tspec, 1, int(grid) ** 2, float(radius), True)
plane["class"] = plane["selection"].map(status)
plane["selection"] = plane["selection"].map(selection_label)
plane["a"] = np.round(plane["a"], 3)
plane["b"] = np.round(plane["b"], 3)
left, right = st.columns([3, 2])
left.altair_chart(charts.basin_map(plane, title="Selection reached from each start"))
about.explain(left, "basins-map")
kinds = (
    plane.groupby(["selection", "class"])
    .size()
    .rename("starts")
    .reset_index()
    .assign(**{"α is": lambda df: df["class"].map(charts.CLASS_LABELS)})
    .drop(columns="class")
    .sort_values("starts", ascending=False)
)
right.dataframe(pd.DataFrame(kinds), hide_index=True, key="bas_plane_table")
export_ui.export_button(
    key="bas_export",
    problem=prob,
    page="Local optima and basins",
    specs=(pspec, tspec),
    tables={"selections": table, "random_starts": land, "basin_map": plane},
)
