"""Altair charts of the paper's experiments: `chart(result)` for any `attsvm.experiments`
result (pure: tidy DataFrames in, an Altair chart out; no Streamlit here).

Used by the Reproduce page and by `python -m attsvm reproduce` (which saves them as HTML).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .bands import H, W
from .bands import band as _band
from .optimizers import steepest_heatmap

PARAM_LABEL = {"W": "GD on W", "KQ": "GD on (K, Q)"}
MEASURE_LABEL = {
    "softmax": "softmax of the selected token",
    "corr_fro": "corr with W^mm_α (Frobenius)",
    "corr_nuc": "corr with W^mm_*,α (nuclear)",
}
SVM_COLORS = alt.Scale(
    domain=["corr with W^mm_α (Frobenius)", "corr with W^mm_*,α (nuclear)"],
    range=["#1f77b4", "#d62728"],
)
LOG = alt.Scale(type="log")


def local_convergence(res) -> alt.VConcatChart:
    c = res.frames["curves"].copy()
    c["curve"] = c["measure"].map(MEASURE_LABEL)
    c["GD"] = c["param"].map(PARAM_LABEL)
    soft = _band(
        c[c.measure == "softmax"],
        x="step",
        y="mean",
        color="GD",
        title="(a) softmax probability of the selected token",
        y_title="probability",
    )
    panels = [soft]
    for param in res.settings["params"]:
        sub = c[(c.param == param) & (c.measure != "softmax")]
        panels.append(
            _band(
                sub,
                x="step",
                y="mean",
                color="curve",
                scale=SVM_COLORS,
                title=f"correlation of {PARAM_LABEL[param]}",
                y_title="correlation",
            )
        )
    return (
        alt.hconcat(*panels)
        .resolve_scale(color="independent")
        .properties(title="Local convergence: mean ± std over runs (each curve named by its SVM)")
    )


def geometry(res) -> alt.LayerChart:
    """Long because it is one layered Altair chart (tokens, SVM rays, GD paths, labels)."""
    tokens, paths, rays = res.frames["tokens"], res.frames["paths"], res.frames["rays"]
    paths = paths.assign(GD=paths["param"].map(PARAM_LABEL))
    paths = paths[paths.step % 5 == 0]
    rays = rays.assign(
        SVM=rays["svm"].map({"fro": "W^mm z_i (Frobenius)", "nuc": "W^mm_* z_i (nuclear)"})
    )
    ray = (
        alt.Chart(rays)
        .mark_rule(strokeDash=[6, 3], strokeWidth=2)
        .encode(
            x="x0:Q",
            y="y0:Q",
            x2="x:Q",
            y2="y:Q",
            color=alt.Color("query:N", title="query"),
            strokeDash=alt.StrokeDash("SVM:N", title="SVM direction"),
            tooltip=["SVM", "query"],
        )
    )
    path = (
        alt.Chart(paths)
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("x:Q", title="(W(k) z_i)₁"),
            y=alt.Y("y:Q", title="(W(k) z_i)₂"),
            color=alt.Color("query:N"),
            detail="GD:N",
            order="step:Q",
            opacity=alt.Opacity("GD:N", scale=alt.Scale(range=[1.0, 0.55]), title="path"),
            tooltip=[
                "GD",
                "query",
                "step",
                alt.Tooltip("x:Q", format=".3g"),
                alt.Tooltip("y:Q", format=".3g"),
            ],
        )
    )
    scale = float(np.abs(paths[["x", "y"]].to_numpy()).max() or 1.0)
    tok = tokens.assign(
        x=tokens.x * scale / 2,
        y=tokens.y * scale / 2,
        kind=np.where(tokens.optimal, "optimal token", "token"),
    )
    pts = (
        alt.Chart(tok)
        .mark_point(filled=True, size=70)
        .encode(
            x="x:Q",
            y="y:Q",
            shape=alt.Shape("kind:N", title=None),
            color=alt.value("#555"),
            tooltip=["seq", "token", alt.Tooltip("score:Q", format=".3f"), "optimal"],
        )
    )
    return (ray + path + pts).properties(
        width=420,
        height=360,
        title=f"{res.name}: paths W(k) z_i of GD on W and on (K, Q) against the SVM rays "
        f"(tokens scaled ×{scale / 2:.3g})",
    )


def _per_d(chart: alt.Chart, **encode) -> alt.FacetChart:
    """`chart` encoded with `encode`, in one 170 × 170 panel per d."""
    return (
        chart.encode(**encode)
        .properties(width=170, height=170)
        .facet(column=alt.Column("d:O", title="d"))
    )


def multi_token(res) -> alt.VConcatChart:
    c = res.frames["curves"].copy()
    c["direction"] = c["target"].map(
        {
            "svmeq": "W^SVMeq = W^fin + R·W^dir",
            "dir": 'W^dir ("W^mm")',
            "one_token": "one-token SVM",
        }
    )
    c = c[c["mean"] > 0]
    top = _per_d(
        alt.Chart(c).mark_line(),
        x=alt.X("step:Q", title="iteration"),
        y=alt.Y("mean:Q", scale=LOG, title="mean 1 − corr"),
        color=alt.Color("direction:N", title=None, legend=alt.Legend(orient="bottom")),
        strokeDash=alt.StrokeDash("direction:N", legend=None),
        tooltip=[
            "d",
            "direction",
            "step",
            alt.Tooltip("mean:Q", format=".3g"),
            alt.Tooltip("median:Q", format=".3g"),
            "count",
        ],
    )
    sc = res.frames["scatter"]
    sc = sc[(sc.max_masked_prob > 0) & (sc.one_minus_corr > 0)]
    bottom = _per_d(
        alt.Chart(sc).mark_circle(size=22, opacity=0.6),
        x=alt.X("max_masked_prob:Q", scale=LOG, title="largest masked softmax"),
        y=alt.Y("one_minus_corr:Q", scale=LOG, title="final 1 − corr(W, W^SVMeq)"),
        color=alt.Color("multi_token:N", title="≥ 2 selected tokens"),
        tooltip=[
            "d",
            "seed",
            alt.Tooltip("max_masked_prob:Q", format=".2e"),
            alt.Tooltip("one_minus_corr:Q", format=".3g"),
            "mean_selected",
        ],
    )
    return (
        alt.vconcat(top, bottom)
        .resolve_scale(color="independent")
        .properties(title="Multi-token selection (ReLU head): GD against the generalized SVM")
    )


def svm_rank(res) -> alt.HConcatChart:
    c = res.frames["cells"].copy()
    c["SVM"] = c["norm"].map({"fro": "W^mm (Frobenius)", "nuc": "W^mm_* (nuclear)"})
    c["n, T"] = "n=" + c["n"].astype(str) + ", T=" + c["T"].astype(str)
    c = c.dropna(subset=["mean_rank"])
    style = res.settings.get("style", "accurate")
    how = (
        "accurate solves, rank σ > "
        + f"{res.settings.get('rtol', 1e-4):g}·σ₁, feasible instances only"
        if style == "accurate"
        else "published style: SCS, abs tol 1e-7, infeasible → 1"
    )

    def over_d(data, y: str, y_title: str, tooltip: list, **more) -> alt.Chart:
        """`y` against d, one line per (n, T)."""
        return (
            alt.Chart(data)
            .mark_line(point=True)
            .encode(
                x=alt.X("d:Q", title="d"),
                y=alt.Y(f"{y}:Q", title=y_title),
                color=alt.Color("n, T:N", title=None),
                tooltip=["n", "T", "d", *tooltip],
                **more,
            )
        )

    lines = over_d(
        c,
        "mean_rank",
        "mean rank",
        [
            "SVM",
            alt.Tooltip("mean_rank:Q", format=".3f"),
            "instances",
            "drawn",
            alt.Tooltip("feasible_fraction:Q", format=".3f"),
        ],
        strokeDash=alt.StrokeDash("SVM:N", title=None),
    ).properties(width=380, height=280, title=f"Rank of the SVM solutions ({how})")
    feas = over_d(
        c[c.norm == "fro"],
        "feasible_fraction",
        "fraction feasible",
        [alt.Tooltip("feasible_fraction:Q", format=".3f"), "drawn"],
    ).properties(width=260, height=280, title="Feasible Att-SVM at opt (reported separately)")
    return alt.hconcat(lines, feas)


def overparameterization(res) -> alt.Chart:
    f = res.frames["fractions"]
    long = pd.DataFrame(
        {
            "d": np.repeat(f["d"].to_numpy(), 3),
            "outcome": ["global (α = opt)", "locally optimal, not global", "not locally optimal"]
            * len(f),
            "share": np.column_stack(
                [f["global"], f["local"] - f["global"], f["not_local"]]
            ).ravel(),
        }
    )
    order = ["global (α = opt)", "locally optimal, not global", "not locally optimal"]
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("d:O", title="d"),
            y=alt.Y("share:Q", title="share of GD runs", stack="zero"),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(domain=order, range=["#d62728", "#1f77b4", "#17becf"]),
                sort=order,
                title=None,
            ),
            order=alt.Order("outcome:N"),
            tooltip=["d", "outcome", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(
            width=380,
            height=260,
            title="Where GD ends as d grows (n = %d, T = %d)"
            % (res.settings["n"], res.settings["T"]),
        )
    )


def regularization_path(res) -> alt.Chart:
    p = res.frames["path"]
    long = pd.concat(
        [
            p.assign(SVM="W^mm (Frobenius)", corr=p.corr_fro),
            p.assign(SVM="W^mm_* (nuclear)", corr=p.corr_nuc),
        ]
    )
    long["path"] = long["param"].map({"W": "W_R (‖W‖ ≤ R)", "KQ": "K_R Q_Rᵀ (‖K‖²+‖Q‖² ≤ 2R)"})
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("R:Q", scale=alt.Scale(type="log"), title="R"),
            y=alt.Y("corr:Q", title="correlation", scale=alt.Scale(zero=False)),
            color=alt.Color("SVM:N", scale=alt.Scale(range=["#1f77b4", "#d62728"]), title=None),
            strokeDash=alt.StrokeDash("path:N", title=None),
            tooltip=[
                "path",
                "SVM",
                alt.Tooltip("R:Q", format=".3g"),
                alt.Tooltip("corr:Q", format=".5f"),
            ],
        )
        .properties(width=420, height=280, title="Regularization path against the SVM directions")
    )


def sequence_causal(res) -> alt.LayerChart:
    c = res.frames["curves"]
    return _band(
        c,
        x="step",
        y="mean",
        color="mode",
        title="corr(W(k), per-query W^mm_α), mean ± std",
        y_title="correlation",
        width=420,
        height=280,
    )


def lp_mirror_descent(res) -> alt.HConcatChart | alt.VConcatChart:
    h = res.frames["heatmap"].assign(
        run=lambda d: "MD p=" + d.p.map("{:g}".format),
        svm=lambda d: "ℓ" + d.p_svm.map("{:g}".format) + "-SVM",
    )
    base = alt.Chart(h).encode(
        x=alt.X("svm:N", title="Att-SVM at the final selection"), y=alt.Y("run:N", title=None)
    )
    heat = base.mark_rect().encode(
        color=alt.Color("corr:Q", scale=alt.Scale(scheme="viridis"), title="median corr"),
        tooltip=["run:N", "svm:N", alt.Tooltip("corr:Q", format=".5f")],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("corr:Q", format=".4f"),
        color=alt.condition("datum.corr > 0.97", alt.value("black"), alt.value("white")),
    )
    left = (heat + text).properties(
        title="corr(W, ℓp'-AttSVM): the diagonal is each run's own p", width=W, height=H
    )
    b = res.frames["by_p"].assign(run=lambda d: "MD p=" + d.p.map("{:g}".format))
    right = (
        alt.Chart(b)
        .mark_bar()
        .encode(
            x=alt.X(
                "share_opt:Q", title="share of runs selecting opt", scale=alt.Scale(domain=[0, 1])
            ),
            y=alt.Y("run:N", title=None),
            tooltip=["run:N", "share_opt:Q", "runs:Q"],
        )
        .properties(title="global tokens selected", width=200, height=H)
    )
    top = alt.hconcat(left, right).properties(
        title="ℓp mirror descent: median over instances (arXiv 2410.14581)"
    )
    if "steepest_table" not in res.frames:
        return top
    return alt.vconcat(top, steepest_heatmap(res))


def adaptive_steps(res) -> alt.HConcatChart:
    c = res.frames["curves"].query("step > 0").copy()
    c["rule"] = c["optimizer"].map({"gd": "GD", "ngd": "NGD", "polyak": "Polyak"})
    x = alt.X("step:Q", scale=alt.Scale(type="log"), title="iteration")
    col = alt.Color("rule:N", title=None, legend=alt.Legend(orient="bottom"))
    corr = (
        alt.Chart(c)
        .mark_line()
        .encode(
            x=x,
            y=alt.Y("corr_median:Q", title="median corr(W, W^mm_α)", scale=alt.Scale(zero=False)),
            color=col,
            tooltip=["rule:N", "step:Q", alt.Tooltip("corr_median:Q", format=".6f")],
        )
        .properties(title="direction", width=W, height=H)
    )
    mass = (
        alt.Chart(c)
        .mark_line()
        .encode(
            x=x,
            y=alt.Y("log10_off_mass:Q", title="log10 median softmax mass off α"),
            color=col,
            tooltip=["rule:N", "step:Q", alt.Tooltip("log10_off_mass:Q", format=".1f")],
        )
        .properties(title="sparsification", width=W, height=H)
    )
    return alt.hconcat(corr, mass).properties(
        title="GD vs NGD vs Polyak from W = 0 (arXiv 2402.05738)"
    )


def real_words(res) -> alt.VConcatChart:
    """Real words: which word GD selects, corr(W(k), W^mm_α), SVM feasibility against d.

    Long because it draws three panels, each with its own encoding."""
    runs = res.frames["runs"].melt(
        id_vars=["task"],
        value_vars=["selected_is_key", "opt_is_key"],
        var_name="measure",
        value_name="share",
    )
    runs["measure"] = runs["measure"].map(
        {"selected_is_key": "GD's word is the key word", "opt_is_key": "opt is the key word"}
    )
    bars = (
        alt.Chart(runs)
        .mark_bar()
        .encode(
            x=alt.X("share:Q", scale=alt.Scale(domain=[0, 1]), title="share of sentences"),
            y=alt.Y("measure:N", title=None),
            row=alt.Row("task:N", title=None),
            color=alt.Color(
                "measure:N", legend=None, scale=alt.Scale(range=["#525252", "#a3a3a3"])
            ),
            tooltip=["task:N", "measure:N", alt.Tooltip("share:Q", format=".3f")],
        )
        .properties(width=W - 80, height=40, title="the word attention selects")
    )
    c = res.frames["curves"].dropna(subset=["corr"])
    task = alt.Color("task:N", title="task", legend=alt.Legend(orient="right"))
    corr = (
        alt.Chart(c)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="iteration"),
            y=alt.Y("corr:Q", title="corr(W(k), W^mm_α)", scale=alt.Scale(zero=False)),
            color=task,
            tooltip=["task:N", "step:Q", alt.Tooltip("corr:Q", format=".5f")],
        )
        .properties(title="direction of W(k)", width=W, height=H)
    )
    f = res.frames["feasibility"]
    feas = (
        alt.Chart(f)
        .mark_line(point=True)
        .encode(
            x=alt.X("d:Q", title="d after PCA"),
            y=alt.Y(
                "feasible_share:Q",
                scale=alt.Scale(domain=[0, 1]),
                title="share of feasible Att-SVMs at opt",
            ),
            color=task,
            tooltip=[
                "task:N",
                "d:Q",
                "subsets:Q",
                "ties:Q",
                "whole_task:N",
                alt.Tooltip("feasible_share:Q", format=".2f"),
            ],
        )
        .properties(title="feasibility of the SVM on real vectors", width=W, height=H)
    )
    # the bars' colours say the measure (no legend): their own scale, so the task legend stays
    return (
        alt.vconcat(alt.hconcat(corr, feas), bars)
        .resolve_scale(color="independent")
        .properties(title="Real words (GloVe 6B 50-d)")
    )


def chart(res):
    """The paper-style chart of an experiment result: the builder its record names
    (`attsvm.experiments.record(name).chart`, "module:function")."""
    import importlib

    from attsvm.experiments import record

    module, function = record(res.name).chart.split(":")
    return getattr(importlib.import_module(module), function)(res)
