"""The browser tests' shared fixtures: one local app server per test process (xdist worker),
and a chromium per module warmed up on it.

The server is session-scoped: starting `streamlit run app.py` and its first page (imports,
compiled programs, the Overview's runs) took 11–16 s per module, eight modules a run. Each
test opens its own pages, so every test still gets fresh sessions; what they share is the
server's caches, as a visitor after another visitor does. The hosted-mode servers of
test_hostile.py and test_reproduce_store_browser.py stay their own. Chromium stays
module-scoped: Playwright's sync API cannot be started twice in one thread, and those two
tests start their own.
"""
from __future__ import annotations

import pytest
from test_browser import ARGS, CHROMIUM, PAGE_TIMEOUT_MS, _settle, streamlit_server


@pytest.fixture(scope="session")
def server():
    with streamlit_server() as (base, _):
        yield base


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        # A process's first run still probes the legacy pages/ folder; warm it up at the
        # root so no page test sees that one-off "page not found" dialog.
        page = b.new_page()
        page.goto(server + "/", timeout=PAGE_TIMEOUT_MS)
        _settle(page)
        page.close()
        yield b
        b.close()
