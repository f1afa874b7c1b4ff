"""The Real words page: a bundled task runs GD and shows weights, margins, the verdict and the
PCA feasibility; typed text with HTML/markdown stays text; bad input is an error box, never
an exception."""
from __future__ import annotations

from conftest import assert_clean, charts, open_page, texts


def _page(**query):
    at = open_page("words.py")
    for k, v in query.items():
        w = at.number_input(key=k) if k in ("words_d", "words_lr") else None
        if w is not None:
            w.set_value(v)
    return at


def test_bundled_task_runs_and_reports_the_verdict():
    at = open_page("words.py")
    at.slider(key="words_n").set_value(8)
    at.selectbox(key="words_steps").set_value(500).run()
    assert_clean(at)
    assert not at.error
    assert {m.label for m in at.metric} >= {"GD's selection is", "selected = key word"}
    verdict = next(m.value for m in at.metric if m.label == "GD's selection is")
    assert verdict in ("global", "local", "feasible", "infeasible")
    assert len(charts(at)) == 5
    assert "words_export" in {b.key for b in at.get("download_button")}


def test_typed_text_is_shown_as_text_and_bad_text_is_refused():
    at = open_page("words.py")
    at.segmented_control(key="words_src").set_value("my own").run()
    at.text_area(key="words_text").set_value(
        "+ the **movie** was <b>great</b> [x](http://e.vil)\n- the zzqqxy food was awful").run()
    assert_clean(at)
    assert not at.error
    assert "zzqqxy" in texts(at)                         # reported, not guessed
    at.text_area(key="words_text").set_value("+ qqzzxq wwxxqz\n- awful").run()
    assert_clean(at)
    assert any("`sentences[0]`" in e.value for e in at.error)
    at.text_area(key="words_text").set_value("+ good \x07 movie").run()
    assert_clean(at)
    assert any("control characters" in e.value for e in at.error)
    at.text_area(key="words_text").set_value("maybe good").run()
    assert any("`text` line 1" in e.value for e in at.error)


def test_hosted_mode_refuses_a_pasted_novel(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("words.py")
    at.segmented_control(key="words_src").set_value("my own").run()
    at.text_area(key="words_text").set_value("+ " + "good " * 10_000).run()
    assert_clean(at)
    assert any("at most" in e.value and "hosted mode" in e.value for e in at.error)
    assert not charts(at)
