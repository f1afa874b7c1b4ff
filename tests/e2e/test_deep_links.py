"""Shared links on a fresh server, in a real browser.

- A deep link is the first visit of a fresh server (both modes): it opens its page, with no
  "Page not found" dialog and with the link's settings; then every other page of app.py,
  each as the first visit of a new browser context, shows its own title and no dialog.
- A Reproduce link with hostile card settings names them in one note, draws none of their
  markup, runs none of their code, applies the setting a card can run, and the page stays
  usable.
"""

from __future__ import annotations

import ast
import re
import tempfile
import urllib.parse
from pathlib import Path

import pytest
from test_browser import ARGS, CHROMIUM, PAGE_TIMEOUT_MS, ROOT, _settle, streamlit_server

pytestmark = pytest.mark.browser

H1 = '[data-testid="stMain"] h1'
DIALOG = "Page not found"
NOTE = '[data-testid="stSidebar"] [data-testid="stAlert"]'


def _url_paths() -> list[str]:
    """Every page's URL path, from app.py's page list (the root page as "")."""
    tree = ast.parse((ROOT / "app.py").read_text())
    pages = next(
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == "PAGES"
    )
    return [url or "" for file, _, _, url in pages if (ROOT / "app_pages" / file).exists()]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """A fresh hosted server (as the image starts it) on an empty store, no background
    filler: the deep-link test below is its first visitor."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTSVM_RESULTS", str(tmp_path_factory.mktemp("results")))
    mp.setenv("ATTSVM_FILL", "0")
    try:
        with streamlit_server(mode="hosted", log_name="e2e-links-hosted.log") as (base, _):
            yield base
    finally:
        mp.undo()


def _first_visits(browser, base: str):
    paths = _url_paths()
    titles = {}
    for j, path in enumerate(["token-selection", *[p for p in paths if p != "token-selection"]]):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1600})
        try:
            page = ctx.new_page()
            query = "?seed=7" if j == 0 else ""
            page.goto(f"{base}/{path}{query}", timeout=PAGE_TIMEOUT_MS)
            if j == 0:  # the server's very first script run
                seed = page.get_by_label("Data seed", exact=True)
                seed.wait_for(timeout=PAGE_TIMEOUT_MS)
                assert seed.input_value() == "7"
                assert "seed=7" in page.url
            page.wait_for_selector(H1, timeout=PAGE_TIMEOUT_MS)
            # (Streamlit sends "page not found" before the run draws anything)
            assert page.get_by_text(DIALOG).count() == 0, path
            assert urllib.parse.urlparse(page.url).path == f"/{path}", (path, page.url)
            titles[path] = page.locator(H1).first.inner_text()
        finally:
            ctx.close()
    # each page drew its own title (no link fell back to the main page)
    assert len(set(titles.values())) == len(paths), titles


def test_deep_links_on_a_fresh_local_server(browser):
    with streamlit_server(log_name="e2e-links-local.log") as (base, _):
        _first_visits(browser, base)


def test_deep_links_on_a_fresh_hosted_server(browser, hosted):
    _first_visits(browser, hosted)


HOSTILE = {
    "repro-svm-rank-pairs": "<img src=x onerror=alert(1)>",
    "repro-multi-token-ds": "__import__('os').system('touch {mark}')",
    "repro-svm-rank-style": "<b>bold</b>",
    "repro-ntp-global-fixtures": "/etc",
    "repro-nope-runs": "[x](javascript:alert(1))",
}


def test_a_reproduce_link_with_hostile_settings_names_them_and_stays_usable(browser, hosted):
    mark = Path(tempfile.gettempdir()) / "attsvm-e2e-link-ran-code"
    mark.unlink(missing_ok=True)
    query = {k: v.format(mark=mark) for k, v in HOSTILE.items()} | {"repro-svm-rank-runs": "7"}
    ctx = browser.new_context(viewport={"width": 1500, "height": 2400})
    try:
        page = ctx.new_page()
        page.goto(
            f"{hosted}/paper-figures?{urllib.parse.urlencode(query)}", timeout=PAGE_TIMEOUT_MS
        )
        _settle(page)
        page.wait_for_function(
            "document.body.innerText.includes('Ignored link parameters')", timeout=PAGE_TIMEOUT_MS
        )
        notes = page.locator(NOTE).all_inner_texts()
        assert len(notes) == 1, notes
        for key in HOSTILE:
            assert key in notes[0], (key, notes[0])
        assert "repro-svm-rank-runs" not in notes[0]
        assert "<b>bold</b>" in notes[0]  # shown as text, not drawn
        assert page.locator('img[src="x"]').count() == 0
        assert page.locator("b, strong").filter(has_text=re.compile("^bold$")).count() == 0
        assert not mark.exists()
        assert page.locator('[data-testid="stException"]').count() == 0
        for key in HOSTILE:  # gone from the link
            assert key not in urllib.parse.unquote(page.url)
        # the setting a card can run is in its form; the form still takes typed settings
        heading = page.get_by_role("heading", name=re.compile("^svm-rank —"))
        card = page.locator('[data-testid="stVerticalBlock"]').filter(has=heading).last
        runs = card.get_by_label("runs", exact=True)
        assert runs.input_value() == "7"
        runs.fill("8")
        runs.press("Enter")
        page.wait_for_url(re.compile(r".*repro-svm-rank-runs=8.*"), timeout=PAGE_TIMEOUT_MS)
    finally:
        ctx.close()
        mark.unlink(missing_ok=True)
