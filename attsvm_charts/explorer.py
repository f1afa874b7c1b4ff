"""Pure Altair chart builders: tidy DataFrame in, `alt.Chart` out (no Streamlit here).

Every chart carries tooltips. Curves share one builder (`curves`) so the playground's
panels look alike and all accept a vertical rule at the scrubbed iteration.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

HEIGHT = 290  # Streamlit fits the whole chart (title, axes, legend) in this
CLASS_ORDER = ["global", "local", "feasible", "infeasible"]
CLASS_LABELS = {
    "global": "global (α = opt)",
    "local": "locally optimal",
    "feasible": "not locally optimal (SVM feasible)",
    "infeasible": "SVM infeasible",
}
CLASS_COLORS = ["#2e7d32", "#1f77b4", "#ff7f0e", "#9e9e9e"]
SEQ_COLORS = [
    "#1b9e77",
    "#d95f02",
    "#7570b3",
    "#e7298a",
    "#66a61e",
    "#e6ab02",
    "#a6761d",
    "#666666",
]
NORM_COLORS = {"W^mm (Frobenius)": "#1f77b4", "W^mm_* (nuclear)": "#d62728"}


def _class_scale():
    return alt.Scale(domain=[CLASS_LABELS[c] for c in CLASS_ORDER], range=CLASS_COLORS)


def _reference_rules(x: str, hline, hline_label: str, rule_x) -> list:
    """`curves`' optional rules: a dashed horizontal reference at y = `hline` and a vertical
    one at x = `rule_x` (the step shown)."""
    layers = []
    if hline is not None:
        layers.append(
            alt.Chart(pd.DataFrame({"y": [hline], "label": [hline_label]}))
            .mark_rule(strokeDash=[4, 4], color="gray")
            .encode(
                y="y:Q",
                tooltip=[
                    alt.Tooltip("label:N", title="reference"),
                    alt.Tooltip("y:Q", format=".3g"),
                ],
            )
        )
    if rule_x is not None:
        layers.append(
            alt.Chart(pd.DataFrame({x: [rule_x]}))
            .mark_rule(color="black", strokeWidth=1.5)
            .encode(x=f"{x}:Q", tooltip=[alt.Tooltip(f"{x}:Q", title="shown")])
        )
    return layers


def curves(
    df: pd.DataFrame,
    *,
    y: str,
    title: str,
    y_title: str,
    x: str = "step",
    color: str | None = None,
    color_title: str | None = None,
    log_y: bool = False,
    rule_x: float | None = None,
    x_max: float | None = None,
    y_domain: tuple | None = None,
    hline: float | None = None,
    hline_label: str = "",
    dash: str | None = None,
    height: int = HEIGHT,
    colors: dict | None = None,
    fmt: str = ".4g",
) -> alt.LayerChart:
    """Lines of `y` against `x` (one per `color` value), optional rule at x = `rule_x`
    and horizontal reference at y = `hline`."""
    xs = alt.Scale(domain=[0, x_max]) if x_max else alt.Undefined
    ys = alt.Scale(
        type="log" if log_y else "linear",
        domain=list(y_domain) if y_domain else alt.Undefined,
        zero=False,
    )
    enc = dict(
        x=alt.X(f"{x}:Q", title="iteration k" if x == "step" else x, scale=xs),
        y=alt.Y(f"{y}:Q", title=y_title, scale=ys),
    )
    tips = [alt.Tooltip(f"{x}:Q", title=x), alt.Tooltip(f"{y}:Q", title=y_title, format=fmt)]
    if color:
        cs = (
            alt.Scale(domain=list(colors), range=list(colors.values())) if colors else alt.Undefined
        )
        enc["color"] = alt.Color(
            f"{color}:N",
            title=color_title or color,
            scale=cs,
            legend=alt.Legend(orient="bottom", labelLimit=260),
        )
        tips.insert(0, alt.Tooltip(f"{color}:N", title=color_title or color))
    if dash:
        enc["strokeDash"] = alt.StrokeDash(
            f"{dash}:N", title=dash, legend=alt.Legend(orient="bottom")
        )
        tips.insert(0, alt.Tooltip(f"{dash}:N"))
    base = alt.Chart(df).mark_line(point=len(df) < 40, clip=True).encode(**enc, tooltip=tips)
    layers = [base, *_reference_rules(x, hline, hline_label, rule_x)]
    legend_room = 70 if (color or dash) else 0
    return alt.layer(*layers).properties(title=title, height=height + legend_room)


def margin_map(df: pd.DataFrame, *, title: str, bound: float | None = None) -> alt.LayerChart:
    """Heatmap sequence × token of normalized margins (x_iα − x_it)ᵀWz_i/‖W‖.

    df columns: seq, token, margin, score, prob, support (bool), optimal (bool),
    selected (bool).
    """
    df = df.copy()
    finite = df["margin"].replace([np.inf, -np.inf], np.nan).dropna().abs()
    b = bound if bound else float(max(finite.max() if len(finite) else 1.0, 1e-12))
    tips = [
        alt.Tooltip("seq:O", title="sequence i"),
        alt.Tooltip("token:O", title="token t"),
        alt.Tooltip("margin:Q", title="normalized margin", format=".4g"),
        alt.Tooltip("score:Q", title="score γ_it", format=".4g"),
        alt.Tooltip("prob:Q", title="softmax s_it", format=".4g"),
        alt.Tooltip("role:N", title="role"),
    ]
    df["role"] = np.select(
        [df["selected"] & df["optimal"], df["selected"], df["optimal"], df["support"]],
        ["selected = optimal", "selected by GD", "optimal (not selected)", "support token"],
        "",
    )
    enc = dict(x=alt.X("token:O", title="token t"), y=alt.Y("seq:O", title="sequence i"))
    heat = (
        alt.Chart(df)
        .mark_rect()
        .encode(
            **enc,
            color=alt.Color(
                "margin:Q",
                title="margin / ‖W‖",
                scale=alt.Scale(scheme="redblue", domain=[-b, b], domainMid=0),
            ),
            tooltip=tips,
        )
    )
    sup = (
        alt.Chart(df[df["support"]])
        .mark_point(shape="circle", size=260, filled=False, color="black", strokeWidth=1.5)
        .encode(**enc, tooltip=tips)
    )
    sel = (
        alt.Chart(df[df["selected"]])
        .mark_point(shape="square", size=330, filled=False, color="#2e7d32", strokeWidth=2.5)
        .encode(**enc, tooltip=tips)
    )
    opt = (
        alt.Chart(df[df["optimal"]])
        .mark_text(text="★", fontSize=16, color="black")
        .encode(**enc, tooltip=tips)
    )
    return alt.layer(heat, sup, sel, opt).properties(
        title=title, height=150 + 30 * int(df["seq"].nunique())
    )


def prob_map(
    df: pd.DataFrame,
    *,
    title: str,
    x: str = "token",
    y: str = "seq",
    x_title: str = "token t",
    y_title: str = "sequence i",
    facet: str | None = None,
) -> alt.Chart:
    """Heatmap of softmax weights (log colour), ★ on `optimal`, □ on `selected`;
    masked cells (prob NaN) are left blank. df: x, y, prob, optimal, selected[, facet]."""
    df = df.copy()
    df["log10 s"] = np.log10(np.clip(df["prob"].astype(float), 1e-18, 1.0))
    tips = [
        alt.Tooltip(f"{y}:O", title=y_title),
        alt.Tooltip(f"{x}:O", title=x_title),
        alt.Tooltip("prob:Q", title="softmax weight", format=".3g"),
        alt.Tooltip("optimal:N", title="optimal token"),
        alt.Tooltip("selected:N", title="selected"),
    ]
    if facet:
        tips.insert(0, alt.Tooltip(f"{facet}:N"))
    enc = dict(x=alt.X(f"{x}:O", title=x_title), y=alt.Y(f"{y}:O", title=y_title))
    shown = df[df["prob"].notna()]
    heat = (
        alt.Chart(shown)
        .mark_rect()
        .encode(
            **enc,
            color=alt.Color(
                "log10 s:Q", title="log₁₀ s", scale=alt.Scale(scheme="blues", domain=[-16, 0])
            ),
            tooltip=tips,
        )
    )
    sel = (
        alt.Chart(shown[shown["selected"]])
        .mark_point(shape="square", size=250, filled=False, color="#2e7d32", strokeWidth=2.5)
        .encode(**enc, tooltip=tips)
    )
    opt = (
        alt.Chart(shown[shown["optimal"]])
        .mark_text(text="★", fontSize=14, color="#d62728")
        .encode(**enc, tooltip=tips)
    )
    chart = alt.layer(heat, sel, opt)
    if facet:
        return (
            chart.properties(width=220, height=220)
            .facet(column=alt.Column(f"{facet}:N", title=None))
            .properties(title=title)
        )
    return chart.properties(title=title, height=130 + 32 * int(df[y].nunique()))


def selections_bar(df: pd.DataFrame, *, title: str) -> alt.Chart:
    """Where runs land: df columns selection, runs, class (key of CLASS_LABELS)."""
    df = df.assign(kind=df["class"].map(CLASS_LABELS))
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("selection:N", title="selection α reached (token per sequence)", sort="-y"),
            y=alt.Y("runs:Q", title="runs"),
            color=alt.Color(
                "kind:N", title="α is", scale=_class_scale(), legend=alt.Legend(orient="bottom")
            ),
            tooltip=[
                alt.Tooltip("selection:N", title="α"),
                alt.Tooltip("runs:Q"),
                alt.Tooltip("kind:N", title="α is"),
            ],
        )
        .properties(title=title, height=HEIGHT + 90)
    )


def basin_map(df: pd.DataFrame, *, title: str) -> alt.LayerChart:
    """Initializations on a plane, coloured by the selection reached.

    df columns: a, b (plane coordinates), selection, class, prob (final selected softmax).
    """
    df = df.assign(kind=df["class"].map(CLASS_LABELS))
    tips = [
        alt.Tooltip("a:Q", format=".2f"),
        alt.Tooltip("b:Q", format=".2f"),
        alt.Tooltip("selection:N", title="α reached"),
        alt.Tooltip("kind:N", title="α is"),
        alt.Tooltip("prob:Q", title="min selected softmax", format=".4f"),
    ]
    rect = (
        alt.Chart(df)
        .mark_rect()
        .encode(
            x=alt.X("a:O", title="init coordinate a (along E₁)", axis=alt.Axis(format=".2f")),
            y=alt.Y(
                "b:O",
                title="init coordinate b (along E₂)",
                sort="descending",
                axis=alt.Axis(format=".2f"),
            ),
            color=alt.Color(
                "selection:N",
                title="α reached",
                legend=alt.Legend(orient="right"),
                scale=alt.Scale(scheme="tableau10"),
            ),
            tooltip=tips,
        )
    )
    ring = (
        alt.Chart(df[df["class"] != "global"])
        .mark_text(text="·", fontSize=18)
        .encode(x="a:O", y=alt.Y("b:O", sort="descending"), tooltip=tips)
    )
    return alt.layer(rect, ring).properties(title=title, height=360, width=380)


def fraction_bars(df: pd.DataFrame, *, title: str) -> alt.Chart:
    """Over-parameterization: df columns d, outcome, fraction, runs."""
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("d:O", title="embedding dimension d"),
            xOffset=alt.XOffset("outcome:N"),
            y=alt.Y("fraction:Q", title="fraction of runs", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color(
                "outcome:N",
                title=None,
                legend=alt.Legend(orient="bottom", labelLimit=320),
                scale=alt.Scale(range=["#2e7d32", "#1f77b4", "#9e9e9e"]),
            ),
            tooltip=[
                alt.Tooltip("d:O"),
                alt.Tooltip("outcome:N"),
                alt.Tooltip("fraction:Q", format=".2f"),
                alt.Tooltip("runs:Q"),
            ],
        )
        .properties(title=title, height=400)
    )


def rank_lines(
    df: pd.DataFrame, *, x: str, title: str, x_title: str, group: str | None = None
) -> alt.LayerChart:
    """Mean numerical rank vs `x`, colour = SVM norm, dash = `group` (e.g. n);
    df: x, norm, rank, lo, hi, count[, group]."""
    enc = dict(
        x=alt.X(f"{x}:O", title=x_title),
        color=alt.Color(
            "norm:N",
            title=None,
            scale=alt.Scale(domain=list(NORM_COLORS), range=list(NORM_COLORS.values())),
            legend=alt.Legend(orient="bottom"),
        ),
    )
    if group:
        enc["strokeDash"] = alt.StrokeDash(f"{group}:N", legend=alt.Legend(orient="bottom"))
        enc["shape"] = alt.Shape(f"{group}:N", legend=None)
        enc["detail"] = alt.Detail(f"{group}:N")
    base = alt.Chart(df).encode(**enc)
    tips = [
        alt.Tooltip(f"{x}:O", title=x_title),
        alt.Tooltip("norm:N"),
        alt.Tooltip("rank:Q", title="mean rank", format=".2f"),
        alt.Tooltip("lo:Q", title="min", format=".0f"),
        alt.Tooltip("hi:Q", title="max", format=".0f"),
        alt.Tooltip("count:Q", title="feasible instances"),
    ]
    if group:
        tips.insert(0, alt.Tooltip(f"{group}:N"))
    line = base.mark_line(point=True).encode(
        y=alt.Y("rank:Q", title="mean numerical rank"), tooltip=tips
    )
    band = base.mark_errorbar(opacity=0.5).encode(
        y=alt.Y("lo:Q", title="mean numerical rank"), y2="hi:Q", tooltip=tips
    )
    return alt.layer(band, line).properties(title=title, height=HEIGHT + 90)


def singular_values(df: pd.DataFrame, *, title: str, rtol: float) -> alt.FacetChart:
    """σ_j(W(k))/σ_1(W(k)) over k, one line per index j, one panel per parameterization,
    with the numerical-rank threshold `rtol` dashed. df: step, j, sigma, param."""
    tips = [
        alt.Tooltip("param:N", title="GD on"),
        alt.Tooltip("step:Q", title="iteration"),
        alt.Tooltip("j:O", title="index j"),
        alt.Tooltip("sigma:Q", title="σ_j/σ_1", format=".3g"),
    ]
    line = (
        alt.Chart()
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="iteration k"),
            y=alt.Y("sigma:Q", title="σ_j(W(k)) / σ_1(W(k))", scale=alt.Scale(type="log")),
            color=alt.Color("j:O", title="index j", scale=alt.Scale(scheme="viridis")),
            tooltip=tips,
        )
    )
    rule = (
        alt.Chart()
        .mark_rule(strokeDash=[4, 4], color="gray")
        .encode(
            y=alt.datum(rtol), tooltip=[alt.Tooltip("param:N", title=f"rank threshold {rtol:g}")]
        )
    )
    return (
        alt.layer(line, rule, data=df)
        .properties(width=330, height=230)
        .facet(column=alt.Column("param:N", title=None))
        .properties(title=title)
    )


def geometry_tokens(
    tokens: pd.DataFrame, lines: pd.DataFrame, arrows: pd.DataFrame, *, title: str
) -> alt.LayerChart:
    """Tokens in R², optimal ones as stars, support tokens ringed, one max-margin separating
    line per query, and the SVM directions W^mm z_i (scaled to fit).

    tokens: seq, token, x1, x2, score, optimal, support, label
    lines: seq, x1, x2, part (two points per line)
    arrows: seq, norm, x1, x2, part (origin and tip)

    Long because the chart is five layers (tokens, optimal stars, support rings, separating
    lines, SVM directions), each with its own encoding.
    """
    span = float(np.abs(tokens[["x1", "x2"]].to_numpy()).max() * 1.35) or 1.0
    dom = [-span, span]
    tips = [
        alt.Tooltip("seq:N", title="sequence i"),
        alt.Tooltip("token:O", title="token t"),
        alt.Tooltip("x1:Q", format=".4f"),
        alt.Tooltip("x2:Q", format=".4f"),
        alt.Tooltip("score:Q", title="score γ", format=".4f"),
        alt.Tooltip("label:N", title="role"),
    ]
    enc = dict(
        x=alt.X("x1:Q", scale=alt.Scale(domain=dom), title="x₁"),
        y=alt.Y("x2:Q", scale=alt.Scale(domain=dom), title="x₂"),
        color=alt.Color("seq:N", title="sequence", scale=alt.Scale(range=SEQ_COLORS)),
    )
    pts = (
        alt.Chart(tokens[~tokens["optimal"]])
        .mark_point(filled=True, size=90)
        .encode(**enc, shape=alt.value("circle"), tooltip=tips)
    )
    opt = (
        alt.Chart(tokens[tokens["optimal"]])
        .mark_point(
            filled=True,
            size=320,
            shape="M0,-1L0.29,-0.4L0.95,-0.31L0.48,0.15L0.59,0.81L0,0.5"
            "L-0.59,0.81L-0.48,0.15L-0.95,-0.31L-0.29,-0.4Z",
        )
        .encode(**enc, tooltip=tips)
    )
    sup = (
        alt.Chart(tokens[tokens["support"]])
        .mark_point(size=330, filled=False, color="black")
        .encode(x="x1:Q", y="x2:Q", tooltip=tips)
    )
    layers = [pts, opt, sup]
    if len(lines):
        layers.insert(
            0,
            alt.Chart(lines)
            .mark_line(strokeDash=[3, 3], clip=True)
            .encode(
                x=alt.X("x1:Q", scale=alt.Scale(domain=dom)),
                y=alt.Y("x2:Q", scale=alt.Scale(domain=dom)),
                color=alt.Color("seq:N"),
                detail="seq:N",
                tooltip=[alt.Tooltip("seq:N", title="separating line of query")],
            ),
        )
    if len(arrows):
        layers.insert(
            0,
            alt.Chart(arrows)
            .mark_line(clip=True, strokeWidth=2)
            .encode(
                x="x1:Q",
                y="x2:Q",
                color=alt.Color("seq:N"),
                detail="key:N",
                strokeDash=alt.StrokeDash("norm:N", title="direction"),
                tooltip=[alt.Tooltip("norm:N", title="direction"), alt.Tooltip("seq:N")],
            ),
        )
    return alt.layer(*layers).properties(title=title, height=380, width=380)


def geometry_paths(
    paths: pd.DataFrame, rays: pd.DataFrame, *, title: str, axis: str = "W z_i"
) -> alt.LayerChart:
    """GD paths W(k) z_i (solid W, dashed (K,Q)) and the SVM rays W^mm z_i, W^mm_* z_i,
    on equal axes.

    paths: seq, param, step, p1, p2;  rays: seq, norm, p1, p2, key
    """
    r = float(max(np.nanmax(np.abs(paths[["p1", "p2"]].to_numpy(dtype=float))), 1e-9)) * 1.1
    dom = alt.Scale(domain=[-r, r])
    tips = [
        alt.Tooltip("seq:N", title="query z_i"),
        alt.Tooltip("param:N", title="GD on"),
        alt.Tooltip("step:Q", title="iteration"),
        alt.Tooltip("p1:Q", format=".3f"),
        alt.Tooltip("p2:Q", format=".3f"),
    ]
    path = (
        alt.Chart(paths)
        .mark_line(strokeWidth=2.5, clip=True)
        .encode(
            x=alt.X("p1:Q", title=f"({axis})₁", scale=dom),
            y=alt.Y("p2:Q", title=f"({axis})₂", scale=dom),
            color=alt.Color("seq:N", title="query", scale=alt.Scale(range=SEQ_COLORS)),
            detail="key:N",
            order="step:Q",
            strokeDash=alt.StrokeDash(
                "param:N",
                title="GD on",
                scale=alt.Scale(domain=["W", "(K,Q)"], range=[[1, 0], [6, 3]]),
            ),
            tooltip=tips,
        )
    )
    ray = (
        alt.Chart(rays)
        .mark_line(strokeWidth=1.2, opacity=0.7, clip=True)
        .encode(
            x=alt.X("p1:Q", scale=dom),
            y=alt.Y("p2:Q", scale=dom),
            detail="key:N",
            color=alt.Color(
                "norm:N",
                title="SVM ray",
                scale=alt.Scale(domain=["W^mm z_i", "W^mm_* z_i"], range=["#555555", "#d62728"]),
            ),
            tooltip=[alt.Tooltip("norm:N", title="ray"), alt.Tooltip("seq:N", title="query")],
        )
    )
    return (
        alt.layer(ray, path)
        .resolve_scale(color="independent")
        .properties(title=title, height=380, width=420)
        .interactive()
    )
