"""The results store (attsvm.store): entries written atomically and read back checked, damaged
or foreign files ignored (logged, never read past their size) and recomputed, one writer per
entry across processes, a killed filler leaves no partial entry, and the filler's process runs
at the lowest priority on one core."""

from __future__ import annotations

import fcntl
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import attsvm
from attsvm import experiments, filler, store
from attsvm.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
# shrunken "default" settings (the store keeps what ATTSVM_STORE_SETTINGS says): under a second
TINY = {
    "svm-rank": {"pairs": [[5, 5]], "ds": [2, 5], "runs": 5, "max_draws": 60},
    "regularization-path": {"n": 3, "T": 4, "d": 4, "radii": 4, "r_max": 50.0, "restarts": 0},
}
NAMES = list(TINY)


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTSVM_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv(store.SETTINGS_ENV, json.dumps(TINY))
    return tmp_path / "results"


@pytest.fixture
def filled(root):
    assert store.fill(NAMES, say=lambda s: None) == NAMES
    return root


def test_an_entry_reads_back_as_written(filled):
    res = experiments.run("svm-rank", store.default_settings("svm-rank"))
    e = store.read("svm-rank")
    assert e.path.parent == filled and e.path.name.startswith(f"svm-rank--{attsvm.__version__}--")
    assert e.result.summary == json.loads(json.dumps(res.summary))  # what the CLI writes
    for k, df in res.frames.items():  # the tables as the CLI's CSVs read back
        pd.testing.assert_frame_equal(
            e.result.frames[k], pd.read_csv(io.StringIO(df.to_csv(index=False)))
        )
    assert e.meta["attsvm_version"] == attsvm.__version__ and e.meta["backend"]["platform"]
    assert e.created.startswith(time.strftime("%Y-", time.gmtime()))
    assert {"settings.json", "chart.html", "cells.csv"} <= set(e.files)
    assert store.state("svm-rank").kind == "ready"
    assert store.fill(NAMES, say=lambda s: None) == []  # nothing left to compute


def test_the_key_follows_version_settings_and_sources(root, monkeypatch):
    k = store.key("svm-rank")
    assert store.key("svm-rank", experiments.settings("svm-rank", runs=6)) != k
    monkeypatch.setattr(store, "__version__", "9.9.9")
    assert store.key("svm-rank") != k
    monkeypatch.undo()
    monkeypatch.setenv(store.SETTINGS_ENV, json.dumps(TINY))
    monkeypatch.setattr(store, "_SOURCES", "0" * 64)
    assert store.key("svm-rank") != k


def _rehash(path: Path) -> None:
    """Make the manifest agree with the files as they are now (a consistent foreign entry)."""
    import hashlib

    m = json.loads((path / "manifest.json").read_text())
    for f in m["files"]:
        data = (path / f).read_bytes()
        m["files"][f] = dict(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    (path / "manifest.json").write_text(json.dumps(m))


def _truncate_csv(p):
    f = p / "cells.csv"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _foreign_settings(p):
    f = p / "settings.json"
    meta = json.loads(f.read_text())
    meta["attsvm_version"] = "0.0.1"
    f.write_text(json.dumps(meta))
    _rehash(p)  # even with a matching manifest


def _junk_csv(p):
    with open(p / "cells.csv", "wb") as f:  # 100 MB (sparse: cheap to make)
        f.truncate(100 << 20)


def _junk_manifest(p):
    with open(p / "manifest.json", "wb") as f:
        f.truncate(100 << 20)


def _junk_entry(p):
    import shutil

    shutil.rmtree(p)
    with open(p, "wb") as f:
        f.truncate(100 << 20)


def _garbage_json(p):
    (p / "manifest.json").write_bytes(b"\x00\xff{not json" * 100)


@pytest.mark.parametrize(
    "damage",
    [_truncate_csv, _foreign_settings, _junk_csv, _junk_manifest, _junk_entry, _garbage_json],
    ids=lambda f: f.__name__[1:],
)
def test_a_damaged_entry_is_ignored_logged_and_recomputed(filled, damage, caplog, monkeypatch):
    path = store.entry_path("svm-rank")
    damage(path)
    reads = []
    real = store._read
    monkeypatch.setattr(
        store,
        "_read",
        lambda p, limit, size=None: reads.append(len(out := real(p, limit, size))) or out,
    )
    with caplog.at_level(logging.WARNING, logger="attsvm.store"):
        assert store.load("svm-rank") is None
    assert "ignoring svm-rank's entry" in caplog.text
    assert max(reads, default=0) < 1 << 20  # nothing near the junk's size was read
    assert store.load("regularization-path") is not None  # the other entry stands
    assert store.fill(NAMES, say=lambda s: None) == ["svm-rank"]
    assert store.load("svm-rank") is not None
    assert not [p for p in filled.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def test_a_held_lock_defers_the_entry_to_its_holder(root):
    """Another process computing an entry (holding its lock): fill waits, then takes it
    over if the holder died without writing it."""
    path = store.entry_path("svm-rank")
    path.parent.mkdir(parents=True)
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    (path.parent / f"{path.name}.status").write_text(json.dumps({"frac": 0.45, "text": "d=5"}))
    st = store.state("svm-rank")
    assert (st.kind, st.frac, st.text) == ("computing", 0.45, "d=5")
    threading.Timer(1.0, os.close, [fd]).start()  # the holder ends, no entry
    t0 = time.monotonic()
    assert store.fill(["svm-rank"], say=lambda s: None, wait_s=0.2) == ["svm-rank"]
    assert time.monotonic() - t0 >= 1.0
    assert store.state("svm-rank").kind == "ready"


def test_a_crash_before_the_rename_leaves_no_entry(root, monkeypatch):
    res = experiments.run("svm-rank", store.default_settings("svm-rank"))

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError):
        store.save(res, store.default_settings("svm-rank"))
    monkeypatch.undo()
    assert store.state("svm-rank").kind == "missing" and store.load("svm-rank") is None
    assert not list(root.glob(".tmp-*"))


def test_a_failing_experiment_is_reported_and_the_rest_filled(root, monkeypatch):
    real = experiments.run

    def run(name, *a, **kw):
        if name == "svm-rank":
            raise RuntimeError("solver exploded")
        return real(name, *a, **kw)

    monkeypatch.setattr(experiments, "run", run)
    said = []
    assert store.fill(NAMES, say=said.append) == ["regularization-path"]
    assert "svm-rank: failed (RuntimeError: solver exploded)" in said
    st = store.state("svm-rank")
    assert st.kind == "failed" and "solver exploded" in st.text


def test_killed_filler_leaves_no_partial_entry_and_the_next_completes(root):
    """`python -m attsvm fill` killed (SIGKILL) mid-computation: nothing partial is readable;
    the next run completes the store."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        store.SETTINGS_ENV: json.dumps(
            {**TINY, "svm-rank": {**TINY["svm-rank"], "runs": 400, "max_draws": 4000}}
        ),
    }
    cmd = [sys.executable, "-m", "attsvm", "fill", "svm-rank", "--cpu-devices", "1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(store.SETTINGS_ENV, env[store.SETTINGS_ENV])
        deadline = time.time() + 120
        while store.state("svm-rank").kind != "computing" and time.time() < deadline:
            assert proc.poll() is None, "the filler ended before it was killed"
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert store.state("svm-rank").kind == "missing"  # the lock died with it
        assert store.load("svm-rank") is None
        assert not [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert store.load("svm-rank") is not None
        assert not list(root.glob(".tmp-*"))


def test_the_filler_process_runs_niced_on_one_core_with_one_xla_thread(root, monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    monkeypatch.setenv("ATTSVM_FILL", "svm-rank,no-such")
    argv, env = filler.background_command()
    assert argv[3:] == [
        sys.executable,
        "-m",
        "attsvm",
        "fill",
        "svm-rank",
        "--cpu-devices",
        "1",
        "--quiet",
    ]
    assert env["ATTSVM_MODE"] == "local" and env["JAX_PLATFORMS"] == "cpu"
    assert filler.ONE_THREAD_XLA in env["XLA_FLAGS"] and env["OPENBLAS_NUM_THREADS"] == "1"
    assert env["ATTSVM_RESULTS"] == str(root)
    probe = "import os; print(os.nice(0), len(os.sched_getaffinity(0)))"
    out = subprocess.run(
        [*argv[:4], "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["19", "1"]


def test_fill_settings_switch(monkeypatch):
    for value, want in (
        ("0", ()),
        ("1", store.names()),
        ("svm-rank, geometry-1", ("geometry-1", "svm-rank")),
    ):
        monkeypatch.setenv("ATTSVM_FILL", value)
        assert filler.fill_names() == want
    monkeypatch.setenv(store.SETTINGS_ENV, "[1, 2]")
    with pytest.raises(ValueError, match="ATTSVM_STORE_SETTINGS"):
        store.default_settings("svm-rank")


def test_the_cli_keeps_default_results_in_the_store(root, tmp_path, capsys):
    out = tmp_path / "out"
    tiny = ["--set", "pairs=((5, 5),)", "--set", "ds=(2, 5)", "--set", "max_draws=60"]
    cli = ["reproduce", "svm-rank", *tiny, "--out", str(out), "--quiet", "--no-png"]
    assert main([*cli, "--runs", "4"]) == 0
    assert store.state("svm-rank").kind == "missing"  # not the store's settings
    assert main([*cli, "--runs", "5", "--no-store"]) == 0
    assert store.state("svm-rank").kind == "missing"
    assert main([*cli, "--runs", "5"]) == 0
    e = store.read("svm-rank")
    assert e.files["cells.csv"] == (out / "svm-rank" / "cells.csv").read_bytes()
    assert main(["fill", "svm-rank", "regularization-path", "--store", str(root)]) == 0
    assert "1 of 2 entries computed here" in capsys.readouterr().out
    assert main(["fill", "no-such"]) == 2
    root.rename(tmp_path / "moved")
    root.write_text("not a folder")  # an unwritable store: a note, not a crash
    assert main([*cli, "--runs", "5"]) == 0
    assert "not kept in the results store" in capsys.readouterr().err


def test_an_unwritable_store_stops_the_filler_with_a_message(root):
    root.write_text("not a folder")  # (a read-only folder, for a user other than root)
    said = []
    assert store.fill(NAMES, say=said.append) == []
    assert "cannot write" in said[-1] and store.load("svm-rank") is None


def _proc_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_paused_filler_is_suspended_until_resumed_and_stops_when_asked(root, monkeypatch):
    """`Filler.pause`: SIGSTOP / SIGCONT of the filler process (the server pauses it while a
    visitor's page runs); `stop` ends a suspended filler too."""
    monkeypatch.setenv(
        store.SETTINGS_ENV,
        json.dumps({**TINY, "svm-rank": {**TINY["svm-rank"], "runs": 400, "max_draws": 4000}}),
    )
    monkeypatch.setenv("ATTSVM_FILL", "svm-rank")
    f = filler.Filler(root)
    try:
        assert f.running and f.pid
        f.pause(True)
        deadline = time.time() + 10
        while _proc_state(f.pid) != "T" and time.time() < deadline:
            time.sleep(0.05)
        assert _proc_state(f.pid) == "T"
        f.pause(False)
        time.sleep(0.2)
        assert _proc_state(f.pid) != "T"
        f.pause(True)
    finally:
        f.stop()
    assert not f.running


def test_the_server_pauses_its_filler_while_any_page_runs():
    """ui.results: the filler waits from the first visitor's script run to the end of the
    last one, however they nest."""
    from ui import results

    class Fake:
        calls: list = []
        running = True

        def pause(self, paused):
            self.calls.append(paused)

    srv = results._Server()
    srv.filler = Fake()
    with srv.page():
        with srv.page():
            assert Fake.calls == [True]
        assert Fake.calls == [True]
    assert Fake.calls == [True, False]
    with pytest.raises(RuntimeError), srv.page():
        raise RuntimeError("a page failed")
    assert Fake.calls == [True, False, True, False] and srv.pages == 0
