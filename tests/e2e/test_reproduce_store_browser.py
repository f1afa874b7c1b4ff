"""The Reproduce page on a fresh hosted server with an empty results store, in a real browser
(chromium via Playwright, as test_browser.py): the server's background filler computes the
cards' results (shrunken settings, two experiments, to stay cheap) and they appear with no
click and no error box; a server restarted on the filled folder shows them at once."""

from __future__ import annotations

import json
import time

import pytest
from test_browser import ARGS, CHROMIUM, PAGE_TIMEOUT_MS, SHOTS, streamlit_server

from attsvm import store

pytestmark = pytest.mark.browser
TINY = {
    "svm-rank": {"pairs": [[5, 5]], "ds": [2, 5], "runs": 5, "max_draws": 60},
    "regularization-path": {"n": 3, "T": 4, "d": 4, "radii": 4, "r_max": 50.0, "restarts": 0},
}
EXCEPTION = '[data-testid="stException"]'
CHART = ".vega-embed canvas, .vega-embed svg"


def _stored_cards(page) -> int:
    return page.inner_text("body").count("Computed by attsvm")


def test_a_fresh_server_fills_the_store_and_a_restart_shows_it(tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("ATTSVM_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv(store.SETTINGS_ENV, json.dumps(TINY))
    monkeypatch.setenv("ATTSVM_FILL", ",".join(TINY))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        with streamlit_server(mode="hosted", log_name="e2e-store-server.log") as (base, _):
            page = browser.new_page(viewport={"width": 1500, "height": 2400})
            t0 = time.perf_counter()
            page.goto(f"{base}/paper-figures", timeout=PAGE_TIMEOUT_MS)
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=PAGE_TIMEOUT_MS)
            print(f"fresh server: page title after {time.perf_counter() - t0:.1f} s")
            page.wait_for_function(
                "document.body.innerText.includes('Stored on the server')", timeout=PAGE_TIMEOUT_MS
            )
            # no click: the cards fill in as the server stores their results
            deadline = time.time() + 180
            while _stored_cards(page) < len(TINY) and time.time() < deadline:
                assert page.locator(EXCEPTION).count() == 0
                time.sleep(0.5)
            print(f"fresh server: both cards stored after {time.perf_counter() - t0:.1f} s")
            assert _stored_cards(page) == len(TINY)
            page.wait_for_selector(CHART, timeout=PAGE_TIMEOUT_MS)
            assert page.locator(EXCEPTION).count() == 0
            page.screenshot(path=str(SHOTS / "reproduce-store.png"), full_page=True)
            page.close()
        monkeypatch.setenv("ATTSVM_FILL", "0")
        with streamlit_server(mode="hosted", log_name="e2e-store-server-2.log") as (base, _):
            page = browser.new_page(viewport={"width": 1500, "height": 2400})
            t0 = time.perf_counter()
            page.goto(f"{base}/paper-figures", timeout=PAGE_TIMEOUT_MS)
            page.wait_for_function(
                f"document.querySelectorAll('.vega-embed').length >= {len(TINY)}",
                timeout=PAGE_TIMEOUT_MS,
            )
            print(f"restarted server: {len(TINY)} charts after {time.perf_counter() - t0:.1f} s")
            assert _stored_cards(page) == len(TINY)
            assert page.locator(EXCEPTION).count() == 0
            page.close()
        browser.close()
