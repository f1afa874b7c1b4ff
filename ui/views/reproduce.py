"""The Reproduce page's cards: one per experiment, with its settings (kept in the URL), a
Run button with progress, the chart, our statistic next to the paper's, and downloads."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import zipfile

import streamlit as st

from attsvm import experiments, limits
from attsvm.experiments.core import jsonable
from attsvm_charts import experiments as experiment_charts
from ui import about, cache, hosted
from ui.widgets import BOUND

# fixed by the card; `fixtures` names a folder on the machine running attsvm (the CLI's)
HIDDEN = {"preset", "fixtures"}
MAX_LITERAL = 500  # characters of a tuple-valued setting (a link can carry any text)


def _widget(name: str, field: str, default):
    """An input for one setting, kept in the page's URL like every other page's settings
    (a copied link restores the card's settings; Run then replays or computes the result).
    Returns its value (tuples typed as Python literals)."""
    kw = dict(key=f"repro-{name}-{field}", **BOUND)
    if isinstance(default, bool):
        return st.checkbox(field, value=default, **kw)
    if isinstance(default, int):
        return int(st.number_input(field, value=default, step=1, **kw))
    if isinstance(default, float):
        return float(st.number_input(field, value=default, format="%g", **kw))
    if field == "style":
        return st.selectbox(field, ["accurate", "published"], index=0, **kw)
    if isinstance(default, str):
        return st.text_input(field, value=default, **kw)
    text = st.text_input(
        field, value=repr(default), help="a Python literal, e.g. (4, 6, 8) or ('W', 'KQ')", **kw
    )
    try:
        if len(text) > MAX_LITERAL:
            raise ValueError
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        # (deep nesting, e.g. "-----…1", overflows the parser's recursion: refuse it too)
        shown = text if len(text) <= 60 else f"{text[:60]}… ({len(text):,} characters)"
        raise ValueError(
            f"`{field}` must be a Python literal like {default!r} of at most {MAX_LITERAL} "
            f"characters; got {shown!r}"
        ) from None


def _downloads(name: str, res: experiments.Result, chart):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for key, df in res.frames.items():
            z.writestr(f"{name}/{key}.csv", df.to_csv(index=False))
    meta = experiments.metadata(res)
    c1, c2, c3 = st.columns(3)
    c1.download_button(
        "Data (CSV, zip)",
        buf.getvalue(),
        f"{name}-data.zip",
        "application/zip",
        key=f"repro-{name}-dl-csv",
    )
    c2.download_button(
        "Settings + summary (JSON)",
        json.dumps(jsonable(meta), indent=2, ensure_ascii=False),
        f"{name}-settings.json",
        "application/json",
        key=f"repro-{name}-dl-json",
    )
    html = io.StringIO()
    chart.save(html, format="html")
    c3.download_button(
        "Chart (HTML)",
        html.getvalue(),
        f"{name}-chart.html",
        "text/html",
        key=f"repro-{name}-dl-html",
    )


def card(name: str):
    defaults = experiments.settings(name)
    with st.container(border=True):
        st.subheader(f"{name} — {experiments.title(name)}")
        st.caption(f"**Paper:** {hosted.escape_markdown(experiments.paper_statistic(name))}")
        for note in experiments.notes(name):
            st.warning(
                f"**attsvm differs from the authors' code here:** {note}", icon=":material/rule:"
            )
        overrides = {}
        # opened when a link set any of this card's settings, so the recipient sees them
        linked = any(k.startswith(f"repro-{name}-") for k in st.query_params)
        refused = None
        with st.expander("Settings (the paper's by default)", expanded=linked):
            try:
                cols = st.columns(3)
                fields = [f for f in dataclasses.fields(defaults) if f.name not in HIDDEN]
                for j, f in enumerate(fields):
                    with cols[j % 3]:
                        value = _widget(name, f.name, getattr(defaults, f.name))
                    if value != getattr(defaults, f.name):
                        overrides[f.name] = value
                price = experiments.check(name, **overrides)  # validated and priced now
            except ValueError as exc:   # bad settings, or over budget (which to lower)
                refused = exc
        if refused is not None:     # outside the expander: seen even when it is closed
            st.error(f"**Cannot run this:** {hosted.escape_markdown(refused)}", icon="🚫")
            return
        last = f"repro-{name}-last"
        if st.button("Run", key=f"repro-{name}-run", type="primary"):
            st.session_state[last] = json.dumps(overrides, sort_keys=True)
        if last not in st.session_state:
            st.caption(f"Budget mode: {limits.mode()}; priced at ≈ {price.seconds:.2g} s of "
                       "compute. Click Run to reproduce with these settings.")
            return
        try:
            res = cache.experiment(name, st.session_state[last])
        except ValueError as exc:  # settings over the budget, infeasible data, …
            st.error(f"**Cannot run this:** {hosted.escape_markdown(exc)}", icon="🚫")
            return
        st.success(f"**Ours ({res.seconds:.1f} s):** {hosted.escape_markdown(res.summary['text'])}")
        chart = experiment_charts.chart(res)
        about.chart(st, chart, "reproduce")
        rows = res.summary.get("rows")
        if rows:
            with st.expander("Ours next to the paper (table)"):
                st.dataframe(rows, hide_index=True)
        _downloads(name, res, chart)
