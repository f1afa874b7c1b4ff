"""The experiments layer: exact bulk SVMs against the library's Clarabel solutions, every
experiment at a tiny size, settings validation, and identical numbers on 1 and 4 devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import attsvm
from attsvm import experiments, fastsvm, studies
from attsvm.experiments import core, multi_token

ROOT = Path(__file__).resolve().parents[1]


# -- bulk SVMs against Clarabel ---------------------------------------------------------------
def _instances():
    rng = np.random.default_rng(0)
    out = []
    for n, T, d in [(6, 8, 10), (5, 5, 2), (5, 5, 3), (10, 5, 4), (2, 3, 2)]:
        for seed in range(4):
            p = attsvm.random_problem(n, T, d, seed=seed)
            alpha = attsvm.token_scores(p).argmax(-1) if seed % 2 else rng.integers(0, T, n)
            out.append((p, alpha))
    return out


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_bulk_svm_matches_clarabel(norm):
    probs, alphas = zip(*_instances(), strict=True)
    ours = fastsvm.solve_many(list(probs), list(alphas), norm)
    for k, (p, a) in enumerate(zip(probs, alphas, strict=True)):
        ref = attsvm.solve_att_svm(p, a, norm)
        assert ours["feasible"][k] == ref.feasible, (k, ref.status)
        if not ref.feasible:
            continue
        assert ours["objective"][k] == pytest.approx(ref.objective, rel=2e-6)
        assert attsvm.numerical_rank(ours["W"][k]) == attsvm.numerical_rank(ref.W)
        if norm == "fro":  # unique solution: the matrices agree
            np.testing.assert_allclose(ours["W"][k], ref.W, rtol=0, atol=1e-6 * np.abs(ref.W).max())
            np.testing.assert_array_equal(ours["support"][k], ref.support)


def test_the_barriers_rank_one_hessian_is_the_dense_one(monkeypatch):
    """Att-SVM constraints are rank one, G_j = u_j w_jᵀ: `_rank_one` recovers the factors
    (and refuses a full-rank G), the Newton step from `_hessian_rank_one` equals the dense
    one to rounding, and the nuclear solutions of a batch of real instances agree."""
    rng = np.random.default_rng(3)
    P, m, a, b = 5, 9, 6, 4
    G = rng.standard_normal((P, m, a))[..., :, None] * rng.standard_normal((P, m, b))[..., None, :]
    assert fastsvm._rank_one(rng.standard_normal((P, m, a, b))) is None
    fac = fastsvm._rank_one(G)
    lam, t = rng.uniform(0.01, 0.05, (P, m)), np.full(P, 3.0)
    Gt = np.ascontiguousarray(np.swapaxes(G, 2, 3)).reshape(P, m * b, a)
    GfT = np.ascontiguousarray(np.swapaxes(G.reshape(P, m, a * b), 1, 2))
    g_dense, s_dense = fastsvm._newton_step(t, G, Gt, GfT, lam)
    g_one, s_one = fastsvm._newton_step(t, G, Gt, GfT, lam, fac)
    np.testing.assert_array_equal(g_one, g_dense)
    np.testing.assert_allclose(s_one, s_dense, rtol=0, atol=1e-12 * np.abs(s_dense).max())
    probs, alphas = zip(*_instances(), strict=True)
    out = {}
    rank_one = fastsvm._rank_one
    for flag in (False, True):  # False: the dense Hessian, as for general constraints
        monkeypatch.setattr(fastsvm, "_rank_one", rank_one if flag else lambda G: None)
        out[flag] = fastsvm.solve_many(list(probs), list(alphas), "nuc")
    np.testing.assert_array_equal(out[True]["feasible"], out[False]["feasible"])
    np.testing.assert_allclose(out[True]["objective"], out[False]["objective"], rtol=1e-6)


def test_the_barriers_line_search_matches_a_plain_loop_and_keeps_its_point():
    """`_backtrack` on a batch (each halving evaluates only the problems still searching, the
    point at λ kept) against the Armijo search written plainly, one problem at a time with
    φ_t computed from λ; and the point it returns is `_point` at the new λ, bit for bit."""
    rng = np.random.default_rng(5)
    P, m, a, b = 6, 7, 5, 4
    G = rng.standard_normal((P, m, a))[..., :, None] * rng.standard_normal((P, m, b))[..., None, :]
    lam = rng.uniform(0.005, 0.02, (P, m))
    t = rng.uniform(1.0, 50.0, P)
    # steps of every size: some accepted at once, some after a few halvings, one uphill
    step = rng.standard_normal((P, m)) * np.array([0.001, 0.01, 0.05, 0.2, 1.0, 0.01])[:, None]
    step[-1] = lam[-1]  # grows every λ_j: φ_t rises (t large) until s is tiny
    t[-1] = 1e6
    slope = -np.abs(rng.uniform(0.1, 1.0, P))

    def phi(k, x):
        N = np.tensordot(x, G[k], axes=(0, 0))
        ev = np.linalg.eigvalsh(np.eye(b) - N.T @ N)
        if np.any(ev <= 0) or np.any(x <= 0):
            return np.inf
        return -t[k] * x.sum() - np.log(x).sum() - np.log(ev).sum()

    cur = fastsvm._point(G, lam)
    new, point = fastsvm._backtrack(t, G, lam.copy(), step, slope, fastsvm._rows(cur, np.arange(P)))
    halvings = []
    for k in range(P):
        neg = step[k] < 0
        s = min(1.0, 0.99 * (np.min(-lam[k][neg] / step[k][neg]) if neg.any() else np.inf))
        f0, want = phi(k, lam[k]), lam[k]
        for h in range(40):  # noqa: B007  (h, read after the loop, counts the halvings)
            x = lam[k] + s * step[k]
            if phi(k, x) <= f0 + 0.01 * s * slope[k] + 1e-12 * (abs(f0) + 1.0):
                want = x
                break
            s *= 0.5
        halvings.append(h)
        np.testing.assert_allclose(new[k], want, rtol=1e-14, atol=0)
    assert min(halvings) == 0 and max(halvings) >= 30 and len(set(halvings)) > 3, halvings
    again = fastsvm._point(G, new)
    for got, ref in zip(point[:2] + point[2], again[:2] + again[2], strict=True):
        np.testing.assert_array_equal(got, ref)


def test_bulk_svm_sequence_mode_matches_clarabel():
    for mode in ("sequence", "causal"):
        p = attsvm.random_problem(2, 4, 8, seed=1, attention="self", queries=mode)
        alpha = attsvm.optimal_tokens(p)
        ours = fastsvm.solve_many([p], [alpha], "fro")
        ref = attsvm.solve_att_svm(p, alpha, "fro")
        np.testing.assert_allclose(ours["W"][0], ref.W, atol=1e-6 * np.abs(ref.W).max())


def test_ldp_closed_form_n1_T2():
    # docs/theory.md §6 fact 2: W^mm = (x1 − x2) zᵀ / (‖x1 − x2‖² ‖z‖²)
    X = np.array([[[1.0, 0.5, 0.0], [0.2, -0.3, 0.4]]])
    z = np.array([[0.3, -1.0, 0.2]])
    p = attsvm.Problem(X=X, Y=np.ones(1), Z=z, v=np.array([1.0, 0.0, 0.0]))
    W = fastsvm.solve_many([p], [np.array([0])], "fro")["W"][0]
    dx = X[0, 0] - X[0, 1]
    np.testing.assert_allclose(W, np.outer(dx, z[0]) / (dx @ dx * (z[0] @ z[0])), atol=1e-12)


def test_generalized_svm_matches_library():
    p = attsvm.random_problem(3, 4, 6, seed=7, head="relu")
    run = attsvm.train(p, steps=1500, record_every=1500)
    W, s = run.W[-1], run.probs[-1]
    ours = multi_token.generalized_svm(p, W, s, 1e-3)
    ref = attsvm.solve_generalized_svm(p, W, threshold=1e-3)
    assert ours is not None and ref.feasible
    for a, b in zip(ours, (ref.W_dir, ref.W_fin, ref.W_pred), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6 * max(1.0, np.abs(b).max()))


# -- every experiment at a tiny size ----------------------------------------------------------
# -- one contract over every experiment (its record: `experiments.record`) ----------------
class _Tiny(dict):
    """Each experiment run once at its record's shrunken size, on first use."""

    def __missing__(self, name):
        self[name] = experiments.run(name, **experiments.record(name).tiny)
        return self[name]


@pytest.fixture(scope="module")
def tiny_results():
    return _Tiny()


def _an_int_setting(rec) -> str:
    """A setting of the record's that takes a positive integer (its tiny run sets it)."""
    return next(k for k, v in rec.tiny.items() if isinstance(v, int) and not isinstance(v, bool))


@pytest.mark.parametrize("name", list(experiments.REGISTRY))
def test_every_experiment_keeps_the_contract(tiny_results, name):
    """Tiny run (frames, summary, paper statistic, JSON-ready), price (positive, with the
    sizes the caps read), bad settings refused by name, and its chart builds."""
    from attsvm_charts.experiments import chart

    rec = experiments.record(name)
    assert name in experiments.EXPERIMENTS + experiments.FOLLOWUPS
    assert (name in experiments.FOLLOWUPS) == rec.followup and rec.title and rec.paper
    res = tiny_results[name]
    assert res.name == name and res.seconds > 0
    assert res.summary["text"] and res.summary["paper"] == rec.paper
    assert all(len(df) > 0 for df in res.frames.values()), {
        k: len(v) for k, v in res.frames.items()
    }
    json.dumps(core.jsonable(dict(settings=res.settings, summary=res.summary)))
    s = experiments.settings(name, **rec.tiny)
    price = experiments.price(name, s)
    assert price.work > 0 and price.seconds > 0 and price.sizes
    assert experiments.price(name).work > 0  # the defaults price too
    with pytest.raises(ValueError, match="bogus"):
        experiments.settings(name, bogus=1)
    field = _an_int_setting(rec)
    with pytest.raises(ValueError, match=field):
        experiments.run(name, **{**rec.tiny, field: -1})
    assert chart(res).to_dict()


def test_lp_mirror_descent_tiny(tiny_results):
    res = tiny_results["lp-mirror-descent"]
    by_p, runs = res.frames["by_p"], res.frames["runs"]
    assert list(by_p.p) == [1.5, 3.0] and len(runs) == 4
    assert set(res.frames["correlations"].p_svm) == {1.5, 3.0}
    assert by_p.share_opt.between(0, 1).all()
    # even this short run is closer to its own SVM than to the other p's
    assert runs.own_highest.all(), runs
    assert "2410.14581" in res.summary["text"]
    json.dumps(experiments.core.jsonable(res.summary))
    # steepest descent: one row per (instance, rule, norm), the open cells said to be open
    st, tab = res.frames["steepest"], res.frames["steepest_table"]
    assert len(st) == 2 * 3 * 3 and set(tab.norm) == {"fro", "max", "spectral"}
    assert st.margin_ratio.dropna().between(0, 1 + 1e-6).all()
    assert "open for attention" in res.summary["text"] and "2502.04664" in res.summary["text"]
    ok = st.dropna()
    assert (ok["corr"] <= 1 + 1e-12).all() and len(ok) > 0


def test_adaptive_steps_tiny_ngd_and_polyak_beat_gd(tiny_results):
    res = tiny_results["adaptive-steps"]
    t = res.frames["table"].set_index("optimizer")
    assert t.loc["ngd", "reached_0.99"] == 1.0 and t.loc["polyak", "reached_0.99"] == 1.0
    assert t.loc["gd", "reached_0.99"] == 0.0  # GD: logarithmic rate
    assert t.loc["polyak", "off_mass_at"] < t.loc["gd", "off_mass_at"]
    assert "GD/NGD ≥" in res.summary["text"] and "2402.05738" in res.summary["text"]
    assert {r["optimizer"] for r in res.summary["ratios"]} == {"ngd", "polyak"}


def test_local_convergence_statistics_are_sane(tiny_results):
    res = tiny_results["local-convergence"]
    c = res.frames["curves"]
    soft = c[c.measure == "softmax"]
    assert soft["mean"].between(0, 1).all()
    assert set(c.measure) == {"softmax", "corr_fro", "corr_nuc"}
    last = c[(c.step == 200) & (c.measure != "softmax")]
    assert (last["mean"] > 0.5).all()  # GD is heading for its SVM already
    runs = res.frames["runs"]
    assert runs.feasible_fro.all() and len(runs) == 8


def test_geometry_1_reproduces_the_papers_svms(tiny_results):
    svm = tiny_results["geometry-1"].frames["svm"]
    np.testing.assert_allclose(svm.ours, svm.paper, atol=2e-4)  # docs/theory.md §6 fact 6
    corr = tiny_results["geometry-1"].frames["correlation"]
    at100 = corr[(corr.param == "W") & (corr.svm == "fro") & (corr.step == 100)]["corr"].iloc[0]
    assert at100 == pytest.approx(0.625, abs=1e-3)


def test_svm_rank_reports_infeasible_instances_separately(tiny_results):
    cells = tiny_results["svm-rank"].frames["cells"]
    d2 = cells[(cells.d == 2) & (cells.norm == "fro")].iloc[0]
    assert d2.drawn > d2.feasible  # n=5, d=2: most instances infeasible
    assert d2.instances == min(5, d2.feasible)
    fro5 = cells[(cells.d == 5) & (cells.norm == "fro")].iloc[0]
    assert fro5.mean_rank == 5  # rank W^mm = min(n, d)


def test_svm_rank_published_style_counts_infeasible_as_rank_one():
    res = experiments.run("svm-rank", pairs=((3, 3),), ds=(1,), runs=3, style="published")
    cells = res.frames["cells"]
    assert (cells.mean_rank == 1).all() and (cells.feasible == 0).all()


def test_overparameterization_classification():
    p = attsvm.random_problem(3, 3, 4, seed=2)
    opt = attsvm.optimal_tokens(p)
    other = (opt + 1) % 3
    rows = studies.classify_runs([p, p], [opt, other])  # the experiment's and the page's
    assert rows[0]["is_global"] and rows[0]["local"]
    assert not rows[1]["is_global"]
    assert rows[1]["local"] == attsvm.is_locally_optimal(p, other)


def test_multi_token_counts_add_up(tiny_results):
    cnt = tiny_results["multi-token"].frames["counts"].iloc[0]
    rejected = cnt.all_plus + cnt.ambiguous + cnt.nothing_masked + cnt.infeasible
    assert cnt.accepted <= 2 and cnt.accepted + rejected <= cnt.seeds_tried


@pytest.mark.parametrize(
    "name,bad,word",
    [
        ("local-convergence", dict(runs=0), "runs"),
        ("local-convergence", dict(params=("W", "X")), "params"),
        ("multi-token", dict(ds=()), "ds"),
        ("svm-rank", dict(style="pretty"), "style"),
        ("svm-rank", dict(pairs=((5, 1),)), "pairs"),
        ("overparameterization", dict(steps=-1), "steps"),
        ("geometry-1", dict(preset="geometry-2"), "preset"),
        ("sequence-causal", dict(modes=("both",)), "modes"),
        ("regularization-path", dict(bogus=1), "bogus"),
    ],
)
def test_bad_settings_are_refused_by_name(name, bad, word):
    with pytest.raises(ValueError, match=word):
        experiments.settings(name, **bad)


def test_unknown_experiment_is_refused():
    with pytest.raises(ValueError, match="name"):
        experiments.run("no-such-figure")


def test_hosted_budget_refuses_the_full_multi_token_sweep(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    with pytest.raises(ValueError, match="of compute .at most 3 s. per action in hosted mode"):
        experiments.run("multi-token")


# -- devices ------------------------------------------------------------------------------------
SCRIPT = """
import json, numpy as np, jax, attsvm
from attsvm import experiments
from attsvm.experiments import core
probs = [attsvm.random_problem(4, 5, 6, seed=s) for s in range(7)]
parts = list(core.sweep(probs, param="KQ", steps=300, record_every=100, chunk=2))
W = np.concatenate([t.W for _, t in parts])
res = experiments.run("local-convergence", runs=5, steps=300, record_every=100)
print(json.dumps(dict(devices=len(jax.devices()), W=W.tolist(),
                      curves=res.frames["curves"]["mean"].tolist(),
                      alpha=res.frames["runs"]["alpha"].tolist())))
"""


def _run_with_devices(n: int) -> dict:
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={n}",
        ATTSVM_CHUNK="2",
        PYTHONPATH=str(ROOT),
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_sweeps_give_identical_numbers_on_1_and_4_devices():
    one, four = _run_with_devices(1), _run_with_devices(4)
    assert (one["devices"], four["devices"]) == (1, 4)
    assert one["W"] == four["W"]  # bit for bit
    assert one["curves"] == four["curves"]
    assert one["alpha"] == four["alpha"]


def test_a_stream_reads_its_chunks_as_devices_free_up_and_a_run_ignores_its_neighbours():
    """`core.stream` on an endless stream of chunks: a consumer that stops after three has
    read at most D + 1 more (D devices), and each run is bit for bit what it is in other
    company (other neighbours, another place in its chunk, a padded chunk): multi-token's
    chunk boundaries move with its all-+1 seeds and must not move its numbers."""
    import itertools

    import jax

    kw = dict(param="W", steps=60, lr=0.1, record_every=20, centred=False, eps=2.0**-52)
    read = []

    def chunks():
        for k in itertools.count():
            read.append(k)
            seeds = list(range(1 + 3 * k, 4 + 3 * k))  # 3 new seeds a chunk
            ps = [attsvm.random_problem(3, 4, 5, seed=x, head="relu") for x in seeds]
            yield seeds, ps, seeds

    got = {}
    for seeds, tr in core.stream(chunks(), 4, **kw):
        got.update({x: (tr.W[b], tr.probs[b]) for b, x in enumerate(seeds)})
        if len(got) == 9:
            break
    assert len(read) <= 3 + len(jax.devices()) + 1
    # seeds 2 … 9 four to a chunk (the stream had three and a repeated pad in each)
    ps = [attsvm.random_problem(3, 4, 5, seed=x, head="relu") for x in range(2, 10)]
    for idx, tr in core.sweep(ps, indices=list(range(2, 10)), chunk=4, **kw):
        for b, k in enumerate(idx):
            W, s = got[k + 2]
            np.testing.assert_array_equal(tr.W[b], W)
            np.testing.assert_array_equal(tr.probs[b], s)


def test_multi_token_classifies_a_chunk_as_the_authors_loop_does_one_run():
    """`multi_token._classify` on a chunk of final softmaxes: per run, the notebook's rules in
    order (an entry in (mask, select] → ambiguous; else no entry ≤ mask → nothing masked;
    else ok), written here as a plain loop over entries; values placed on the thresholds."""
    rng = np.random.default_rng(3)
    select, mask = 1e-3, 1e-6
    levels = np.array([0.0, 1e-9, mask, 2e-6, 5e-4, select, 0.2, 0.9])
    S = levels[rng.integers(0, len(levels), (400, 3, 4))]
    S[:100] = levels[rng.integers(3, len(levels), (100, 3, 4))]  # nothing ≤ mask …
    S[:50] = levels[rng.integers(6, len(levels), (50, 3, 4))]  # … nor ambiguous
    kinds = multi_token._classify(S, select, mask)

    def one(s):
        amb = masked = False
        for x in s.ravel():
            amb |= mask < x <= select
            masked |= x <= mask
        return "ambiguous" if amb else "ok" if masked else "nothing_masked"

    assert list(kinds) == [one(s) for s in S]
    assert set(kinds) == {"ambiguous", "ok", "nothing_masked"}


def test_svm_rank_cells_in_a_helper_process_give_the_same_rows(monkeypatch):
    """`core.ordered_map` with a spawned helper process (as the CLI runs svm-rank): the
    helper takes cells from the back, this process from the front, and the instance rows
    come back in cell order, identical to computing every cell here."""
    kw = dict(pairs=((5, 5), (5, 10)), ds=(2, 3, 10), runs=8, max_draws=80)
    here = experiments.run("svm-rank", **kw)
    monkeypatch.setattr(core, "HELPERS", 1)
    for up in core._helpers()[1]:  # the helper's import done: it takes cells at once
        up.result()
    seen = []
    shared = experiments.run("svm-rank", progress=lambda f, t: seen.append(t), **kw)
    for key in ("instances", "cells"):
        pd.testing.assert_frame_equal(shared.frames[key], here.frames[key])
    assert any(t.startswith("cells 6/6") for t in seen)


def test_regularization_paths_in_a_helper_process_give_the_same_rows(monkeypatch):
    """The K Qᵀ path in a spawned helper (it takes the last item) while this process runs
    the W path: each path reads its own stretch of the restarts' random stream, so the rows
    are identical to the paths computed one after the other here."""
    kw = dict(n=3, T=4, d=4, radii=5, r_max=50.0, restarts=1)
    here = experiments.run("regularization-path", **kw).frames["path"]
    monkeypatch.setattr(core, "HELPERS", 1)
    for up in core._helpers()[1]:
        up.result()
    shared = experiments.run("regularization-path", **kw).frames["path"]
    pd.testing.assert_frame_equal(shared, here)
    assert set(here.param) == {"W", "KQ"}


def test_a_regularization_path_skips_exactly_the_normals_the_paths_before_it_draw(monkeypatch):
    """`_draws` counts the standard normals a path draws for its starts, so the K Qᵀ path,
    started `_draws(W)` normals into the stream, reads what one loop over both paths read."""
    from attsvm.experiments import regularization_path as rp

    made, real = [], np.random.default_rng

    class Counting:
        def __init__(self, seed):
            self.g, self.n = real(seed), 0
            made.append(self)

        def standard_normal(self, size):
            self.n += int(np.prod(size))
            return self.g.standard_normal(size)

    s = rp.Settings(n=3, T=4, d=4, radii=5, r_max=50.0, restarts=2)
    prob = attsvm.random_problem(3, 4, 4, seed=0)
    monkeypatch.setattr(rp.np.random, "default_rng", Counting)
    W = np.eye(4)
    for param, skip in (("W", 0), ("KQ", 7)):
        rp._path(s, prob, param, skip, W, None)
        assert made[-1].n == skip + rp._draws(s, param)


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_overparameterization_svms_in_a_helper_process_give_the_same_runs(monkeypatch, param):
    """Over-parameterization's SVMs in blocks of `BLOCK` runs shared with a helper process
    (the CLI's way): every run judged as in one process and in one block (40 runs < the
    default 64), Frobenius for W, nuclear for K Qᵀ."""
    from attsvm.experiments import overparameterization as op

    kw = dict(ds=(2, 4), runs=40, steps=200, param=param)
    here = experiments.run("overparameterization", **kw)
    monkeypatch.setattr(op, "BLOCK", 16)
    monkeypatch.setattr(core, "HELPERS", 1)
    for up in core._helpers()[1]:
        up.result()
    shared = experiments.run("overparameterization", **kw)
    for key in ("runs", "fractions"):
        pd.testing.assert_frame_equal(shared.frames[key], here.frames[key])


def test_regularization_paths_logsumexp_is_scipys_bit_for_bit():
    """`regularization_path.logsumexp` against scipy.special.logsumexp itself: ties at the
    maximum, −inf entries, all −inf rows, huge and tiny values, every axis form."""
    from scipy.special import logsumexp as scipy_lse

    from attsvm.experiments.regularization_path import logsumexp

    rng = np.random.default_rng(0)
    a = rng.standard_normal((50, 7)) * rng.choice([1e-3, 1.0, 30.0, 800.0], (50, 1))
    a[3, :2] = a[3, 2]  # ties at the maximum
    a[5, 1:] = -np.inf  # one finite entry
    a[6, :] = -np.inf  # nothing
    a[7, 4] = -np.inf
    for kw in (dict(axis=1), dict(axis=1, keepdims=True), dict(axis=0), dict()):
        ours, ref = logsumexp(a, **kw), scipy_lse(a, **kw)
        assert np.shape(ours) == np.shape(ref)
        np.testing.assert_array_equal(ours, ref)
    assert logsumexp(a[0]) == scipy_lse(a[0]) and isinstance(logsumexp(a[0]), float)


def test_ordered_map_finishes_here_when_a_helper_dies(monkeypatch):
    """A helper that dies (killed, out of memory) costs no result: `ordered_map` drops the
    broken pool and computes what was left in this process, in item order."""
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    class DyingPool:
        """Runs the first item it is given, then breaks as a dead worker's pool does."""

        def __init__(self):
            self.calls = 0

        def submit(self, fn, *args):
            self.calls += 1
            fut = Future()
            if self.calls > 1:
                raise BrokenProcessPool("a worker died")
            fut.set_result(fn(*args))
            return fut

    pool = DyingPool()
    monkeypatch.setattr(core, "HELPERS", 1)
    monkeypatch.setattr(core, "_helpers", lambda: (pool, []))  # its workers up
    items = [(k, k + 1) for k in range(7)]
    assert core.ordered_map(pow, items) == [pow(a, b) for a, b in items]
    assert pool.calls == 2


def test_ordered_map_does_not_wait_for_helpers_still_starting(monkeypatch):
    """Helpers whose workers are not up yet (importing attsvm, ≈ 3 s after the CLI starts)
    get no item: this process computes them all rather than wait."""
    from concurrent.futures import Future

    class StartingPool:
        def submit(self, fn, *args):
            raise AssertionError("an item went to a helper that was not up")

    monkeypatch.setattr(core, "HELPERS", 1)
    monkeypatch.setattr(core, "_helpers", lambda: (StartingPool(), [Future()]))
    items = [(k, 2) for k in range(5)]
    assert core.ordered_map(pow, items) == [k * k for k in range(5)]


def test_stopped_helpers_are_gone_and_a_later_map_starts_new_ones(monkeypatch):
    """`stop_helper_processes` (the CLI, after its command) ends the helper processes at
    once; `ordered_map` afterwards starts a fresh pool and gives the same answers."""
    monkeypatch.setattr(core, "HELPERS", 1)
    monkeypatch.setattr(core, "_POOL", {})
    items = [(k, 2) for k in range(6)]
    pool, started = core._helpers()
    for f in started:
        f.result(timeout=120)  # its worker is up
    workers = list(pool._processes.values())
    assert workers and all(w.is_alive() for w in workers)
    core.stop_helper_processes()
    assert core._POOL == {}

    def gone(pid):  # exited (a zombie until reaped) or reaped
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] in "ZX"
        except FileNotFoundError:
            return True

    deadline = time.monotonic() + 30
    while not all(gone(w.pid) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(gone(w.pid) for w in workers)
    assert core.ordered_map(pow, items) == [k * k for k in range(6)]
    core.stop_helper_processes()


def test_in_order_keeps_a_bounded_window_in_order_and_cancels_the_unread():
    from concurrent.futures import Future

    from attsvm.experiments.core import in_order

    submitted, futures = [], []

    def submit(x):
        submitted.append(x)
        f = Future()
        f.set_result(x * x)
        futures.append(f)
        return f

    it = in_order(range(100), submit, 3)
    assert [next(it) for _ in range(4)] == [(0, 0), (1, 1), (2, 4), (3, 9)]
    assert submitted == list(range(7))  # 3 ahead of what was read, never the whole stream
    it.close()
    assert len(submitted) == 7  # nothing more taken once the caller stops
    pending = []

    def submit_pending(x):
        pending.append(Future())
        return pending[-1]

    gen = in_order(range(10), submit_pending, 2, wait=lambda f: None)
    next(gen)
    gen.close()
    assert [f.cancelled() for f in pending] == [False, True, True]
