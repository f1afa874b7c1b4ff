"""The hierarchy page in a real browser (chromium via Playwright, as test_browser.py): the
acceptance size (L = 2, H = 2, n = 8, T = 8, d = 16, 2000 steps) trains live, draws every
chart, shows no error box, and a changed control trains again."""

from __future__ import annotations

import time

import pytest
from test_browser import PAGE_TIMEOUT_MS, SHOTS, _check_clean, _settle, a_run, clean_page

pytestmark = pytest.mark.browser
CHART = ".vega-embed canvas, .vega-embed svg"


def test_hierarchy_page_trains_live_and_audits(server, browser):
    url = f"{server}/hierarchy-of-svms?hier_seed=3"
    page = browser.new_page(viewport={"width": 1500, "height": 2400})
    try:
        t0 = time.perf_counter()
        page.goto(url, timeout=PAGE_TIMEOUT_MS)
        page.wait_for_selector(CHART, timeout=PAGE_TIMEOUT_MS)
        print(f"first chart after {time.perf_counter() - t0:.2f} s")
        _settle(page, charts=True)
        _check_clean(page, "hierarchy")
        body = page.inner_text("body")
        assert "Open question" in body and "After 2,000 steps" in body
        assert "Layer 1" in body and "Layer 2" in body
        assert page.locator(".vega-embed").count() >= 5
        page.screenshot(path=str(SHOTS / "hierarchy.png"), full_page=True)
    finally:
        page.close()


def test_a_changed_control_trains_again(server, browser):
    with clean_page(
        browser,
        f"{server}/hierarchy-of-svms?hier_n=4&hier_T=4&hier_d=4&hier_steps=200",
        "hierarchy-small",
    ) as page:
        box = page.get_by_label("heads H")
        with a_run(page):
            box.fill("3")
            box.press("Enter")
        _settle(page, charts=True)
        _check_clean(page, "hierarchy-heads")
        assert "of 3 heads" in page.inner_text("body")
