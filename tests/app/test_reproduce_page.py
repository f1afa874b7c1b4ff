"""The Reproduce page: loads with a card per experiment, Run works, bad settings show st.error."""

from __future__ import annotations

from conftest import assert_clean, charts, open_link, open_page

import attsvm.experiments as experiments


def test_reproduce_page_loads_with_every_card():
    at = open_page("reproduce.py")
    keys = {b.key for b in at.button}
    assert {f"repro-{name}-run" for name in experiments.EXPERIMENTS} <= keys


def test_run_shows_summary_chart_and_downloads():
    at = open_page("reproduce.py")
    at.number_input(key="repro-geometry-1-steps").set_value(100)
    at.button(key="repro-geometry-1-run").click().run()
    assert_clean(at)
    assert any("Ours" in s.value and "paper 0.625" in s.value for s in at.success)
    assert len(charts(at)) >= 1
    at.run()  # a rerun replays the cached result
    assert_clean(at)
    assert any("Ours" in s.value for s in at.success)


def test_bad_setting_is_an_error_box():
    at = open_page("reproduce.py")
    at.text_input(key="repro-multi-token-ds").set_value("(4, 'x')").run()
    assert_clean(at)
    assert any("ds" in e.value for e in at.error)
    # text that overflows Python's parser (a link can carry it) is refused the same way
    for text in ("-" * 5000 + "1", "1" + "+1" * 3000, "(" * 300 + ")" * 300, "4," * 400):
        at.text_input(key="repro-multi-token-ds").set_value(text).run()
        assert_clean(at)
        assert any("`ds` must be a Python literal" in e.value for e in at.error), text[:20]


def test_a_link_restores_a_cards_settings():
    """Settings live in the URL: a copied link restores each card's settings."""
    query = {
        "repro-svm-rank-runs": 7,
        "repro-multi-token-ds": "(4, 6)",
        "repro-svm-rank-style": "published",
    }
    at = open_link("reproduce.py", query)
    assert_clean(at)
    assert not [w for w in at.sidebar.warning if "Ignored link" in w.value]
    assert at.number_input(key="repro-svm-rank-runs").value == 7
    assert at.text_input(key="repro-multi-token-ds").value == "(4, 6)"
    assert at.selectbox(key="repro-svm-rank-style").value == "published"
    # (the browser writes changed values into the URL: tests/e2e/test_links.py)


def test_over_budget_settings_are_refused_before_run_naming_what_to_lower(monkeypatch):
    """Hosted mode: a card whose settings are over budget shows why and no Run button; the
    defaults that fit show their price."""
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("reproduce.py")
    keys = {b.key for b in at.button}
    assert "repro-regularization-path-run" in keys  # the paper's settings fit
    assert any("priced at" in c.value for c in at.caption)
    assert "repro-local-convergence-run" not in keys  # 100 runs × 2000 steps do not
    assert any(
        "local-convergence with these settings" in e.value and "`runs` ≤" in e.value
        for e in at.error
    )
    for k in ("n", "T", "d"):
        at.number_input(key=f"repro-regularization-path-{k}").set_value(32)
    at.run()
    assert_clean(at)
    assert "repro-regularization-path-run" not in {b.key for b in at.button}
    assert any("regularization-path with these settings asks for" in e.value for e in at.error)
