"""The Reproduce page on the results store (attsvm.store): stored cards show their chart,
summary, provenance and files with no click and no refusal (hosted mode); cards whose result
is being computed show the server's progress and fill in when it is stored; a damaged entry
is never shown, nor an exception."""

from __future__ import annotations

import fcntl
import json
import logging
import os

import pytest
from conftest import assert_clean, charts, open_page

import attsvm
from attsvm import filler, store
from ui import hosted, results

TINY = {
    "svm-rank": {"pairs": [[5, 5]], "ds": [2, 5], "runs": 5, "max_draws": 60},
    "regularization-path": {"n": 3, "T": 4, "d": 4, "radii": 4, "r_max": 50.0, "restarts": 0},
}


@pytest.fixture
def hosted_store(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTSVM_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv(store.SETTINGS_ENV, json.dumps(TINY))
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    store.fill(list(TINY), say=lambda s: None)
    return tmp_path / "results"


def _card_keys(at):
    return {b.key for b in at.button}


def test_stored_cards_show_chart_summary_and_files_without_a_click(hosted_store):
    at = open_page("reproduce.py")
    assert_clean(at)
    ours = [s.value for s in at.success if s.value.startswith("**Ours:**")]
    assert len(ours) == len(TINY) == len(charts(at))
    for name in TINY:
        text = store.read(name).result.summary["text"]
        assert any(hosted.escape_markdown(text) in o for o in ours), name
        assert f"repro-{name}-run" not in _card_keys(at)  # nothing to click
        assert {f"repro-{name}-dl-{k}" for k in ("csv", "json", "html")} <= {
            b.key for b in at.get("download_button")
        }
    captions = "\n".join(c.value for c in at.caption)
    assert f"Computed by attsvm {attsvm.__version__} on " in captions and "(cpu" in captions
    assert "`python -m attsvm reproduce svm-rank`" in captions
    # no filler here (ATTSVM_FILL=0): the paper's other settings are priced as before
    assert any("local-convergence with these settings" in e.value for e in at.error)
    # a variant of a stored card runs for the visitor, priced as every other run …
    at.number_input(key="repro-regularization-path-radii").set_value(3).run()
    assert "repro-regularization-path-run" in _card_keys(at)
    assert any("priced at" in c.value for c in at.caption)
    # … and one over the visitor's budget is refused as before
    at.number_input(key="repro-svm-rank-runs").set_value(90).run()
    assert_clean(at)
    assert "repro-svm-rank-run" not in _card_keys(at)
    assert any("svm-rank with these settings" in e.value for e in at.error)


def test_a_computing_card_shows_progress_then_its_result(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTSVM_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv(store.SETTINGS_ENV, json.dumps(TINY))
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    monkeypatch.setenv("ATTSVM_FILL", "svm-rank,local-convergence")
    monkeypatch.setattr(results, "start_filler", lambda: None)  # this test is the filler
    path = store.entry_path("svm-rank")
    path.parent.mkdir(parents=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        (path.parent / f"{path.name}.status").write_text(json.dumps({"frac": 0.4, "text": "d=5"}))
        at = open_page("reproduce.py")
        assert_clean(at)
        bars = [p.proto.text for p in at.get("progress")]
        assert any(
            "Computing on the server: the paper's experiment 5 of 8 (40 %, d=5)" in b for b in bars
        ), bars
        infos = "\n".join(i.value for i in at.info)
        assert "Waiting its turn on the server (the paper's experiment 3 of 8" in infos
        assert "it is computing svm-rank now" in infos  # local-convergence waits its turn
        assert not any("local-convergence with these settings" in e.value for e in at.error)
        assert "repro-svm-rank-run" not in _card_keys(at)
        assert any("computing **svm-rank** now" in c.value for c in at.caption)
        with store.lock("svm-rank", tries=1) as mine:
            assert not mine  # the page never takes the lock
        from attsvm import experiments

        store.save(
            experiments.run("svm-rank", store.default_settings("svm-rank")),
            store.default_settings("svm-rank"),
        )
    finally:
        os.close(fd)
    at.run()
    assert_clean(at)
    assert any(s.value.startswith("**Ours:**") for s in at.success)
    assert len(charts(at)) == 1


def test_a_damaged_entry_is_not_shown_and_raises_nothing(hosted_store, caplog):
    csv = store.entry_path("svm-rank") / "cells.csv"
    csv.write_bytes(csv.read_bytes()[:40])  # truncated
    with open(store.entry_path("regularization-path") / "chart.html", "wb") as f:
        f.truncate(100 << 20)  # 100 MB of junk
    with caplog.at_level(logging.WARNING, logger="attsvm.store"):
        at = open_page("reproduce.py")
    assert_clean(at)
    assert not [s for s in at.success if s.value.startswith("**Ours:**")]
    assert "ignoring svm-rank's entry" in caplog.text
    assert "ignoring regularization-path's entry" in caplog.text
    assert "repro-regularization-path-run" in _card_keys(at)  # as without a store
    assert store.fill(list(TINY), say=lambda s: None) == list(TINY)  # the filler's next pass
    at.run()
    assert_clean(at)
    assert len([s for s in at.success if s.value.startswith("**Ours:**")]) == len(TINY)


def test_stored_tables_that_make_no_chart_are_a_warning_not_an_exception(hosted_store, monkeypatch):
    from attsvm_charts import experiments as experiment_charts

    real = experiment_charts.chart

    def chart(res):
        if res.name == "svm-rank":
            raise KeyError("a column the chart expects")
        return real(res)

    monkeypatch.setattr(experiment_charts, "chart", chart)
    at = open_page("reproduce.py")
    assert_clean(at)
    assert any("do not make a chart" in w.value for w in at.warning)
    assert len([s for s in at.success if s.value.startswith("**Ours:**")]) == 2
    assert len(charts(at)) == 1


def test_one_filler_per_server_started_again_only_when_entries_went_missing(monkeypatch):
    started = []

    class Fake:
        def __init__(self, root):
            self.running = True
            started.append(self)

    monkeypatch.setattr(filler, "Filler", Fake)
    clock = [1000.0]
    monkeypatch.setattr(results.time, "monotonic", lambda: clock[0])
    server = results._Server()
    for _ in range(3):  # every session's run: one filler
        server.ensure(lambda: True)
    assert len(started) == 1 and server.running
    started[0].running = False  # it ended
    server.ensure(lambda: True)
    assert len(started) == 1  # not again within RESTART_S
    clock[0] += results.RESTART_S
    server.ensure(lambda: False)  # nothing missing: nothing to do
    assert len(started) == 1
    server.ensure(lambda: True)  # entries went missing: once more
    assert len(started) == 2 and server.running


@pytest.mark.parametrize("filling", [False, True])
def test_the_store_line_polls_only_while_the_store_fills(monkeypatch, filling):
    """Without a filler (ATTSVM_FILL=0 here) nothing can arrive, so the store line is drawn
    once; a polling fragment (every POLL_S) would rerun the page for nothing."""
    from streamlit.testing.v1 import AppTest

    from ui.views import reproduce as view

    polled = []
    monkeypatch.setattr(results, "filling", lambda: filling)
    monkeypatch.setattr(view, "_store_progress", lambda: polled.append(1))

    def script():
        from ui.views import reproduce

        reproduce.store_status()

    at = AppTest.from_function(script).run(timeout=60)
    assert not at.exception
    assert polled == ([1] if filling else [])
    if not filling:
        assert any("the others run when you click their Run button" in c.value for c in at.caption)
