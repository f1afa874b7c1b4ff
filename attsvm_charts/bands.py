"""The mean ± std band chart shared by the experiments' charts (`experiments`, `ntp`)."""
from __future__ import annotations

import altair as alt

W, H = 300, 230     # a panel's size


def band(df, *, x, y, color, title, y_title, scale=None, log_y=False, width=W, height=H):
    """mean line ± std band."""
    df = df.assign(lo=df["mean"] - df["std"], hi=df["mean"] + df["std"])
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
