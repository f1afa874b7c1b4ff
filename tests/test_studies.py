"""attsvm.studies and attsvm.live: the pages' computations, tested without Streamlit."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

import attsvm
from attsvm import joint, limits, live, staircase, studies
from attsvm.config import ProblemSpec, TrainSpec, norm_for
from attsvm.ntp import session


def test_norm_for_pairs_each_parameterization_with_its_svm():
    assert norm_for("W") == "fro" and norm_for("KQ") == "nuc"
    assert TrainSpec(param="KQ").norm == "nuc"


def test_train_kwargs_are_options_of_train():
    prob = ProblemSpec(n=2, T=3, d=4).build()
    kw = TrainSpec(param="KQ", m=9).train_kwargs(prob)
    assert kw["m"] == 4 and kw["param"] == "KQ"
    attsvm.train(prob, steps=2, **kw)  # every key is accepted


def test_overparam_fractions_count_each_outcome_per_d():
    res = pd.DataFrame(
        {
            "d": [2, 2, 2, 4],
            "kind": ["global", "local", "feasible", "global"],
            "opt_feasible": [True, None, False, True],
        }
    )
    frac = studies.overparam_fractions(res).set_index(["d", "outcome"])["fraction"]
    g, loc, feas = studies.OVERPARAM_OUTCOMES
    assert frac[(2, g)] == pytest.approx(1 / 3) and frac[(2, loc)] == pytest.approx(2 / 3)
    assert frac[(2, feas)] == pytest.approx(1 / 3) and frac[(4, g)] == 1.0


def test_rank_summary_averages_feasible_instances_only():
    res = pd.DataFrame(
        {
            "n": [2, 2, 2],
            "T": 3,
            "d": [3, 3, 3],
            "seed": [0, 1, 2],
            "feasible": [True, True, False],
            "rank_fro": [2, 2, np.nan],
            "rank_nuc": [1, 2, np.nan],
        }
    )
    agg = studies.rank_summary(res).set_index("norm")
    assert agg.loc["W^mm_* (nuclear)", "rank"] == 1.5
    assert agg.loc["W^mm (Frobenius)", "count"] == 2
    assert agg.loc["W^mm (Frobenius)", "feasible"] == pytest.approx(2 / 3)


def test_rank_cell_matches_direct_solves():
    cell = studies.rank_cell(studies.RankCell(n=2, T=3, d=3, instances=2))
    for _, row in cell.iterrows():
        prob = attsvm.random_problem(2, 3, 3, seed=int(row.seed))
        sol = attsvm.solve_att_svm(prob, norm="nuc")
        assert row.rank_nuc == attsvm.numerical_rank(sol.W)


def test_rank_rows_solve_the_nuclear_svm_for_the_first_quota_feasible_only():
    rows = studies.rank_rows(5, 5, 3, range(8), quota=2)
    used = [r for r in rows if r["used"]]
    assert len(used) == 2 and all(r["feasible"] for r in used)
    first = [r["seed"] for r in rows if r["feasible"]][:2]
    assert [r["seed"] for r in used] == first
    assert all(np.isnan(r["rank_nuc"]) for r in rows if not r["used"])


def test_overparam_cell_classifies_every_run_like_classify_selection():
    base, tspec = ProblemSpec(n=3, T=3, d=3), TrainSpec(steps=50)
    cell = studies.overparam_cell(base, tspec, 3)
    assert len(cell) == 3 and (cell["d"] == 3).all()
    for _, row in cell.iterrows():
        prob = base.with_(seed=int(row.seed)).build()
        assert row.kind == attsvm.classify_selection(prob, np.array(row.selection))


def test_basins_plane_covers_a_grid_of_starts():
    starts = studies.BasinsSettings(runs=9, radius=2.0, plane=True)
    df = studies.basins(ProblemSpec(n=2, T=3, d=2), TrainSpec(steps=20), starts)
    assert len(df) == 9 and sorted(set(df["a"])) == [-1.0, 0.0, 1.0]
    assert df["prob"].between(0, 1).all()


def test_live_work_is_the_gd_price():
    prob = ProblemSpec().build()
    tspec = TrainSpec(steps=500)
    assert live.live_work(prob, tspec) == limits.gd_work(n=6, T=8, d=10, steps=500)
    assert live.live_work(prob, tspec) < live.AUTO_RUN_WORK


# (record, good settings, a setting, a value it refuses)
STUDY_RECORDS = [
    (staircase.StudySettings, dict(init_scale=1e-4, steps=1000, lr=0.5), "steps", 1100),
    (joint.PresetSettings, dict(name="mmts-tight", p=3.0, steps=200), "dtype", "float16"),
    (joint.RandomSettings, dict(n=4, T=3, d=3, runs=2, lr=0.1), "runs", 0),
    (studies.BasinsSettings, dict(runs=9, radius=2.0, plane=True), "runs", 10),
    (studies.RankCell, dict(n=2, T=3, d=3, instances=2), "attention", "both"),
    (studies.RaceSettings, dict(runs=(("md", "md", 1.0, 3.0),), steps=100), "steps", 0),
    (session.Sequences, dict(K=6, d=8, tokens=((0, 1, 2),), labels=(1,)), "tokens", ((0, 1, 9),)),
]


def _numpy_valued(v):
    """`v` as a widget or an array hands it over: numpy scalars, nested tuples of them."""
    if isinstance(v, tuple):
        return tuple(_numpy_valued(x) for x in v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return v
    return np.int64(v) if isinstance(v, int) else np.float64(v)


@pytest.mark.parametrize(
    "cls, good, field, bad", STUDY_RECORDS, ids=[r[0].__name__ for r in STUDY_RECORDS]
)
def test_a_study_record_names_a_bad_setting_and_equal_settings_are_one_cache_key(
    cls, good, field, bad
):
    """Each study's settings record refuses a bad value naming the setting; equal settings,
    given as plain or numpy values, are equal, hash equal and hold the same plain values
    (`st.cache_data` hashes a dataclass by `dataclasses.asdict`)."""
    with pytest.raises(ValueError, match=f"`{field}`"):
        cls(**{**good, field: bad})
    a, b = cls(**good), cls(**{k: _numpy_valued(v) for k, v in good.items()})
    assert a == b and hash(a) == hash(b)
    plain, given = dataclasses.asdict(a), dataclasses.asdict(b)
    assert repr(plain) == repr(given)  # same values of the same types
