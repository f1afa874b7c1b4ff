"""The README and docs/: every relative link and image resolves, the README stays a short
front page whose test command is the one CI runs, and no page cites planning history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target), an optional "title" after the target; <img src="...">
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG = re.compile(r"<img\b[^>]*\bsrc=[\"']([^\"']+)[\"']", re.I)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def targets(text: str) -> list[str]:
    """Relative link and image targets of a Markdown text (code blocks and spans skipped)."""
    text = FENCE.sub("", text)
    text = re.sub(r"`[^`\n]*`", "", text)
    found = LINK.findall(text) + IMG.findall(text)
    return [t for t in found if not re.match(r"^[a-z][a-z0-9+.-]*:|^#", t, re.I)]


def test_the_link_pattern_finds_links_images_and_skips_code_and_urls():
    text = (
        "[a](docs/x.md) ![b](img/y.png \"t\") <img src='z.gif'> [c](https://e.org) "
        "[d](#top) `[e](no.md)`\n```\n[f](no2.md)\n```\n[g](<w.md#sec>)"
    )
    assert targets(text) == ["docs/x.md", "img/y.png", "w.md#sec", "z.gif"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_image_resolves(page):
    missing = []
    for t in targets(page.read_text()):
        path = (page.parent / t.split("#")[0]).resolve()
        if not path.exists():
            missing.append(t)
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_the_readme_is_a_short_front_page_with_ci_s_test_command():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci.startswith("python3 -m venv .venv"), ci
    assert any(line.strip() == ci for line in readme.splitlines()), (
        f"the README must show CI's test command byte for byte: {ci}"
    )
    assert "streamlit run app.py" in readme


def test_images_in_the_docs_stay_small():
    big = {}
    for page in PAGES:
        for t in targets(page.read_text()):
            path = (page.parent / t.split("#")[0]).resolve()
            if path.suffix.lower() in (".png", ".gif", ".jpg", ".svg") and path.exists():
                if path.stat().st_size > 600_000:
                    big[t] = path.stat().st_size
    assert not big, big


def test_no_page_cites_issue_numbers_or_planning_history():
    bad = re.compile(r"\bissues? #?\d+|\bthe issue\b|\bthe issue's\b|target set for", re.I)
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in PAGES
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert not hits, hits
