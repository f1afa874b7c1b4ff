"""The next-token prediction page in a real browser (chromium via Playwright, as
test_browser.py): it renders its graphs and live run without an error box, and editing a
sequence in the text area merges an SCC and says so."""

from __future__ import annotations

import pytest
from test_browser import PAGE_TIMEOUT_MS, SHOTS, _check_clean, _settle, clean_page
from test_links import _view

LAST = '[data-testid="stDownloadButton"]'  # the page's last element: the run has finished

pytestmark = pytest.mark.browser
AUTHORS_0 = "1 2 5 4 : 1\n5 0 1 2 : 5\n4 5 3 1 : 5\n3 5 0 2 : 3\n3 1 0 4 : 1\n5 1 3 0 : 3"


def test_ntp_page_renders_and_reports_a_merge(server, browser):
    from urllib.parse import quote

    url = f"{server}/next-token?ntp_steps=400&ntp_seqs={quote(AUTHORS_0)}"
    with clean_page(browser, url, "ntp") as page:
        body = page.inner_text("body")
        assert "Graph-SVM: optimal" in body and "After 400 steps" in body
        assert page.locator(".vega-embed").count() >= 5
        area = page.locator("textarea").first
        area.fill(AUTHORS_0.replace("3 5 0 2 : 3", "3 5 0 2 : 0"))  # 0 now beats 5 in G^(2)
        area.press("Control+Enter")
        page.wait_for_function(
            "document.body.innerText.includes('What changed')", timeout=PAGE_TIMEOUT_MS
        )
        _settle(page, charts=True)
        _check_clean(page, "ntp-edited")
        assert "merged {0} and {5} into {0, 5}" in page.inner_text("body").replace(
            "merged {5} and {0}", "merged {0} and {5}"
        )
        page.screenshot(path=str(SHOTS / "ntp.png"), full_page=True)


def test_a_copied_link_shows_the_same_numbers(server, browser):
    """Two fresh browser sessions on one link: same sequences, same graphs, same numbers."""
    url = f"{server}/next-token?ntp_steps=600&ntp_seed=3&ntp_K=7&ntp_shape=5x3&ntp_lr=0.02"
    first, u1 = _view(browser, url, last=LAST, name="ntp-link")
    second, u2 = _view(browser, url, last=LAST, name="ntp-link")
    # the same lines (a log axis may emit its tick labels in another order)
    assert sorted(first.splitlines()) == sorted(second.splitlines())
    assert "After 600 steps" in first
    assert "ntp_seed=3" in u1 and "ntp_K=7" in u2
