"""Long work can be cancelled in the browser: a big over-parameterization sweep shows its
progress and a Cancel button; Cancel stops it (it stays cancelled), Run again restarts it."""

from __future__ import annotations

import pytest
from test_browser import PAGE_TIMEOUT_MS, ROOT, SHOTS, _check_clean, a_run, run_states

pytestmark = pytest.mark.browser

BIG = "ovp_runs=500&steps=20000&ovp_d=2&ovp_d=4&ovp_d=8&ovp_d=12&ovp_d=20&ovp_d=30"


def test_cancel_stops_a_long_sweep_and_run_again_restarts_it(server, browser):
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
        with a_run(page):  # the run that draws "Cancelled" has ended
            cancel.click()
        assert "Cancelled" in page.inner_text('[data-testid="stMain"]')
        _check_clean(page, "cancelled-sweep")
        assert page.locator(".vega-embed").count() == 0
        # Run again restarts the sweep: its progress bar and Cancel button come back. If they
        # do not, keep a screenshot, the page's text, the run states and the server's log.
        with a_run(page):
            page.get_by_role("button", name="Run again").click()
            try:
                page.get_by_role("button", name="Cancel").wait_for(timeout=PAGE_TIMEOUT_MS)
            except Exception:
                page.screenshot(path=str(SHOTS / "cancel-run-again-FAILED.png"), full_page=True)
                log = (ROOT / "artifacts" / "e2e-server.log").read_text()[-1500:]
                pytest.fail(
                    "no Cancel button after Run again; run state "
                    + run_states(page)
                    + "; the page says: "
                    + page.locator('[data-testid="stMain"]').inner_text()[:800]
                    + "\nserver log tail:\n"
                    + log
                )
            page.get_by_role("button", name="Cancel").click()  # leave the server idle
        assert "Cancelled" in page.inner_text('[data-testid="stMain"]')
    finally:
        page.close()
