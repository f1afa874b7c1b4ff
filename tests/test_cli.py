"""`python -m attsvm`: the files each experiment writes, `reproduce all`, and errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import attsvm
from attsvm import __main__ as cli
from attsvm import runtime
from attsvm.__main__ import main
from attsvm.experiments import core

ROOT = Path(__file__).resolve().parents[1]
SMALL = [
    "--runs",
    "3",
    "--steps",
    "200",
    "--set",
    "ds=(4,)",
    "--set",
    "record_every=50",
    "--set",
    "radii=3",
    "--set",
    "r_max=20.0",
    "--set",
    "restarts=0",
    "--set",
    "pairs=((5, 5),)",
    "--set",
    "max_seeds=512",
    "--set",
    "max_draws=30",
]


@pytest.fixture(autouse=True)
def _helpers_restored(monkeypatch):
    """`main` enables helper processes for the process it runs in (the CLI's); these tests
    run it in pytest's, so each test gets the setting back."""
    monkeypatch.setattr(core, "HELPERS", core.HELPERS)


def test_cpu_devices_also_sets_the_helper_processes(monkeypatch):
    """--cpu-devices n: n JAX devices and n − 1 helper processes for svm-rank's cells,
    started at once; the app's background filler runs `fill --cpu-devices 1`, so it starts
    none (its SIGSTOP then reaches all of its work: docs/hosting.md)."""
    for name in ("use_cpu_cores", "use_compile_cache", "use_fast_compile", "keep_freed_memory"):
        monkeypatch.setattr(runtime, name, lambda *a: False)
    started = []
    monkeypatch.setattr(core, "_helpers", lambda: started.append(core.HELPERS))
    cases = ((1, 0), (3, 2), (None, (os.cpu_count() or 1) - 1))
    for n, helpers in cases:
        cli.use_cpu_cores(n)
        assert core.HELPERS == helpers
    assert started == [h for _, h in cases if h]
    cli.use_cpu_cores(3, helpers=False)
    assert core.HELPERS == 0 and started == [h for _, h in cases if h]


def test_helpers_are_started_only_for_experiments_they_pay_for():
    """`reproduce` starts helper processes (≈ 3 s of import each) only when one of its
    experiments shares work with them (svm-rank, over-parameterization, pretrained-heads);
    `fill` always."""
    from argparse import Namespace as Args

    helped = {
        name: cli._helped(Args(command="reproduce", name=name))
        for name in (
            "all",
            "svm-rank",
            "overparameterization",
            "multi-token",
            "followups",
            "no-such-experiment",
        )
    }
    assert helped == {
        "all": True,
        "svm-rank": True,
        "overparameterization": True,
        "multi-token": False,
        "followups": True,  # pretrained-heads
        "no-such-experiment": False,
    }
    assert cli._helped(Args(command="fill"))


def test_reproduce_one_writes_data_settings_and_chart(tmp_path, capsys):
    assert (
        main(["reproduce", "geometry-1", "--steps", "100", "--out", str(tmp_path), "--quiet"]) == 0
    )
    out = tmp_path / "geometry-1"
    for f in (
        "paths.csv",
        "tokens.csv",
        "rays.csv",
        "correlation.csv",
        "svm.csv",
        "settings.json",
        "chart.html",
    ):
        assert (out / f).is_file(), f
    meta = json.loads((out / "settings.json").read_text())
    assert meta["attsvm_version"] == attsvm.__version__
    assert meta["settings"]["steps"] == 100 and meta["summary"]["paper"]
    assert len(pd.read_csv(out / "paths.csv")) == 2 * 2 * 101  # 2 params × 2 queries
    assert "<html" in (out / "chart.html").read_text().lower()
    line = capsys.readouterr().out
    assert "geometry-1" in line and "paper" in line


def test_reproduce_all_writes_every_experiment(tmp_path, capsys):
    assert main(["reproduce", "all", "--out", str(tmp_path), "--quiet", "--no-png", *SMALL]) == 0
    for name in attsvm.experiments.EXPERIMENTS:
        assert (tmp_path / name / "settings.json").is_file(), name
        assert (tmp_path / name / "chart.html").is_file(), name
    printed = capsys.readouterr().out
    assert f"all {len(attsvm.experiments.EXPERIMENTS)} experiments" in printed
    assert "svm-rank" in printed and "note:" in printed  # where the authors' code is wrong


def test_bad_input_is_an_error_message_not_a_traceback(tmp_path, capsys):
    assert main(["reproduce", "no-such", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "svm-rank", "--set", "style=pretty", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "svm-rank", "--set", "colour=red", "--out", str(tmp_path)]) == 2
    deep = "ds=" + "-" * 5000 + "1"  # nested past Python's parser
    assert main(["reproduce", "svm-rank", "--set", deep, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "error: `NAME` must be one of" in err and "`style` must be one of" in err
    assert "colour" in err and "`ds` must be" in err


def test_module_entry_point_lists_experiments():
    out = subprocess.run(
        [sys.executable, "-m", "attsvm", "list"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0 and "multi-token" in out.stdout


def _reproduce(out: Path, **env_changes) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_changes)
    env = {k: v for k, v in env.items() if v is not None}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "attsvm",
            "reproduce",
            "geometry-1",
            "--no-chart",
            "--no-store",
            "--quiet",
            "--steps",
            "300",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def _entries(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith("-cache"))


def test_the_cli_keeps_compiled_programs_for_the_next_command(tmp_path):
    """The first command fills the compilation cache (default: the user cache folder), the
    second finds every program there (no new entry) and writes the same files, byte for
    byte; ATTSVM_XLA_CACHE=off keeps none."""
    home = dict(ATTSVM_XLA_CACHE=None, XDG_CACHE_HOME=str(tmp_path / "home"))
    first = _reproduce(tmp_path / "a", **home)
    (cache,) = (tmp_path / "home" / "attsvm" / "xla").iterdir()  # one CPU's folder
    assert first.returncode == 0, first.stderr[-2000:]
    entries = _entries(cache)
    assert any(e.startswith("jit_simulate") for e in entries)
    second = _reproduce(tmp_path / "b", **home)
    assert second.returncode == 0, second.stderr[-2000:]
    assert _entries(cache) == entries
    for f in (tmp_path / "a" / "geometry-1").iterdir():
        if f.suffix == ".csv":
            assert f.read_bytes() == (tmp_path / "b" / "geometry-1" / f.name).read_bytes(), f
    off = _reproduce(tmp_path / "c", ATTSVM_XLA_CACHE="off", XDG_CACHE_HOME=str(tmp_path / "h2"))
    assert off.returncode == 0, off.stderr[-2000:]
    assert not (tmp_path / "h2").exists()
