"""The "Rank from small init" page in a real browser (chromium via Playwright, as
test_browser.py): a deep link draws the four charts and the verdict without an error box,
and switching to normalized GD reruns it cleanly."""

from __future__ import annotations

import pytest
from test_browser import PAGE_TIMEOUT_MS, SHOTS, _check_clean, _settle, clean_page

pytestmark = pytest.mark.browser


def test_small_init_page_renders_and_switches_to_normalized_gd(server, browser):
    url = f"{server}/small-init-rank?stair_steps=1000&stair_lambda=0.01"
    with clean_page(browser, url, "small-init-rank") as page:
        body = page.inner_text("body")
        assert "Selection reached" in body and "Take-off steps" in body
        assert "predicted rate 2ηλ" in body
        assert page.locator(".vega-embed").count() >= 4
        page.get_by_text("normalized", exact=True).click()
        page.wait_for_function(
            "window.location.search.includes('stair_rule=')", timeout=PAGE_TIMEOUT_MS
        )
        _settle(page, charts=True)
        _check_clean(page, "small-init-rank-ngd")
        assert "Selection reached" in page.inner_text("body")
        page.screenshot(path=str(SHOTS / "small-init-rank.png"), full_page=True)
