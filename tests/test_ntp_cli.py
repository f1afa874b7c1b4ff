"""`python -m attsvm reproduce ntp-global / ntp-local`: the authors' settings by default,
files next to the paper's numbers, in seconds."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from attsvm import experiments
from attsvm.__main__ import main


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    path = tmp_path_factory.mktemp("ntp")
    for name in ("ntp-global", "ntp-local"):
        assert main(["reproduce", name, "--out", str(path), "--quiet", "--no-png"]) == 0
    return path


def test_global_reproduces_the_mean_correlation(out, capsys):
    inst = pd.read_csv(out / "ntp-global" / "instances.csv")
    assert len(inst) == 10 and inst.feasible.all()
    assert 0.98 < inst.corr_svm.mean() < 0.99  # the authors': 0.98593
    assert (inst.corr_perp >= inst.corr_svm - 1e-9).all()
    assert (inst.loss_final - inst.loss_floor).between(-1e-9, 5e-3).all()
    assert (inst.top_mass > 0.99).all()
    meta = json.loads((out / "ntp-global" / "settings.json").read_text())
    assert meta["settings"]["lr"] == 0.01 and meta["settings"]["steps"] == 4000
    assert meta["seconds"] < 120 and "0.98593" in meta["summary"]["paper"]
    assert "<html" in (out / "ntp-global" / "chart.html").read_text().lower()


def test_local_graph_svm_explains_what_the_global_one_does_not(out):
    inst = pd.read_csv(out / "ntp-local" / "instances.csv")
    low = inst[inst.corr_gmm < 0.95]
    assert len(low) >= 5 and inst.local_feasible.all()
    flat, cyc = low[low.local_cycles == 0], low[low.local_cycles > 0]
    assert (flat.corr_lmm >= 0.99).all()
    # acyclic: GD froze (‖∇L‖ near the normalizer's ε = 2⁻⁵²) at R_l ≈ 36, as 8 of the authors'
    assert (flat.grad_norm < 1e-14).all() and (flat.R_lmm > 25).all()
    # a local cycle: still moving, R_l far behind, the static corr lower, the motion aligned
    assert len(cyc) >= 1 and (cyc.grad_norm > 1e-6).all() and (cyc.R_lmm < 20).all()
    assert (cyc.corr_lmm >= 0.97).all() and (cyc.corr_lmm > cyc.corr_lmm_half).all()
    summary = json.loads((out / "ntp-local" / "settings.json").read_text())["summary"]
    assert summary["local_cycle_instances"] == len(cyc)
    assert summary["ours_min_local_acyclic_where_global_low"] == pytest.approx(flat.corr_lmm.min())
    assert "singleton" in summary["text"] and "(acyclic: R_l" in summary["text"]
    meta = json.loads((out / "ntp-local" / "settings.json").read_text())
    assert meta["settings"]["head"] == "gen" and meta["settings"]["lr"] == 0.1
    assert (out / "ntp-local" / "curves.csv").is_file()


def test_listed_but_not_part_of_reproduce_all(capsys):
    assert main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "ntp-global" in listed and "ntp-local" in listed
    assert "ntp-global" not in experiments.EXPERIMENTS
    assert {"ntp-global", "ntp-local"} <= set(experiments.FOLLOWUPS)


def test_bad_settings_are_refused_by_name(tmp_path, capsys):
    assert main(["reproduce", "ntp-global", "--set", "loss=ce", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "ntp-local", "--set", "T=9", "--out", str(tmp_path)]) == 2
    assert (
        main(
            ["reproduce", "ntp-global", "--set", "fixtures='/nonexistent'", "--out", str(tmp_path)]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "`loss` must be one of" in err and "`T` must be" in err and "`fixtures` must" in err


def test_reproduce_followups_runs_every_follow_up(tmp_path, capsys):
    """`reproduce followups` runs the follow-up papers' experiments (and only those); a
    `--set` key applies where it is a setting (`instances`: the NTP experiments)."""
    assert (
        main(
            [
                "reproduce",
                "followups",
                "--steps",
                "500",
                "--runs",
                "1",
                "--set",
                "instances=1",
                "--set",
                "sentences=2",
                "--set",
                "heads=(2,)",
                "--out",
                str(tmp_path),
                "--quiet",
                "--no-chart",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(experiments.FOLLOWUPS)
    for name in experiments.FOLLOWUPS:
        meta = json.loads((tmp_path / name / "settings.json").read_text())
        assert meta["settings"].get("steps", 500) == 500 and f"{name} (" in out
    assert (
        json.loads((tmp_path / "ntp-local" / "settings.json").read_text())["settings"]["instances"]
        == 1
    )
    assert f"all {len(experiments.FOLLOWUPS)} experiments" in out
