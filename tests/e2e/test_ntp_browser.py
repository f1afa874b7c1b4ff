"""The next-token prediction page in a real browser (chromium via Playwright, as
test_browser.py): it renders its graphs and live run without an error box, and editing a
sequence in the text area merges an SCC and says so."""
from __future__ import annotations

import pytest
from test_browser import PAGE_TIMEOUT_MS, SHOTS, _check_clean, _open, _settle, browser, server  # noqa: F401

pytestmark = pytest.mark.browser
AUTHORS_0 = "1 2 5 4 : 1\n5 0 1 2 : 5\n4 5 3 1 : 5\n3 5 0 2 : 3\n3 1 0 4 : 1\n5 1 3 0 : 3"


def test_ntp_page_renders_and_reports_a_merge(server, browser):  # noqa: F811
    from urllib.parse import quote
    page = _open(browser, f"{server}/next-token?ntp_steps=400&ntp_seqs={quote(AUTHORS_0)}")
    try:
        _settle(page, charts=True)
        _check_clean(page, "ntp")
        body = page.inner_text("body")
        assert "Graph-SVM: optimal" in body and "After 400 steps" in body
        assert page.locator(".vega-embed").count() >= 5
        area = page.locator("textarea").first
        area.fill(AUTHORS_0.replace("3 5 0 2 : 3", "3 5 0 2 : 0"))   # 0 now beats 5 in G^(2)
        area.press("Control+Enter")
        page.wait_for_function("document.body.innerText.includes('What changed')",
                               timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        _check_clean(page, "ntp-edited")
        assert "merged {0} and {5} into {0, 5}" in page.inner_text("body").replace(
            "merged {5} and {0}", "merged {0} and {5}")
        page.screenshot(path=str(SHOTS / "ntp.png"), full_page=True)
    finally:
        page.close()
