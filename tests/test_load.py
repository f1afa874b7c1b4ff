"""The load test at a small N (slow): simultaneous visitors of a hosted-mode server all get
their charts, with no error box, and server memory stays bounded.

The full run (N = 1, 5, 20) is `python loadtest/loadtest.py`; see docs/hosting.md "Load test".
Skipped when Debian's chromium or Playwright is missing, unless CI is set (then it fails).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]


def _loadtest():
    spec = importlib.util.spec_from_file_location("loadtest", ROOT / "loadtest" / "loadtest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_simultaneous_hosted_sessions_all_get_their_charts(tmp_path):
    lt = _loadtest()
    missing = None
    if not Path(lt.CHROMIUM).exists():
        missing = f"{lt.CHROMIUM} not found (apt-get install chromium)"
    elif importlib.util.find_spec("playwright") is None:
        missing = "playwright is not installed (pip install -r requirements-dev.txt)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"load test cannot run in CI: {missing}")
        pytest.skip(missing)
    result = asyncio.run(lt.run([3], timeout_s=45, settle=2, log=tmp_path / "server.log"))
    (row,) = result["rounds"]
    assert row["errors"] == [], row["errors"]
    for page, _ in lt.PAGES:
        assert row[f"{page}_ok"] == 3
        assert row[f"{page}_p95_s"] < 45
    assert row["rss_peak_mb"] < 2048
