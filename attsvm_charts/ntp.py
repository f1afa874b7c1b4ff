"""Altair charts of next-token prediction (arXiv 2403.08081): the two experiments'
paper-style panels (named by their records, `attsvm_charts.experiments.chart`, so by the CLI and
the app) and the page's token-priority graphs. Pure: tidy DataFrames in, Altair charts out;
no Streamlit."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .bands import band as _band

LABELS = {
    "corr_svm": "corr(W, W^svm)",
    "corr_fit": "corr(W, W^fin + R·W^svm)",
    "corr_perp": "corr(W^svm, W − Π_S W)",
    "wfin_gap": "‖Π_S W − W^fin‖_F",
    "top_mass": "attention on the top SCC",
    "loss": "loss",
    "R": "R(τ)",
    "corr_gmm": "corr(W, W^gmm) (global Graph-SVM)",
    "corr_lmm": "corr(W, W^lmm) (local Graph-SVM)",
    "corr_fit_gmm": "corr(W, W^fin + R·W^gmm)",
    "corr_fit_lmm": "corr(W, W^fin_l + R·W^lmm)",
    "selected_mass": "attention on the selected tokens C_i",
}


def _panel(c: pd.DataFrame, measures, *, title, y_title, log_y=False):
    sub = c[c.measure.isin(measures)].assign(curve=lambda d: d.measure.map(LABELS))
    return _band(sub, x="step", y="mean", color="curve", title=title, y_title=y_title, log_y=log_y)


def ntp_global(res) -> alt.HConcatChart:
    c = res.frames["curves"].copy()
    tail = c[c.measure == "top_mass"].assign(measure="tail", mean=lambda d: 1 - d["mean"])
    LABELS["tail"] = "1 − attention on the top SCC"
    panels = [
        _panel(
            c, ["corr_svm", "corr_fit", "corr_perp"], title="Correlations", y_title="correlation"
        ),
        _panel(c, ["wfin_gap"], title="‖Π_S W(τ) − W^fin(τ)‖", y_title="Frobenius norm"),
        _panel(
            pd.concat([tail]),
            ["tail"],
            title="Hard retrieval: 1 − top-SCC mass",
            y_title="mass (log)",
            log_y=True,
        ),
    ]
    n = res.settings.get("instances")
    return (
        alt.hconcat(*panels)
        .resolve_scale(color="independent")
        .properties(
            title=f"Next-token prediction, global convergence: mean ± std over {n} instances"
        )
    )


def ntp_local(res) -> alt.HConcatChart:
    c = res.frames["curves"].copy()
    panels = [
        _panel(
            c,
            ["corr_gmm", "corr_lmm"],
            title="Correlation with the Graph-SVMs",
            y_title="correlation",
        ),
        _panel(c, ["selected_mass"], title="Attention on the selected tokens", y_title="mass"),
    ]
    n = res.settings.get("instances")
    return (
        alt.hconcat(*panels)
        .resolve_scale(color="independent")
        .properties(
            title=f"Next-token prediction, local convergence ('gen' head, squared loss): "
            f"mean ± std over {n} instances"
        )
    )


# -- the page's charts ---------------------------------------------------------------------
def graph_frame(adj: np.ndarray, scc: np.ndarray, k: int) -> pd.DataFrame:
    """Tidy adjacency of G^(k): one row per (from, to) with SCC ids and the edge kind."""
    K = adj.shape[1]
    a, b = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
    row = scc[k]
    kind = np.where(~adj[k], "", np.where(row[a] == row[b], "inside an SCC", "between SCCs"))
    return pd.DataFrame(
        {
            "from": a.ravel(),
            "to": b.ravel(),
            "scc_from": row[a].ravel(),
            "scc_to": row[b].ravel(),
            "edge": kind.ravel(),
        }
    )


def priority_heatmap(df: pd.DataFrame, *, title: str, size: int = 200) -> alt.LayerChart:
    """Adjacency heat map of one TPG, rows and columns ordered by SCC (top SCC first):
    blocks on the diagonal are the SCCs (soft composition), cells off it the strict
    priorities (hard retrieval)."""
    order = (
        df[["from", "scc_from"]]
        .drop_duplicates()
        .sort_values(["scc_from", "from"])["from"]
        .astype(str)
        .tolist()
    )
    base = alt.Chart(df.assign(src=df["from"].astype(str), dst=df["to"].astype(str)))
    cells = base.mark_rect(stroke="white").encode(
        x=alt.X("dst:N", sort=order, title="beaten token j"),
        y=alt.Y("src:N", sort=order, title="winner (label) y"),
        color=alt.Color(
            "edge:N",
            title="edge y → j",
            scale=alt.Scale(
                domain=["", "inside an SCC", "between SCCs"],
                range=["#f4f4f4", "#d62728", "#1f77b4"],
            ),
            legend=alt.Legend(orient="bottom"),
        ),
        tooltip=[
            alt.Tooltip("src:N", title="y"),
            alt.Tooltip("dst:N", title="j"),
            alt.Tooltip("edge:N"),
            alt.Tooltip("scc_from:Q", title="SCC of y"),
            alt.Tooltip("scc_to:Q", title="SCC of j"),
        ],
    )
    text = base.mark_text(fontSize=9, color="#555").encode(
        x=alt.X("dst:N", sort=order),
        y=alt.Y("src:N", sort=order),
        text=alt.condition("datum.src == datum.dst", "scc_from:Q", alt.value("")),
    )
    return (cells + text).properties(title=title, width=size, height=size)


def attention_bars(df: pd.DataFrame, *, title: str) -> alt.Chart:
    """Final attention per sequence and token, coloured by whether the token is in the
    sequence's top SCC. df: seq, token, mass, top."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("token:N", title="token id"),
            y=alt.Y("mass:Q", title="attention", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color(
                "top:N",
                title="in the top SCC",
                scale=alt.Scale(domain=[True, False], range=["#d62728", "#999"]),
                legend=alt.Legend(orient="bottom"),
            ),
            column=alt.Column("seq:N", title="sequence"),
            tooltip=["seq:N", "token:N", alt.Tooltip("mass:Q", format=".4g"), "top:N"],
        )
        .properties(title=title, width=60, height=140)
    )


def run_charts(df: pd.DataFrame, steps: int) -> tuple:
    """The page's run charts from `attsvm.ntp.session.frames`: hard retrieval (correlations,
    top-SCC mass), soft composition (‖Π_S W − W^fin‖, log scale) and the growth R(τ) with
    the loss (each its own axis: R reaches ~10 while the gap falls to ~lr)."""
    from .explorer import curves

    long = df.melt(id_vars="step", var_name="measure").assign(
        measure=lambda x: x.measure.map(LABELS)
    )
    pick = lambda ms: long[long.measure.isin([LABELS[m] for m in ms])]  # noqa: E731
    hard = curves(
        pick(("corr_svm", "corr_fit", "top_mass")),
        y="value",
        color="measure",
        x_max=steps,
        title="Hard retrieval: correlations and top-SCC mass",
        y_title="value",
    )
    gap = pick(("wfin_gap",))
    soft = curves(
        gap[gap.value > 0],
        y="value",
        color="measure",
        x_max=steps,
        log_y=True,
        title="Soft composition: ‖Π_S W − W^fin‖",
        y_title="Frobenius norm (log)",
    )
    growth = curves(
        pick(("R", "loss")),
        y="value",
        color="measure",
        x_max=steps,
        title="R(τ) = ⟨W, W^svm⟩/‖W^svm‖² and the loss",
        y_title="value",
    )
    return hard, soft, growth
