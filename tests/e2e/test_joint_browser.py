"""The "Train the head too" page in a real browser (chromium via Playwright, as
test_browser.py): a deep link to the relaxed preset in float32 draws the exact run and the
authors' loop side by side, with no error box, and names the non-support sequence."""

from __future__ import annotations

import pytest
from test_browser import SHOTS, clean_page

pytestmark = pytest.mark.browser


def test_joint_page_renders_both_runs(server, browser):
    with clean_page(
        browser, f"{server}/train-the-head?jt_steps=500&jt_dtype=float32", "joint"
    ) as page:
        body = page.inner_text("body")
        assert "Train the head too" in body
        assert "not support: [3]" in body
        assert "float32, authors' loop" in body and "float64, exact (attsvm)" in body
        assert page.locator(".vega-embed").count() >= 2
        page.screenshot(path=str(SHOTS / "joint.png"), full_page=True)
