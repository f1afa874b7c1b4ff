"""The Reproduce page's follow-up cards in a real browser (chromium via Playwright, as
test_browser.py): a link sets an NTP card's settings, Run draws its chart and our statistic
next to the authors', without an error box."""

from __future__ import annotations

import pytest
from test_browser import PAGE_TIMEOUT_MS, SHOTS, _check_clean, _open, _settle

pytestmark = pytest.mark.browser


def test_a_follow_up_card_runs_from_a_link(server, browser):
    page = _open(
        browser, f"{server}/paper-figures?repro-ntp-local-instances=2&repro-ntp-local-steps=200"
    )
    try:
        _settle(page)
        _check_clean(page, "reproduce-followups")
        assert "Follow-up papers" in page.inner_text("body")
        page.locator(".st-key-repro-ntp-local-run button").click()
        page.wait_for_function(
            "document.body.innerText.includes('2 instances: corr(W, W^gmm)')",
            timeout=PAGE_TIMEOUT_MS,
        )
        _settle(page, charts=True)
        _check_clean(page, "reproduce-followups-run")
        body = page.inner_text("body")
        assert "0.99793" in body  # the authors' mean, next to ours
        assert page.locator(".st-key-repro-ntp-local-dl-csv").count() == 1
        page.screenshot(path=str(SHOTS / "reproduce-followups.png"), full_page=True)
    finally:
        page.close()
