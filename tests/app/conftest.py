"""AppTest helpers: open a page of the explorer through its router (app.py)."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from pathlib import Path

import pytest
from streamlit.components.v2 import manifest_scanner as _scanner
from streamlit.testing.v1 import AppTest

APP = Path(__file__).parents[2] / "app.py"
TIMEOUT = 120  # first runs compile JAX programs on a busy 2-core machine

# Every AppTest's first run scans all installed distributions for Streamlit component
# manifests (`BidiComponentManager.discover_and_register_components`): 0.43 s of reading
# package metadata, per AppTest, about 250 of them per suite. The installed packages do not
# change during a test run, so one scan per test process serves them all (the app uses no
# custom component: the scan finds none either way).
_scanner.scan_component_manifests = functools.cache(_scanner.scan_component_manifests)


def open_page(page: str | None, query: dict | None = None) -> AppTest:
    """Run app.py (optionally with URL query parameters), then switch to `page`. The first
    run, on the main page, names the page's own parameters as not its settings and drops
    them from the URL (as it should: they are not); they are set again for `page`."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    for k, v in (query or {}).items():
        at.query_params[k] = str(v)
    at.run()
    if page:
        for k, v in (query or {}).items():
            at.query_params[k] = str(v)
        at.switch_page(f"app_pages/{page}").run()
    assert_clean(at)
    return at


def open_link(page: str | None, query: dict) -> AppTest:
    """Open a deep link: `page` with URL `query`, as a browser does (the router, app.py, runs
    first and opens the page with the link's parameters). Before its first run AppTest
    knows a page by its file name only, not by app.py's URLs, so one empty run registers
    the router first. Does not assert a clean page."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if page:
        at.run()
    for k, v in query.items():
        at.query_params[k] = v if isinstance(v, list) else str(v)
    if page:
        at.switch_page(f"app_pages/{page}")
    return at.run()


def assert_clean(at: AppTest):
    """No uncaught exception on the page."""
    assert not at.exception, [e.value for e in at.exception]


def texts(at: AppTest) -> str:
    """Everything the page says in markdown, captions, alerts and metrics (one string)."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in ("success", "info", "warning", "error"):
        parts += [e.value for e in getattr(at, kind)]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    return "\n".join(parts)


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def chart_specs(at: AppTest) -> list[str]:
    """The Vega-Lite spec JSON of every chart (to see that a control changed a chart)."""
    # Dataset names are hashes of the data, so a changed chart has a changed spec.
    return [json.dumps(json.loads(c.proto.spec), ensure_ascii=False) for c in charts(at)]


@pytest.fixture
def tiny_budget(monkeypatch):
    """Make every GD action over budget (as a tiny hosted server would)."""
    from attsvm import limits

    small = dataclasses.replace(limits.current(), max_work=10.0)
    monkeypatch.setattr(limits, "current", lambda: small)
    yield small


@pytest.fixture(autouse=True)
def _local_mode(monkeypatch):
    """App tests run with the local (generous) caps unless a test says otherwise."""
    if os.environ.get("ATTSVM_MODE"):
        monkeypatch.delenv("ATTSVM_MODE")


def table(at: AppTest, column: str):
    """The first st.dataframe having `column` (plain dataframes carry no key in AppTest)."""
    for df in at.dataframe:
        value = df.value
        if column in value.columns:
            return value
    raise AssertionError(
        f"no table with a {column!r} column; tables: "
        f"{[list(d.value.columns) for d in at.dataframe]}"
    )
