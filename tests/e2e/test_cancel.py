"""Long work can be cancelled in the browser: a big over-parameterization sweep shows its
progress and a Cancel button; Cancel stops it (it stays cancelled), Run again restarts it."""
from __future__ import annotations

import pytest
from test_browser import (  # noqa: F401
    PAGE_TIMEOUT_MS,
    SHOTS,
    _check_clean,
    browser,
    server,
    wait_idle,
)

pytestmark = pytest.mark.browser

BIG = "ovp_runs=500&steps=20000&ovp_d=2&ovp_d=4&ovp_d=8&ovp_d=12&ovp_d=20&ovp_d=30"


def test_cancel_stops_a_long_sweep_and_run_again_restarts_it(server, browser):  # noqa: F811
    page = browser.new_page(viewport={"width": 1500, "height": 1800})
    try:
        page.goto(f"{server}/over-parameterization?{BIG}", timeout=PAGE_TIMEOUT_MS)
        cancel = page.get_by_role("button", name="Cancel")
        cancel.wait_for(timeout=PAGE_TIMEOUT_MS)
        # The bar and the button arrive as separate deltas: wait for the bar rather than
        # counting at the instant the button shows (CI once counted 0 there).
        bar = page.locator('[data-testid="stProgress"]')
        bar.first.wait_for(timeout=PAGE_TIMEOUT_MS)
        assert bar.count() == 1
        cancel.click()
        page.wait_for_function("document.body.innerText.includes('Cancelled')",
                               timeout=PAGE_TIMEOUT_MS)
        _check_clean(page, "cancelled-sweep")
        assert page.locator(".vega-embed").count() == 0
        # Click "Run again" once the cancelled run has ended (CI once clicked it while that
        # run was still finishing and then never saw a new Cancel button); if the button
        # still does not come, keep a screenshot and the page's text for the report.
        wait_idle(page)
        page.get_by_role("button", name="Run again").click()
        try:
            page.get_by_role("button", name="Cancel").wait_for(timeout=PAGE_TIMEOUT_MS)
        except Exception:
            page.screenshot(path=str(SHOTS / "cancel-run-again-FAILED.png"), full_page=True)
            pytest.fail("no Cancel button after Run again; the page says: "
                        + page.locator('[data-testid="stMain"]').inner_text()[:1500])
        page.get_by_role("button", name="Cancel").click()      # leave the server idle
        page.wait_for_function("document.body.innerText.includes('Cancelled')",
                               timeout=PAGE_TIMEOUT_MS)
    finally:
        page.close()

