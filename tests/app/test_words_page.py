"""The Real words page: a bundled task runs GD and shows weights, margins, the verdict and the
PCA feasibility; typed text with HTML/markdown stays text; bad input is an error box, never
an exception."""

from __future__ import annotations

from conftest import assert_clean, charts, open_link, texts

SMALL = {"words_n": 8, "words_steps": 500}


def test_bundled_task_runs_and_reports_the_verdict():
    at = open_link("words.py", SMALL)
    assert_clean(at)
    assert not at.error
    assert {m.label for m in at.metric} >= {"GD's selection is", "selected = key word"}
    verdict = next(m.value for m in at.metric if m.label == "GD's selection is")
    assert verdict in ("global", "local", "feasible", "infeasible")
    assert len(charts(at)) == 5
    assert "words_export" in {b.key for b in at.get("download_button")}


def test_typed_text_is_shown_as_text_and_bad_text_is_refused():
    at = open_link("words.py", {**SMALL, "words_src": "my own"})
    assert_clean(at)
    at.text_area(key="words_text").set_value(
        "+ the **movie** was <b>great</b> [x](http://e.vil)\n- the zzqqxy food was awful"
    ).run()
    assert_clean(at)
    assert not at.error
    assert "zzqqxy" in texts(at)  # reported, not guessed
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
    at = open_link("words.py", {**SMALL, "words_src": "my own"})
    at.text_area(key="words_text").set_value("+ " + "good " * 10_000).run()
    assert_clean(at)
    assert any("at most" in e.value and "hosted mode" in e.value for e in at.error)
    assert not charts(at)


def test_hostile_link_values_fall_back_or_show_an_error():
    at = open_link("words.py", {**SMALL, "words_k": 12345, "words_task": "nope"})
    assert_clean(at)
    assert not at.error
    at = open_link("words.py", {**SMALL, "words_query": "word", "words_qword": "<b>zz</b>"})
    assert_clean(at)
    assert any("`query`" in e.value for e in at.error) and not charts(at)


def test_live_view_streams_the_weights():
    at = open_link("words.py", SMALL)
    at.toggle(key="words_live").set_value(True).run()
    assert_clean(at)
    assert any(c.value.startswith("iteration ") for c in at.caption)
    assert len(charts(at)) == 6
