"""The Rank page's panels: the claim and how ranks are measured, the ranks during training
and at its end, the sweep's controls and its feasibility table."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import attsvm
from attsvm import limits
from attsvm.metrics import RANK_RTOL
from attsvm_charts import explorer as charts
from ui import about, cache
from ui.widgets import BOUND, check_svm, explained


def intro():
    st.title("Rank collapse")
    st.markdown(
        "Both SVM solutions see W only through W z_i, so their row space lies in span{z_i} and "
        "rank ≤ min(n, d). The nuclear-norm solution W^mm_*, the limit of K Qᵀ, is much lower "
        "rank still — and during training the small singular values of K(k)Q(k)ᵀ die off, "
        "while those of W(k) do not."
    )
    st.info(
        "**How ranks are measured here:** accurate solves (Clarabel, tolerances 1e-10, "
        "for the training run's SVMs; for the sweep, the exact least-distance program "
        "(W^mm) and a certified interior-point method (W^mm_*) of `attsvm.fastsvm`) and "
        f"the relative threshold σ_k > {RANK_RTOL:g}·σ_1; infeasible "
        "instances are excluded and counted separately. The authors' notebook differs on both "
        "counts: it counted an infeasible SVM as rank 1 (`matrix_rank(None) = 1`) and measured "
        "SCS output with an absolute 1e-7 threshold, which inflates nuclear-norm ranks (even "
        "above the bound n). The low-rank bias of K Qᵀ is stronger than the paper's plot "
        "suggests.",
        icon=":material/info:",
    )


def rank_over_training(runs: dict, steps: int, col) -> None:
    """The numerical rank of W(k) along each run, charted in `col`."""
    rk = pd.concat(
        [
            pd.DataFrame({"step": r.steps, "rank": attsvm.numerical_rank(r.W), "GD on": label})
            for label, r in runs.items()
        ]
    )
    col.altair_chart(
        charts.curves(
            rk,
            y="rank",
            color="GD on",
            x_max=steps,
            title=f"Numerical rank of W(k) (σ > {RANK_RTOL:g}·σ₁)",
            y_title="rank",
            fmt="d",
            colors={"W": "#1f77b4", "K Qᵀ": "#d62728"},
        )
    )
    about.explain(col, "rank-rank")


def final_ranks(pspec, prob, runs: dict, steps: int) -> None:
    """The ranks at the end of training beside those of both SVM solutions for K Qᵀ-GD's
    final selection α."""
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
        f"α = K Qᵀ-GD's final selection. {steps} steps; more steps sharpen "
        "the collapse. With m < d the paper's problem adds rank(W) ≤ m (not convex): "
        "compare the nuclear solution's rank with m."
    )


def sweep_controls() -> tuple[list, int, int]:
    """The sweep's (n, d) cells, T and instances per cell, priced and checked; stops the page
    when no cell is picked."""
    c = st.columns(4)
    ns = c[0].multiselect("n values", [2, 3, 5, 8, 10, 15], default=[5], key="rank_n", **BOUND)
    T = c[1].number_input("T", 2, 20, 5, key="rank_T", **BOUND)
    ds = c[2].multiselect(
        "d values",
        [1, 2, 3, 4, 5, 8, 10, 15, 20],
        default=[2, 3, 4, 5, 8, 10],
        key="rank_d",
        **BOUND,
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
                limits.bulk_svm_work(n=n, T=int(T), d=d, norm=nm, solves=int(inst))
                for n, d in cells
                for nm in ("fro", "nuc")
            ),
            what=f"{2 * len(cells) * int(inst):,} SVM solves",
        )
    return cells, int(T), int(inst)


def feasible_table(agg: pd.DataFrame) -> None:
    """The fraction of feasible instances per (n, d) cell."""
    feas = agg[agg["norm"] == "W^mm (Frobenius)"].pivot(index="n", columns="d", values="feasible")
    feas.columns = [f"d = {d}" for d in feas.columns]
    st.markdown("**Fraction of feasible instances** (excluded from the means above)")
    st.dataframe(
        feas.reset_index(),
        hide_index=True,
        key="rank_feasible",
        column_config={c: st.column_config.NumberColumn(format="%.2f") for c in feas.columns},
    )
