"""The mean ± std band chart shared by the experiments' charts (`experiments`, `ntp`)."""

from __future__ import annotations

import altair as alt

W, H = 300, 230  # a panel's size


def band(df, *, x, y, color, title, y_title, scale=None, log_y=False, width=W, height=H):
    """mean line ± std band. On a log axis (`log_y`) rows whose mean is not positive are
    left out and the band's lower edge is clipped at mean/10 where mean − std ≤ 0: a single
    non-positive value would otherwise leave Vega's log scale without a domain and the
    whole panel blank."""
    df = df.assign(lo=df["mean"] - df["std"], hi=df["mean"] + df["std"])
    if log_y:
        df = df[df["mean"] > 0]
        df = df.assign(lo=df["lo"].where(df["lo"] > 0, df["mean"] / 10))
    ys = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    enc_c = alt.Color(
        f"{color}:N",
        title=None,
        scale=scale or alt.Undefined,
        legend=alt.Legend(orient="bottom", direction="vertical"),
    )
    base = alt.Chart(df).encode(x=alt.X(f"{x}:Q", title="iteration"), color=enc_c)
    band = base.mark_area(opacity=0.18).encode(y=alt.Y("lo:Q", scale=ys, title=y_title), y2="hi:Q")
    line = base.mark_line().encode(
        y=alt.Y(f"{y}:Q", scale=ys, title=y_title),
        tooltip=[
            alt.Tooltip(f"{x}:Q"),
            alt.Tooltip(f"{color}:N"),
            alt.Tooltip("mean:Q", format=".5g"),
            alt.Tooltip("std:Q", format=".3g"),
        ],
    )
    return (band + line).properties(title=title, width=width, height=height)
