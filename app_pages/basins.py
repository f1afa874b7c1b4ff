"""Local optima and basins: every selection's SVM status, and where GD from many starts lands."""

import numpy as np
import streamlit as st

from attsvm.config import selection_label
from attsvm.svm import MAX_SELECTIONS
from attsvm_charts import explorer as charts
from ui import about, cache, export_ui
from ui.sidebar import specs
from ui.views import basins as view
from ui.widgets import build, check_gd, check_svm, explained, stop_if_one_token

view.intro()

_, tspec = specs()
pspec, starts, plane_starts = view.controls()
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
st.subheader(f"2 · GD from {starts.runs} random starts (‖W(0)‖_F = {starts.radius:g})")
check_gd(prob, tspec, runs=starts.runs + plane_starts.runs, svms=())
with explained():
    land = cache.basins(pspec, tspec, starts)
land["class"] = land["selection"].map(status)
land["selection"] = land["selection"].map(selection_label)
agg = land.groupby(["selection", "class"], as_index=False).size().rename(columns={"size": "runs"})
st.altair_chart(charts.selections_bar(agg, title="Where GD lands (selection at the last step)"))
about.explain(st, "basins-bar")
view.landing_caption(land, tspec.steps)

# -- 3. basin map ----------------------------------------------------------------------------
st.subheader("3 · Basin map")
g = plane_starts.grid
st.markdown(
    f"Starts W(0) = {starts.radius:g}·(a·E₁ + b·E₂) on a {g}×{g} grid, a, b ∈ [−1, 1], "
    "with E₁ ⟂ E₂ two random unit directions (Frobenius); each cell is coloured by the "
    "selection GD reaches. A dot marks selections that are not the global one."
)
with explained():
    plane = cache.basins(pspec, tspec, plane_starts)
plane["class"] = plane["selection"].map(status)
plane["selection"] = plane["selection"].map(selection_label)
plane["a"] = np.round(plane["a"], 3)
plane["b"] = np.round(plane["b"], 3)
left, right = st.columns([3, 2])
left.altair_chart(charts.basin_map(plane, title="Selection reached from each start"))
about.explain(left, "basins-map")
view.plane_table(plane, right)
export_ui.export_button(
    key="bas_export",
    problem=prob,
    page="Local optima and basins",
    specs=(pspec, tspec),
    tables={"selections": table, "random_starts": land, "basin_map": plane},
)
