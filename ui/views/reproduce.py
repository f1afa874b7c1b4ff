"""The Reproduce page's cards: one per experiment, showing the stored result of the
paper's settings (attsvm.store, computed once on the server) with its chart, our statistic
next to the paper's, provenance and downloads; and settings (kept in the URL) for a run
with other settings, priced and refused like every other page's."""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import zipfile

import streamlit as st

from attsvm import experiments, limits, store
from attsvm.experiments.core import jsonable
from attsvm_charts import experiments as experiment_charts
from ui import about, cache, hosted, results
from ui.widgets import BOUND

# fixed by the card; `fixtures` names a folder on the machine running attsvm (the CLI's)
HIDDEN = {"preset", "fixtures"}
MAX_LITERAL = 500  # characters of a tuple-valued setting (a link can carry any text)
STYLES = ["accurate", "published"]
POLL_S = 5.0  # seconds between looks at the store while a card waits for its result


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
        return st.selectbox(field, STYLES, index=0, **kw)
    if isinstance(default, str):
        return st.text_input(field, value=default, **kw)
    text = st.text_input(
        field, value=repr(default), help="a Python literal, e.g. (4, 6, 8) or ('W', 'KQ')", **kw
    )
    return _literal(field, default, text)


def _literal(field: str, default, text: str):
    """The value of a tuple-valued setting typed (or linked) as a Python literal; ValueError
    naming the setting if the text is none (ast.literal_eval: no code runs)."""
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


def _from_link(field: str, default, text: str):
    """A setting's value from its link text, read as its input reads it; ValueError if the
    input could not hold it."""
    if isinstance(default, bool):
        if text.strip().lower() not in ("true", "false"):
            raise ValueError(f"`{field}` must be true or false")
        return text.strip().lower() == "true"
    if isinstance(default, (int, float)):
        try:
            x = float(text)
        except ValueError:
            raise ValueError(f"`{field}` must be a number") from None
        if isinstance(default, int):
            if not x.is_integer():
                raise ValueError(f"`{field}` must be a whole number")
            return int(x)
        return x
    if field == "style":
        if text not in STYLES:
            raise ValueError(f"`style` must be one of {STYLES}")
        return text
    if isinstance(default, str):
        return text
    return _literal(field, default, text)


def _link_refusal(key: str, text, names) -> str | None:
    """Why the card setting `key` = `text` of a link cannot be run (None: a card can run
    it, priced and perhaps refused over budget as a click would be)."""
    name = next(
        (n for n in sorted(names, key=len, reverse=True) if key.startswith(f"repro-{n}-")), None
    )
    if name is None:
        return "not a setting of any card"
    field = key[len(f"repro-{name}-") :]
    defaults = experiments.settings(name)
    if field in HIDDEN or field not in {f.name for f in dataclasses.fields(defaults)}:
        return f"not a setting of the {name} card"
    try:
        experiments.check(name, **{field: _from_link(field, getattr(defaults, field), text)})
    except limits.BudgetError:
        return None
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


def link_settings(names) -> None:
    """Before the cards draw: a link's card settings (`repro-<experiment>-<setting>`) that a
    card can run stay for its "Run with other settings" form, which prices them (and
    refuses them over budget) as a click would; the others (no such card or setting, a
    value the setting cannot take) are refused, and the "Ignored link parameters" note
    names them. Values the visitor typed since (the input holds them) are left alone."""
    for key, text in st.query_params.to_dict().items():
        if key.startswith("repro-") and key not in st.session_state:
            why = _link_refusal(key, text, names)
            if why:
                hosted.refuse_param(key, why)


def _downloads(name: str, csvs: dict, meta_json: str, html: str):
    """Download buttons: the tables (a zip of CSVs), settings + summary (JSON), the chart."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for key, data in csvs.items():
            z.writestr(f"{name}/{key}.csv", data)
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
        meta_json,
        f"{name}-settings.json",
        "application/json",
        key=f"repro-{name}-dl-json",
    )
    c3.download_button(
        "Chart (HTML)", html, f"{name}-chart.html", "text/html", key=f"repro-{name}-dl-html"
    )


def _run_downloads(name: str, res: experiments.Result, chart):
    html = io.StringIO()
    chart.save(html, format="html")
    meta = json.dumps(jsonable(experiments.metadata(res)), indent=2, ensure_ascii=False)
    _downloads(
        name, {k: df.to_csv(index=False) for k, df in res.frames.items()}, meta, html.getvalue()
    )


def _rows(res: experiments.Result):
    rows = res.summary.get("rows")
    if rows:
        with st.expander("Ours next to the paper (table)"):
            st.dataframe(rows, hide_index=True)


def _settings(name: str, defaults):
    """The card's settings expander: returns (overrides of the paper's settings, the
    price, or the ValueError that refuses them)."""
    overrides, price, refused = {}, None, None
    # opened when a link set any of this card's settings, so the recipient sees them
    linked = any(k.startswith(f"repro-{name}-") for k in st.query_params)
    with st.expander("Run with other settings (the paper's by default)", expanded=linked):
        try:
            cols = st.columns(3)
            fields = [f for f in dataclasses.fields(defaults) if f.name not in HIDDEN]
            for j, f in enumerate(fields):
                with cols[j % 3]:
                    value = _widget(name, f.name, getattr(defaults, f.name))
                if value != getattr(defaults, f.name):
                    overrides[f.name] = value
            price = experiments.check(name, **overrides)  # validated and priced now
        except ValueError as exc:  # bad settings, or over budget (which to lower)
            refused = exc
    return overrides, price, refused


def _run(name: str, overrides: dict, price, refused):
    """A run for the visitor (priced and refused as every other page's)."""
    if refused is not None:  # outside the expander: seen even when it is closed
        st.error(f"**Cannot run this:** {hosted.escape_markdown(refused)}", icon="🚫")
        return
    last = f"repro-{name}-last"
    if st.button("Run", key=f"repro-{name}-run", type="primary"):
        st.session_state[last] = json.dumps(overrides, sort_keys=True)
    if st.session_state.get(last) != json.dumps(overrides, sort_keys=True):
        st.caption(
            f"Budget mode: {limits.mode()}; priced at ≈ {price.seconds:.2g} s of "
            "compute. Click Run to reproduce with these settings."
        )
        return
    try:
        res = cache.experiment(
            name, experiments.settings(name, **json.loads(st.session_state[last]))
        )
    except ValueError as exc:  # settings over the budget, infeasible data, …
        st.error(f"**Cannot run this:** {hosted.escape_markdown(exc)}", icon="🚫")
        return
    st.success(f"**Ours ({res.seconds:.1f} s):** {hosted.escape_markdown(res.summary['text'])}")
    chart = experiment_charts.chart(res)
    about.chart(st, chart, "reproduce")
    _rows(res)
    _run_downloads(name, res, chart)


def _stored(name: str, entry):
    """The stored result of the paper's settings: summary, chart, provenance, files."""
    res, meta = entry.result, entry.meta
    st.success(f"**Ours:** {hosted.escape_markdown(res.summary['text'])}")
    chart = results.chart(name)
    if chart is False:
        st.warning(
            "The stored tables do not make a chart here (the server log says why); "
            "the files below have it.",
            icon=":material/warning:",
        )
    elif chart is not None:  # (None only if the entry was replaced just now)
        about.chart(st, chart, "reproduce")
    be = res.backend
    backend = ", ".join(
        dict.fromkeys(str(x) for x in (be.get("platform"), be.get("device_kind")) if x)
    )
    st.caption(
        f"Computed by attsvm {hosted.escape_markdown(meta.get('attsvm_version'))} on "
        f"{entry.created[:16].replace('T', ' ')} UTC ({hosted.escape_markdown(backend)}) in "
        f"{res.seconds:.1f} s, with the authors' settings, and stored on the server. "
        f"Rerun it locally: `pip install -r requirements.txt`, then "
        f"`python -m attsvm reproduce {name}`."
    )
    _rows(res)
    csvs = {f[:-4]: data for f, data in entry.files.items() if f.endswith(".csv")}
    _downloads(
        name,
        csvs,
        entry.files["settings.json"].decode("utf-8"),
        entry.files.get("chart.html", b"").decode("utf-8"),
    )


@st.fragment(run_every=POLL_S)
def _waiting(name: str, group: tuple, label: str):
    """What the server is doing for this card, polled until its entry is stored."""
    if results.entry(name) is not None:
        st.rerun()  # the whole page: the card draws its stored result
    state = store.state(name)
    now = next((n for n in store.names() if store.state(n).kind == "computing"), None)
    i = group.index(name) + 1
    if state.kind == "computing":
        st.progress(
            state.frac,
            text=f"Computing on the server: {label} {i} of {len(group)} "
            f"({100 * state.frac:.0f} %, "
            f"{hosted.escape_markdown(state.text)})",
        )
    else:
        doing = f"it is computing {now} now" if now else "it is starting"
        st.info(
            f"Waiting its turn on the server ({label} {i} of {len(group)}, with the "
            f"authors' settings); {doing}. It appears here when ready, for every visitor.",
            icon=":material/hourglass_top:",
        )


def card(name: str, group: tuple = (), label: str = "experiment"):
    """One experiment's card: the stored result of the paper's settings (or the server's
    progress on it), and a run with other settings, priced for the visitor."""
    defaults = experiments.settings(name)
    group = tuple(group) or (name,)
    with st.container(border=True):
        st.subheader(f"{name} — {experiments.title(name)}")
        st.caption(f"**Paper:** {hosted.escape_markdown(experiments.paper_statistic(name))}")
        for note in experiments.notes(name):
            st.warning(
                f"**attsvm differs from the authors' code here:** {note}", icon=":material/rule:"
            )
        overrides, price, refused = _settings(name, defaults)
        if overrides:
            return _run(name, overrides, price, refused)
        entry = results.entry(name)
        if entry is not None:
            return _stored(name, entry)
        if results.queued(name) and store.state(name).kind != "failed":
            return _waiting(name, group, label)
        if store.state(name).kind == "failed":
            st.warning(
                "The server could not compute this card's result: "
                f"{hosted.escape_markdown(store.state(name).text)}",
                icon=":material/error:",
            )
        _run(name, overrides, price, refused)


def store_status():
    """One line: how many results are stored, and what the server computes now (polled
    while the server fills the store; without a filler, as with ATTSVM_FILL=0, drawn once)."""
    names = store.names()
    if all(results.entry(n) is not None for n in names):
        st.caption(f"All {len(names)} results are stored on the server.")
        return
    results.start_filler()  # (again, should entries have gone missing since it ended)
    if results.filling():
        _store_progress()
    else:  # nothing is on its way: no timer to rerun the page for
        _store_line()


@st.fragment(run_every=POLL_S)
def _store_progress():
    results.start_filler()
    if all(results.entry(n) is not None for n in store.names()) or not results.filling():
        st.rerun()
    _store_line()


def _store_line():
    names = store.names()
    ready = [n for n in names if results.entry(n) is not None]
    now = next((n for n in names if store.state(n).kind == "computing"), None)
    paper = [n for n in experiments.EXPERIMENTS if n in ready]
    text = (
        f"Stored on the server: {len(paper)} of {len(experiments.EXPERIMENTS)} of the "
        f"paper's results and {len(ready) - len(paper)} of "
        f"{len(names) - len(experiments.EXPERIMENTS)} follow-ups'"
    )
    if now:
        text += f"; computing **{now}** now, one experiment at a time, in the background"
    elif not results.filling():
        text += "; the others run when you click their Run button"
    st.caption(text + ".")
