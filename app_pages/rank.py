"""Rank collapse: singular values of K(k)Q(k)ᵀ vs W(k), and the ranks of W^mm vs W^mm_*."""

import pandas as pd
import streamlit as st

import attsvm
from attsvm import limits, studies
from attsvm.metrics import RANK_RTOL
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import about, cache, export_ui, hosted
from ui.sidebar import specs
from ui.views import rank as view
from ui.widgets import BOUND, build, check_svm, explained, train_both

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
rk = pd.concat(
    [
        pd.DataFrame({"step": r.steps, "rank": attsvm.numerical_rank(r.W), "GD on": label})
        for label, r in runs.items()
    ]
)
c1, c2 = st.columns([3, 2])
c1.altair_chart(
    charts.curves(
        rk,
        y="rank",
        color="GD on",
        x_max=tspec.steps,
        title=f"Numerical rank of W(k) (σ > {RANK_RTOL:g}·σ₁)",
        y_title="rank",
        fmt="d",
        colors={"W": "#1f77b4", "K Qᵀ": "#d62728"},
    )
)
about.explain(c1, "rank-rank")
with c2.container(border=True):
    st.markdown("**Ranks at the end**")
    alpha = runs["K Qᵀ"].alpha
    with explained():
        fro = cache.svm(pspec, tuple(int(a) for a in alpha), "fro")
        nuc = cache.svm(pspec, tuple(int(a) for a in alpha), "nuc")
    rows = [
        ("W(k) after GD on W", attsvm.numerical_rank(runs["W"].W[-1])),
        ("K(k)Q(k)ᵀ after GD on K, Q", attsvm.numerical_rank(runs["K Qᵀ"].W[-1])),
        ("W^mm_α (Frobenius)", attsvm.numerical_rank(fro.W) if fro.feasible else "infeasible"),
        ("W^mm_*,α (nuclear)", attsvm.numerical_rank(nuc.W) if nuc.feasible else "infeasible"),
        ("bound min(n, d)", min(prob.n, prob.d)),
    ]
    st.dataframe(
        pd.DataFrame(rows, columns=["matrix", "rank"]).astype(str),
        hide_index=True,
        key="rank_final",
    )
    st.caption(
        f"α = K Qᵀ-GD's final selection. {tspec.steps} steps; more steps sharpen "
        "the collapse. With m < d the paper's problem adds rank(W) ≤ m (not convex): "
        "compare the nuclear solution's rank with m."
    )

# -- 2. SVM ranks as d, n, T vary ----------------------------------------------------------------
st.subheader("2 · Rank of W^mm vs W^mm_* as d, n, T vary")
c = st.columns(4)
ns = c[0].multiselect("n values", [2, 3, 5, 8, 10, 15], default=[5], key="rank_n", **BOUND)
T = c[1].number_input("T", 2, 20, 5, key="rank_T", **BOUND)
ds = c[2].multiselect(
    "d values", [1, 2, 3, 4, 5, 8, 10, 15, 20], default=[2, 3, 4, 5, 8, 10], key="rank_d", **BOUND
)
inst = c[3].number_input(
    "instances per cell",
    1,
    100,
    5,
    key="rank_inst",
    **BOUND,
    help="data seeds 0, 1, …; the paper used 100",
)
if not ns or not ds:
    st.info("Pick at least one n and one d.")
    st.stop()
cells = [(n, d) for n in sorted(ns) for d in sorted(ds)]
check_svm(2 * len(cells) * int(inst))
with explained():
    limits.check_work(
        sum(
            limits.svm_work(n=n, T=int(T), d=d, norm=nm, solves=int(inst))
            for n, d in cells
            for nm in ("fro", "nuc")
        ),
        what=f"{2 * len(cells) * int(inst):,} SVM solves",
    )
parts = []
for n, d in hosted.progress(
    cells,
    key="rank",
    run_id=(tuple(cells), int(T), int(inst), pspec.attention),
    text=lambda c: f"n = {c[0]}, d = {c[1]}: {inst} × 2 SVMs…",
):
    with explained():
        parts.append(cache.rank_cell(n, int(T), d, 0, int(inst), pspec.attention))
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
feas = agg[agg["norm"] == "W^mm (Frobenius)"].pivot(index="n", columns="d", values="feasible")
feas.columns = [f"d = {d}" for d in feas.columns]
st.markdown("**Fraction of feasible instances** (excluded from the means above)")
st.dataframe(
    feas.reset_index(),
    hide_index=True,
    key="rank_feasible",
    column_config={c: st.column_config.NumberColumn(format="%.2f") for c in feas.columns},
)
export_ui.export_button(
    key="rank_export",
    problem=None,
    page="Rank collapse",
    specs=(pspec, tspec),
    charts={"svm_ranks": lines},
    tables={"ranks": agg, "instances": res},
)
