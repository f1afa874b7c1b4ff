"""The Basins page's panels: intro, its own small problem's controls, the table of every
selection's SVM status, where random starts land and the basin map's table."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attsvm.config import ProblemSpec, selection_label
from attsvm.studies import BasinsSettings
from attsvm_charts import explorer as charts
from ui.widgets import BOUND, explained


def intro():
    st.title("Local optima and basins")
    st.markdown(
        "A selection α (one token per sequence) is **locally optimal** when its SVM is feasible "
        "and every support token of sequence i scores below the selected one, "
        "γ_iα_i > γ_it. GD converges in direction to W^mm_α of such an α — the global one "
        "(α = opt) or a local one, depending on where it starts."
    )
    st.info(
        "This page lists all Tⁿ selections, so it uses its own small problem (below); the "
        "training settings (parameterization, loss, η, steps) come from the sidebar.",
        icon=":material/info:",
    )


def controls() -> tuple[ProblemSpec, BasinsSettings, BasinsSettings]:
    """The page's own problem and its GD starts: (problem settings, the random starts, the
    basin map's g × g grid of starts), both at the init radius ‖W(0)‖_F."""
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
    with explained():
        starts = BasinsSettings(runs=runs, radius=radius, inits_seed=0)
        plane = BasinsSettings(runs=grid**2, radius=radius, plane=True, inits_seed=1)
    return pspec, starts, plane


def selections(table, total: int, norm: str) -> dict:
    """Counts per status, a warning when opt has no feasible SVM, the locally optimal
    selections; returns {α: status} (adds a "selection" label column to `table`)."""
    table["selection"] = table["alpha"].map(selection_label)
    status = dict(zip(table["alpha"], table["status"], strict=True))
    counts = table["status"].value_counts()
    st.subheader(f"1 · All {total:,} selections")
    m = st.columns(4)
    for col, key in zip(m, charts.CLASS_ORDER, strict=True):
        col.metric(charts.CLASS_LABELS[key], int(counts.get(key, 0)))
    if counts.get("global", 0) == 0:
        st.warning(
            "The optimal selection opt has **no feasible SVM** here (or opt is not unique), "
            "so there is no global max-margin direction: GD can only reach local ones."
        )
    good = table[table["status"].isin(["global", "local"])]
    st.dataframe(
        good[["selection", "status", "objective"]].rename(
            columns={"objective": f"‖W^mm_α‖ ({'Frobenius' if norm == 'fro' else 'nuclear'})"}
        ),
        hide_index=True,
        key="bas_table",
    )
    st.caption(
        "Token indices are 0-based, one per sequence. A locally optimal α with a larger "
        "‖W^mm_α‖ has a smaller margin 1/‖W^mm_α‖."
    )
    return status


def landing_caption(land: pd.DataFrame, steps: int) -> None:
    """The share of random starts that reach each class of selection."""
    share = land["class"].value_counts(normalize=True)
    st.caption(
        f"{share.get('global', 0):.0%} of starts reach the global selection, "
        f"{share.get('local', 0):.0%} a local one, {share.get('feasible', 0):.0%} a selection "
        f"that is not locally optimal (GD not settled after {steps} steps, or a limit "
        f"the theory does not cover), {share.get('infeasible', 0):.0%} an infeasible one. "
        f"Smallest selected softmax weight over runs: {land['prob'].min():.3f}."
    )


def plane_table(plane: pd.DataFrame, col) -> None:
    """How many basin-map starts reach each selection, largest first, in `col`."""
    kinds = (
        plane.groupby(["selection", "class"])
        .size()
        .rename("starts")
        .reset_index()
        .assign(**{"α is": lambda df: df["class"].map(charts.CLASS_LABELS)})
        .drop(columns="class")
        .sort_values("starts", ascending=False)
    )
    col.dataframe(pd.DataFrame(kinds), hide_index=True, key="bas_plane_table")
