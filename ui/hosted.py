"""The app side of the hosted mode: compute accounting, fair slots, progress with Cancel.

`attsvm.limits` holds the caps, `ui.budget` the time rules; this module applies them inside
Streamlit:

- `metered` wraps the computing body of every cached call: it refuses work once the
  session spent its compute allowance, holds one of the server's compute slots while it
  runs, and charges the seconds to the session. On a cache hit nothing runs or is charged.
- `progress` iterates a sweep under a progress bar with a Cancel button and the per-action
  deadline, so long work can be stopped and keeps what it has.
"""

from __future__ import annotations

import functools
import re
import threading
import time

import streamlit as st

from attsvm.io import quote_text

from . import links
from .budget import Cancelled, Deadline, SessionBudget, compute_slot

BUDGET_KEY = "_attsvm_session_budget"
_local = threading.local()


def load_secrets_mode() -> None:
    """Make a root-level ``ATTSVM_MODE = "hosted"`` in .streamlit/secrets.toml take effect:
    Streamlit copies root-level secrets into os.environ when it parses the file."""
    try:
        "ATTSVM_MODE" in st.secrets  # noqa: B015 - parsing is the side effect we want
    except Exception:  # no secrets file, or an unreadable one: the environment decides
        pass


_MARKDOWN_ACTIVE = re.compile(r"([\\\[\]()!<>*_~|#$:])")


def escape_markdown(text) -> str:
    """An error message made inert for st.error: outside its `code spans`, every character
    that Markdown or Streamlit would act on (links, images, HTML, emphasis, math, :colors[])
    is backslash-escaped, so text a visitor typed shows literally."""
    parts = re.split(r"(`[^`]*`)", str(text))
    return "".join(
        p
        if p.startswith("`") and p.endswith("`") and len(p) > 1
        else _MARKDOWN_ACTIVE.sub(r"\\\1", p)
        for p in parts
    )


def clean_link() -> dict:
    """Snapshot the link's query parameters, then drop every value `ui.links.refusal`
    refuses, from the URL and from the initial values Streamlit seeds bound widgets with,
    before any widget reads it (a non-finite number bound to an integer widget raises
    OverflowError inside st.number_input). Returns the snapshot for
    `report_ignored_params`."""
    before = st.query_params.to_dict()
    st.session_state[_BEFORE] = before
    st.session_state[_DROPPED] = set()
    st.session_state[_READ] = set()
    refused = {}
    for j, (k, v) in enumerate(_all_values().items()):
        why = links.refusal(k, v, position=j)
        if why:
            refused[k] = why
    if refused:
        _forget(refused)
    st.session_state[_REFUSED] = refused
    return before


def _all_values() -> dict:
    """Every parameter with all its values (a repeated parameter as a list)."""
    out = {}
    for k in st.query_params.keys():
        vals = st.query_params.get_all(k)
        out[k] = vals if len(vals) != 1 else vals[0]
    return out


def _forget(keys) -> None:
    """Remove parameters from the URL and from the initial query values that Streamlit
    seeds bound widgets with on a session's first run (streamlit 1.67's QueryParams keeps
    them apart from the live URL; `tests/app/test_hostile_links.py` holds this to the
    pinned version). `remove_param` is what Streamlit itself uses to clear a bound widget's
    invalid URL value (st.query_params refuses to delete a bound parameter)."""
    from streamlit.runtime.state.session_state_proxy import get_session_state

    with get_session_state().query_params() as qp:
        initial = getattr(qp, "_initial_query_params", None)
        for k in keys:
            qp.remove_param(k)  # as Streamlit clears a bound widget's invalid value
            if isinstance(initial, dict):
                initial.pop(k, None)


_DROPPED = "_params_dropped_by_the_page"
_REFUSED = "_params_refused_by_the_link_rules"
_READ = "_params_read_by_the_page"
NOT_A_SETTING = "not a setting of this page"
_SHOWN = "_params_ignored_note"
_BEFORE = "_params_of_this_run"


def _snapshot() -> dict:
    return st.session_state.get(_BEFORE, {})


def drop_param(key: str) -> None:
    """Remove a link parameter on purpose (the page explains it, or it no longer applies),
    so that `report_ignored_params` does not list it as ignored."""
    if key in st.query_params:
        del st.query_params[key]
    st.session_state.setdefault(_DROPPED, set()).add(key)


def refuse_param(key: str, why: str) -> None:
    """A page refuses a link parameter it cannot apply (a value none of its settings can
    take): it leaves the URL and the value Streamlit would seed its bound widget with (call
    this before the widget is drawn), and the "Ignored link parameters" note names it with
    `why` (plain text: it is shown escaped)."""
    _forget([key])
    why = str(why).replace("`", "")
    why = why if len(why) <= 160 else why[:159] + "…"
    st.session_state.setdefault(_REFUSED, {})[key] = escape_markdown(why)


def read_param(key: str) -> None:
    """Say that the page read link parameter `key` itself (no widget of its own holds it),
    so that it is not reported as not being one of the page's settings."""
    st.session_state.setdefault(_READ, set()).add(key)


def _used_keys() -> set | None:
    """The keys of the widgets drawn in this script run (None outside one)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    try:
        return set(ctx.shared.widget_user_keys_this_run.snapshot())
    except AttributeError:  # no run, or a Streamlit that keeps them elsewhere
        return None


def ignored_params(before: dict, *, complete: bool = False) -> list[tuple[str, str, str]]:
    """(parameter, value, reason) for each link parameter that was not used: refused by the
    link rules or by the page, dropped by its widget (out of range, not one of the
    choices), or, once the page drew everything (`complete`: it did not stop early), a
    parameter that no widget drawn and nothing the page read took (also removed from the
    URL then, so a copied link does not carry it on). A parameter that left the URL because
    it equals its widget's default was used, and is not listed."""
    after = st.query_params.to_dict()
    meant = st.session_state.get(_DROPPED, set())
    refused = st.session_state.get(_REFUSED, {})
    used = _used_keys() if complete else None
    if used is not None:
        used |= st.session_state.get(_READ, set())
    out, unused = [], []
    for k, v in before.items():
        if k in meant:
            continue
        if k in refused:
            out.append((k, v, refused[k]))
        elif k not in after and not (
            k in st.session_state and links.same_value(st.session_state[k], v)
        ):
            out.append((k, v, "out of range or not one of the choices"))
        elif used is not None and k in after and k not in used:
            unused.append(k)
    if unused:
        _forget(unused)
    return out + [(k, before[k], NOT_A_SETTING) for k in unused]  # the others first


def show_refused(box, *, page: str = "") -> None:
    """Before the page runs: put the parameters the link rules refused into the sidebar
    note `box` (an st.empty), so the note is there even if the page stops early (st.stop
    ends the run before `report_ignored_params` can draw)."""
    refused = st.session_state.get(_REFUSED, {})
    if refused:
        before = {k: v for k, v in _snapshot().items() if k in refused}
        _draw(box, [(k, before.get(k, ""), why) for k, why in refused.items()])
    else:
        shown = st.session_state.get(_SHOWN)
        if shown and shown[0] == page:
            _draw(box, shown[1])


def report_ignored_params(
    before: dict, *, page: str = "", box=None, complete: bool = False
) -> None:
    """Say which link parameters were not used, and why; defaults are used instead.
    `complete`: the page drew everything (see `ignored_params`).

    The note stays while the visitor is on the page the link opened (`page`): a page that
    reruns itself (st.rerun) would otherwise erase it, since the parameters are gone from
    the URL after the first run."""
    dropped = ignored_params(before, complete=complete)
    shown = st.session_state.get(_SHOWN)
    if dropped:
        st.session_state[_SHOWN] = (page, dropped)
    elif shown and shown[0] == page:
        dropped = shown[1]
    else:
        st.session_state.pop(_SHOWN, None)
    if dropped:
        _draw(box if box is not None else st.sidebar, dropped)


def _draw(box, dropped) -> None:
    box.warning(
        "Ignored link parameters, defaults used: "
        + "; ".join(f"{quote_text(k, 40)} = {quote_text(v)} ({why})" for k, v, why in dropped[:8])
        + (f"; and {len(dropped) - 8} more" if len(dropped) > 8 else ""),
        icon=":material/link_off:",
    )


def session_budget() -> SessionBudget | None:
    """This session's compute account (None outside a Streamlit session)."""
    try:
        ss = st.session_state
        if BUDGET_KEY not in ss:
            ss[BUDGET_KEY] = SessionBudget()
        return ss[BUDGET_KEY]
    except Exception:  # no script run context (a bare import, a unit test)
        return None


def check_session() -> None:
    """Raise BudgetError once this session spent its compute allowance (hosted mode)."""
    budget = session_budget()
    if budget is not None:
        budget.check()


def metered(fn):
    """Decorate the body of a cached computation (put it under ``@st.cache_data``).

    Nested metered calls (a cached function calling another) account once, at the top.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if getattr(_local, "depth", 0):
            return fn(*args, **kwargs)
        budget = session_budget()
        if budget is not None:
            budget.check()
        with compute_slot():
            _local.depth = 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                _local.depth = 0
                if budget is not None:
                    budget.charge(time.perf_counter() - t0)

    return wrapper


def progress(items, *, key: str, run_id, text=lambda item: "Working…"):
    """Yield `items` one by one under a progress bar, a Cancel button and the deadline.

    Args:
        items: a sequence (its length sets the bar).
        key: widget-key prefix, unique on the page.
        run_id: hashable description of this action (the settings); a cancelled action
            stays cancelled until its settings change or the user presses "Run again".
        text: item -> progress text.

    When cancelled (now or on an earlier run with the same `run_id`), yields nothing more and
    shows a note with a "Run again" button; when the mode's `action_seconds` pass, stops and
    warns that the result is partial. The caller handles the items it got.
    """
    items = list(items)
    ss = st.session_state
    flag = f"_{key}_cancelled"
    rid = hash(run_id)
    if ss.get(flag) == rid:
        with st.container(horizontal=True, vertical_alignment="center"):
            st.info("Cancelled. Change a setting or run it again.", icon=":material/cancel:")
            st.button("Run again", key=f"{key}_again", on_click=ss.pop, args=(flag, None))
        return
    deadline = Deadline()
    box = st.empty()
    with box.container():
        bar = st.progress(0.0, text=text(items[0]) if items else "")
        st.button(
            "Cancel",
            key=f"{key}_cancel",
            icon=":material/stop:",
            on_click=ss.__setitem__,
            args=(flag, rid),
            help="Stop this computation (what finished so far is kept for the next run)",
        )
    try:
        for j, item in enumerate(items):
            if j:
                bar.progress(j / len(items), text=text(item))
            try:
                deadline.check()
            except Cancelled as exc:
                st.warning(
                    f"**Partial result:** {exc}; showing the first {j} of "
                    f"{len(items)} steps. Ask for less to see all of it.",
                    icon=":material/timer:",
                )
                return
            yield item
    finally:
        box.empty()
