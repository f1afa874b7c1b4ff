"""A link copied from any result page, opened in a fresh browser session, shows the same
state and the same numbers (the hosted demo's sharing; the playground's link is checked
against the library in test_browser.py). Each page gets non-default settings in its URL;
two independent browser contexts open it; the page text (every number it prints) must be
identical, the settings must have survived in the URL, and no error box may appear."""

from __future__ import annotations

import re

import pytest
from test_browser import PAGE_TIMEOUT_MS, _check_clean, _settle

pytestmark = pytest.mark.browser

# url path -> (query of the copied link, text the page must then show)
LINKS = {
    "geometry-2d": ("geo_src=random&geo_seed=3&geo_n=3&steps=200", None),
    "local-optima": ("bas_seed=5&bas_runs=16&bas_grid=4&steps=200", "GD from 16 random starts"),
    "over-parameterization": ("seed=7&ovp_runs=3&steps=100", "3 problems per d"),
    "rank-collapse": ("seed=2&rank_inst=2&rank_T=4&steps=200", "T = 4"),
    "nonlinear-heads": ("nl_seed=3&nl_steps=500&nl_head=quadratic", "quadratic head"),
    "causal-attention": ("seq_mode=sequence&seed=4&steps=200", None),
}
TIMING = re.compile(r"\d+(\.\d+)?\s?(s|ms)\b")  # durations differ between runs


def _view(browser, url: str, *, last: str | None = None, name: str = "link") -> tuple[str, str]:
    """The main area's text (durations masked) and the URL of `url` opened in a fresh
    browser context; `last`: a selector of the page's last element, waited for (a page
    that draws in stages has finished only then)."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 2400})
    try:
        page = ctx.new_page()
        page.goto(url, timeout=PAGE_TIMEOUT_MS)
        _settle(page, charts=True)
        if last:
            page.wait_for_selector(last, timeout=PAGE_TIMEOUT_MS)
            _settle(page, charts=True)
        _check_clean(page, name)
        text = page.locator('[data-testid="stMain"]').inner_text()
        return TIMING.sub("<t>", text), page.url
    finally:
        ctx.close()


@pytest.mark.parametrize("path", list(LINKS))
def test_a_copied_link_shows_the_same_state_and_numbers(server, browser, path):
    query, expect = LINKS[path]
    url = f"{server}/{path}?{query}"
    (first, url1), (second, url2) = (_view(browser, url) for _ in range(2))
    assert first == second
    for pair in query.split("&"):
        assert pair in url1 and pair in url2, (pair, url1)
    if expect:
        assert expect in first.replace(",", "")


def _card(page, name: str):
    """The bordered container of one experiment's card (the innermost block holding its
    heading)."""
    heading = page.get_by_role("heading", name=re.compile(f"^{re.escape(name)} —"))
    return page.locator('[data-testid="stVerticalBlock"]').filter(has=heading).last


def test_reproduce_settings_go_into_the_link_and_come_back(server, browser):
    """On the Reproduce page a changed setting is written into the URL, and that URL opened
    in a fresh session shows the setting again (the Run result itself is cached by it)."""
    ctx = browser.new_context(viewport={"width": 1500, "height": 2400})
    try:
        page = ctx.new_page()
        page.goto(f"{server}/paper-figures", timeout=PAGE_TIMEOUT_MS)
        _settle(page)
        card = _card(page, "svm-rank")
        card.get_by_text("Settings (the paper's by default)").click()
        box = card.get_by_label("runs", exact=True)
        box.fill("7")
        box.press("Enter")
        page.wait_for_url(re.compile(r".*repro-svm-rank-runs=7.*"), timeout=PAGE_TIMEOUT_MS)
        _settle(page)
        _check_clean(page, "reproduce-link")
        link = page.url
    finally:
        ctx.close()
    ctx = browser.new_context(viewport={"width": 1500, "height": 2400})
    try:
        page = ctx.new_page()
        page.goto(link, timeout=PAGE_TIMEOUT_MS)
        _settle(page)
        _check_clean(page, "reproduce-link-opened")
        card = _card(page, "svm-rank")  # its settings open by themselves
        box = card.get_by_label("runs", exact=True)
        assert box.is_visible() and box.input_value() == "7"
        other = _card(page, "multi-token").get_by_label("runs", exact=True)
        assert not other.is_visible()  # untouched cards stay closed
        assert "repro-svm-rank-runs=7" in page.url
    finally:
        ctx.close()


def test_edited_geometry_data_travels_in_the_link(server, browser):
    """Tokens edited on the Geometry page are in its URL (`geo_data`): the link opened in
    two fresh sessions shows the edited problem, with the same numbers, and keeps it."""
    import urllib.parse

    import attsvm
    from ui import linkdata

    g = attsvm.paper_problem("geometry-1")
    X = g.X.copy()
    X[0, 1, 0] = 0.25
    data = linkdata.encode("geometry-1", X, g.Y, g.Z, g.v)
    url = f"{server}/geometry-2d?geo_data={urllib.parse.quote(data, safe='')}"
    (first, url1), (second, url2) = (_view(browser, url) for _ in range(2))
    assert first == second
    assert "Showing your edited data" in first
    for u in (url1, url2):
        got = urllib.parse.parse_qs(urllib.parse.urlsplit(u).query)["geo_data"][0]
        assert linkdata.decode(got, max_n=8, max_T=12)[1][0, 1, 0] == 0.25
