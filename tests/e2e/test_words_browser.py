"""The Real words page in a real browser (chromium via Playwright, as test_browser.py): a
bundled task renders its charts without an error box, and typed HTML stays inert text."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from test_browser import PAGE_TIMEOUT_MS, SHOTS, _check_clean, clean_page

pytestmark = pytest.mark.browser
HOSTILE = "+ the movie was <img src=x id=pwn onerror=alert(1)> **great**\n- the food was awful"


def test_words_page_renders_and_typed_html_stays_text(server, browser):
    with clean_page(browser, f"{server}/real-words?words_n=8&words_steps=500", "words") as page:
        body = page.inner_text("body")
        assert "GD's selection is" in body and "Fewer dimensions" in body
        assert page.locator(".vega-embed").count() >= 5
        page.screenshot(path=str(SHOTS / "words.png"), full_page=True)
        page.get_by_text("Watch GD live").click()  # streams GD, then stops
        page.wait_for_function(
            "document.body.innerText.includes('of 500 — done')", timeout=PAGE_TIMEOUT_MS
        )
        _check_clean(page, "words-live")
    typed = (
        f"{server}/real-words?words_src={quote('my own')}&words_steps=500"
        f"&words_text={quote(HOSTILE)}"
    )
    with clean_page(browser, typed, "words-typed") as page:
        assert page.locator("#pwn").count() == 0  # no element made from the text
        assert "GD's selection is" in page.inner_text("body")
