"""Charts of rank from small initialization (attsvm.staircase): the singular values of
ΔW = K Qᵀ − K₀Q₀ᵀ against the step or t / log(1/α), the loss, the balancedness gap, and
the two experiments rank-staircase and weight-decay (pure: tidy DataFrames in, Altair out).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .bands import H, W

X_TITLE = {"step": "iteration k", "rescaled": "t / log(1/α)   (t = η k)"}


def spectrum(df: pd.DataFrame, *, x: str = "step", title: str = "") -> alt.Chart:
    """σ_j(ΔW) (log scale) against `x` ("step" or "rescaled"); df: step, rescaled, j, sigma."""
    d = df[df["sigma"] > 0].dropna(subset=[x])
    return (
        alt.Chart(d)
        .mark_line()
        .encode(
            x=alt.X(f"{x}:Q", title=X_TITLE[x]),
            y=alt.Y("sigma:Q", scale=alt.Scale(type="log"), title="σ_j(ΔW)"),
            color=alt.Color("j:N", title="j", sort="ascending"),
            tooltip=[
                "j:N",
                "step:Q",
                alt.Tooltip("rescaled:Q", format=".3g"),
                alt.Tooltip("sigma:Q", format=".3e"),
            ],
        )
        .properties(title=title or "Singular values of ΔW = KQᵀ − K₀Q₀ᵀ", width=W, height=H)
    )


def loss(df: pd.DataFrame) -> alt.Chart:
    """The risk L(K Qᵀ) against the step (plateaus, then drops); df: step, loss."""
    return (
        alt.Chart(df)
        .mark_line(color="#444")
        .encode(
            x=alt.X("step:Q", title="iteration k"),
            y=alt.Y("loss:Q", scale=alt.Scale(zero=False), title="loss L(KQᵀ)"),
            tooltip=["step:Q", alt.Tooltip("loss:Q", format=".6f")],
        )
        .properties(title="Loss: plateaus and drops", width=W, height=H)
    )


def gap(df: pd.DataFrame, *, predicted: float | None = None) -> alt.LayerChart | alt.Chart:
    """Relative balancedness gap against the step (log y); df: step, rel_gap. `predicted`:
    the rate 2ηλ per step, drawn as a dashed line through the first point."""
    d = df[df["rel_gap"] > 0]
    base = (
        alt.Chart(d)
        .mark_line(point=True)
        .encode(
            x=alt.X("step:Q", title="iteration k"),
            y=alt.Y("rel_gap:Q", scale=alt.Scale(type="log"), title="relative gap"),
            tooltip=["step:Q", alt.Tooltip("rel_gap:Q", format=".2e")],
        )
    )
    if not predicted or d.empty:
        return base.properties(
            title="Balancedness gap ((‖K‖²+‖Q‖²)/2 − ‖KQᵀ‖_*) / ‖KQᵀ‖_*", width=W, height=H
        )
    s0, g0 = float(d["step"].iloc[0]), float(d["rel_gap"].iloc[0])
    steps = d["step"].to_numpy(float)
    line = pd.DataFrame({"step": steps, "rel_gap": g0 * np.exp(-predicted * (steps - s0))})
    line = line[line["rel_gap"] > 1e-17]
    pred = (
        alt.Chart(line)
        .mark_line(strokeDash=[4, 3], color="#d62728")
        .encode(x="step:Q", y="rel_gap:Q")
    )
    return (base + pred).properties(
        title=f"Relative balancedness gap (dashed: predicted rate 2ηλ = {predicted:.3g}/step)",
        width=W,
        height=H,
    )


def rank_staircase(res) -> alt.HConcatChart:
    c = res.frames["curves"]
    c = c[c["step"] > 0].melt(
        id_vars=["alpha", "step", "rescaled"],
        value_vars=[k for k in c.columns if k.startswith("ratio")],
        var_name="ratio",
        value_name="value",
    )
    order = ["α=" + f"{a:g}" for a in sorted(c["alpha"].unique())]  # numeric, not as text
    c = c[c["value"] > 0].assign(
        alpha=lambda d: "α=" + d.alpha.map("{:g}".format),
        ratio=lambda d: "σ" + d.ratio.str[5:] + "/σ₁",
    )
    lines = (
        alt.Chart(c)
        .mark_line()
        .encode(
            x=alt.X("step:Q", scale=alt.Scale(type="log"), title="iteration k"),
            y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="median σ_j/σ₁ of ΔW"),
            color=alt.Color("alpha:N", title=None, sort=order, legend=alt.Legend(orient="bottom")),
            strokeDash=alt.StrokeDash("ratio:N", title=None),
            tooltip=["alpha:N", "ratio:N", "step:Q", alt.Tooltip("value:Q", format=".2e")],
        )
        .properties(title="ΔW's spectrum over training", width=W, height=H)
    )
    b = res.frames["by_alpha"].assign(alpha=lambda d: d.alpha.map("{:g}".format))
    bars = (
        alt.Chart(b)
        .mark_bar()
        .encode(
            x=alt.X(
                "share_global:Q",
                title="share of runs at the global selection",
                scale=alt.Scale(domain=[0, 1]),
            ),
            y=alt.Y("alpha:N", title="α", sort=None),
            tooltip=["alpha:N", "share_global:Q", "median_delta_rank:Q", "median_loss:Q"],
        )
        .properties(title="which tokens win", width=200, height=H)
    )
    return alt.hconcat(lines, bars).properties(
        title="Rank from small init: (K, Q)-GD from K₀, Q₀ = α·N(0, 1) (arXiv 2306.07042)"
    )


def _decay_rates(by_lambda) -> alt.Chart:
    """The measured decay rate of the gap per step against the predicted 2ηλ, per λ > 0."""
    b = by_lambda.query("weight_decay > 0").melt(
        id_vars=["weight_decay"],
        value_vars=["gap_rate", "predicted_rate"],
        var_name="rate",
        value_name="per_step",
    )
    b["rate"] = b["rate"].map(RATE_LABELS)
    # a small black dot in a large hollow diamond: none of the λ lines' colours, no confusion
    rate_scale = dict(domain=list(RATE_LABELS.values()))
    rates = (
        alt.Chart(b)
        .mark_point(strokeWidth=1.5)
        .encode(
            x=alt.X("weight_decay:Q", scale=alt.Scale(type="log"), title="λ"),
            y=alt.Y("per_step:Q", scale=alt.Scale(type="log"), title="decay rate per step"),
            shape=alt.Shape(
                "rate:N",
                title=None,
                scale=alt.Scale(**rate_scale, range=["circle", "diamond"]),
                legend=alt.Legend(orient="bottom"),
            ),
            fill=alt.Fill(
                "rate:N",
                title=None,
                scale=alt.Scale(**rate_scale, range=["black", "transparent"]),
                legend=None,
            ),
            stroke=alt.Stroke(
                "rate:N",
                title=None,
                scale=alt.Scale(**rate_scale, range=["black", "black"]),
                legend=None,
            ),
            size=alt.Size(
                "rate:N",
                title=None,
                scale=alt.Scale(**rate_scale, range=[40, 200]),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=["weight_decay:Q", "rate:N", alt.Tooltip("per_step:Q", format=".4g")],
        )
        .properties(title="measured vs predicted 2ηλ", width=220, height=H)
    )
    return rates


def weight_decay(res) -> alt.HConcatChart:
    """The relative gap (‖K‖²+‖Q‖²)/2 − ‖KQᵀ‖_* over training per λ, beside its measured
    and predicted decay rates."""
    c = res.frames["curves"]
    c = c[c["rel_gap"] > 0].assign(lam=lambda d: "λ=" + d.weight_decay.map("{:g}".format))
    lines = (
        alt.Chart(c)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="iteration k"),
            y=alt.Y("rel_gap:Q", scale=alt.Scale(type="log"), title="median relative gap"),
            color=alt.Color("lam:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["lam:N", "step:Q", alt.Tooltip("rel_gap:Q", format=".2e")],
        )
        .properties(title="(‖K‖²+‖Q‖²)/2 − ‖KQᵀ‖_*, relative", width=W, height=H)
    )
    rates = _decay_rates(res.frames["by_lambda"])
    return (
        alt.hconcat(lines, rates)
        .resolve_scale(color="independent")
        .properties(title="Weight decay on (K, Q) = nuclear norm on KQᵀ (arXiv 2410.23819)")
    )


RATE_LABELS = {"gap_rate": "measured gap rate (median)", "predicted_rate": "predicted 2ηλ"}
