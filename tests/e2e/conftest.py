"""The browser tests' shared fixtures: one local app server per test process (xdist worker),
and a chromium per module.

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
from test_browser import ARGS, CHROMIUM, streamlit_server


@pytest.fixture(scope="session")
def server():
    with streamlit_server() as (base, _):
        yield base


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()
