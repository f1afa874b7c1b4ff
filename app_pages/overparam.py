"""Over-parameterization: sweep d; how often GD reaches the global selection, and feasibility."""

import pandas as pd
import streamlit as st

from attsvm import studies
from attsvm.config import ProblemSpec
from attsvm_charts import explorer as charts
from ui import about, cache, export_ui, hosted
from ui.sidebar import specs
from ui.views import overparam as view
from ui.widgets import BOUND, build, check_gd, check_svm, explained

D_CHOICES = [1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 30, 40, 64]

view.intro()

pspec_sb, tspec = specs()
if pspec_sb.source != "random":
    st.info(
        "The sidebar shows a 2-D preset; this sweep uses random problems with the "
        "default n = 6, T = 8 instead.",
        icon=":material/info:",
    )
    pspec_sb = ProblemSpec()
c1, c2 = st.columns([3, 1])
ds = c1.multiselect(
    "dimensions d",
    D_CHOICES,
    default=[2, 4, 8, 12],
    key="ovp_d",
    **BOUND,
    help="n, T, seed, attention and head come from the sidebar",
)
runs = c2.number_input("problems per d", 1, 500, 10, step=5, key="ovp_runs", **BOUND)
if not ds:
    st.info("Pick at least one dimension d.")
    st.stop()
ds = sorted(ds)
base = pspec_sb.with_(d=max(ds))
norm = tspec.norm
check_gd(build(base), tspec, runs=int(runs) * len(ds), svms=())
check_svm(2 * int(runs) * len(ds), build(base), norm)  # opt's SVM + GD's selection's, per run

parts = []
for d in hosted.progress(
    ds,
    key="ovp",
    run_id=(pspec_sb, tspec, tuple(ds), int(runs)),
    text=lambda d: f"d = {d}: {runs} GD runs and their SVMs…",
):
    with explained():
        parts.append(cache.overparam_cell(pspec_sb.with_(d=d), tspec, int(runs)))
if not parts:
    st.stop()
res = pd.concat(parts)

frac = studies.overparam_fractions(res)
bars = charts.fraction_bars(
    frac,
    title=f"n = {pspec_sb.n}, T = {pspec_sb.T}, {runs} problems per d, "
    f"{tspec.steps} steps of {'normalized' if tspec.normalized else 'plain'} GD",
)
st.altair_chart(bars)
about.explain(st, "overparam-bars")
view.results(frac, res, pspec_sb)
export_ui.export_button(
    key="ovp_export",
    problem=None,
    page="Over-parameterization",
    specs=(pspec_sb, tspec),
    charts={"fractions": bars},
    tables={"fractions": frac, "runs": res},
)
