"""Rank collapse: singular values of K(k)Q(k)ᵀ vs W(k), and the ranks of W^mm vs W^mm_*."""

import pandas as pd
import streamlit as st

from attsvm import studies
from attsvm.metrics import RANK_RTOL
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import about, cache, export_ui, hosted
from ui.sidebar import specs
from ui.views import rank as view
from ui.widgets import build, explained, train_both

view.intro()
# -- 1. during training ----------------------------------------------------------------------
pspec, tspec = specs()
st.subheader("1 · During training (sidebar problem)")
prob = build(pspec)
runs = train_both(pspec, prob, tspec)
st.altair_chart(
    charts.singular_values(
        frames.singular_values(runs),
        rtol=RANK_RTOL,
        title="Singular values of W(k), relative to the largest",
    )
)
about.explain(st, "rank-singular")
c1, c2 = st.columns([3, 2])
view.rank_over_training(runs, tspec.steps, c1)
with c2.container(border=True):
    view.final_ranks(pspec, prob, runs, tspec.steps)

# -- 2. SVM ranks as d, n, T vary ----------------------------------------------------------------
st.subheader("2 · Rank of W^mm vs W^mm_* as d, n, T vary")
cells, T, inst = view.sweep_controls()
parts = []
for n, d in hosted.progress(
    cells,
    key="rank",
    run_id=(tuple(cells), T, inst, pspec.attention),
    text=lambda c: f"n = {c[0]}, d = {c[1]}: {inst} × 2 SVMs…",
):
    with explained():
        cell = studies.RankCell(n=n, T=T, d=d, instances=inst, attention=pspec.attention)
        parts.append(cache.rank_cell(cell))
if not parts:
    st.stop()
res = pd.concat(parts)
agg = studies.rank_summary(res)
lines = charts.rank_lines(
    agg.dropna(subset=["rank"]),
    x="d",
    group="n",
    x_title="embedding dimension d",
    title=f"Mean rank over feasible instances (T = {T}, {pspec.attention}-attention)",
)
st.altair_chart(lines)
about.explain(st, "rank-lines")
view.feasible_table(agg)
export_ui.export_button(
    key="rank_export",
    problem=None,
    page="Rank collapse",
    specs=(pspec, tspec),
    charts={"svm_ranks": lines},
    tables={"ranks": agg, "instances": res},
)
