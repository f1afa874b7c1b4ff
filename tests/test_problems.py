"""attsvm.problems: the paper's generator, presets, token scores and optimal tokens."""

from __future__ import annotations

import numpy as np
import pytest

import attsvm
from attsvm.problems import Problem, check_alpha, random_problem


@pytest.mark.parametrize("attention", ["cross", "self"])
def test_random_problem_follows_the_papers_generator(attention):
    prob = attsvm.random_problem(n=6, T=8, d=10, seed=3, attention=attention)
    assert prob.shape == (6, 8, 10) and prob.attention == attention
    np.testing.assert_allclose(np.linalg.norm(prob.X, axis=-1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(prob.v), 1.0, rtol=1e-14)
    assert set(np.unique(prob.Y)) <= {-1.0, 1.0}
    if attention == "cross":
        np.testing.assert_allclose(np.linalg.norm(prob.Z, axis=-1), 1.0, rtol=1e-14)
    else:
        assert prob.Z is None
        Q, _, _ = prob.query_view()
        np.testing.assert_array_equal(Q[:, 0], prob.X[:, 0])  # z_i = x_i1


def test_random_problem_is_reproducible_by_seed():
    a, b = attsvm.random_problem(seed=5), attsvm.random_problem(seed=5)
    c = attsvm.random_problem(seed=6)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.Y, b.Y)
    assert not np.array_equal(a.X, c.X)


def test_random_labels_are_balanced():
    Y = np.concatenate([attsvm.random_problem(n=50, T=2, d=2, seed=s).Y for s in range(20)])
    assert abs(Y.mean()) < 0.1


def test_relu_head_matrix_is_frobenius_normalized():
    prob = attsvm.random_problem(3, 4, 5, seed=0, head="relu")
    assert prob.V.shape == (5, 5)
    np.testing.assert_allclose(np.linalg.norm(prob.V), 1.0, rtol=1e-14)


@pytest.mark.parametrize("queries", ["sequence", "causal"])
def test_sequence_problems_have_one_label_and_query_per_token(queries):
    prob = attsvm.random_problem(3, 5, 4, seed=0, queries=queries)
    Q, Y, mask = prob.query_view()
    assert Q.shape == (3, 5, 4) and Y.shape == (3, 5) and mask.shape == (5, 5)
    want = np.ones((5, 5), bool)
    np.testing.assert_array_equal(mask, want if queries == "sequence" else np.tril(want))


@pytest.mark.parametrize("head", ["linear", "relu", "quadratic"])
def test_token_scores_are_the_head_of_each_token_times_the_label(head):
    prob = attsvm.random_problem(4, 6, 5, seed=1, head=head)
    X, Y = prob.X, prob.Y
    if head == "linear":
        h = X @ prob.v
    elif head == "relu":
        h = np.maximum(X @ prob.V, 0).sum(-1)
    else:
        h = X @ prob.v - prob.lam * (X**2).sum(-1)
    np.testing.assert_allclose(attsvm.token_scores(prob), Y[:, None] * h, rtol=1e-14)
    np.testing.assert_array_equal(attsvm.optimal_tokens(prob), np.argmax(Y[:, None] * h, 1))


def test_causal_scores_exclude_future_tokens():
    prob = attsvm.random_problem(2, 4, 3, seed=0, queries="causal")
    g = attsvm.token_scores(prob)  # (n, K, T)
    assert np.all(np.isneginf(g[:, np.triu_indices(4, 1)[0], np.triu_indices(4, 1)[1]]))
    opt = attsvm.optimal_tokens(prob)
    assert opt.shape == (2, 4) and np.all(opt <= np.arange(4)[None])
    assert np.all(opt[:, 0] == 0)


def test_a_tied_optimal_token_is_refused():
    prob = attsvm.random_problem(2, 3, 2, seed=0)
    X = prob.X.copy()
    i = 1
    X[i, 2] = X[i, attsvm.optimal_tokens(prob)[i]]  # duplicate the best token
    with pytest.raises(ValueError, match="prob.*unique optimal token.*sequence 1"):
        attsvm.optimal_tokens(prob.with_(X=X))


def test_problem_arrays_are_read_only_copies():
    X = np.random.default_rng(0).standard_normal((2, 3, 2))
    prob = attsvm.Problem(X=X, Y=[1, -1], Z=np.ones((2, 2)), v=[1.0, 0.0])
    X[0, 0, 0] = 99.0  # the caller's array stays writable and independent
    assert prob.X[0, 0, 0] != 99.0
    with pytest.raises(ValueError):
        prob.X[0, 0, 0] = 1.0
    assert prob.X.dtype == np.float64 and prob.Y.dtype == np.float64


def test_with_revalidates():
    prob = attsvm.random_problem(2, 3, 2, seed=0)
    with pytest.raises(ValueError, match="`Y`"):
        prob.with_(Y=np.array([1.0, 0.5]))


def test_paper_presets():
    g1 = attsvm.paper_problem("geometry-1")
    assert g1.shape == (2, 3, 2) and np.all(g1.Y == 1)
    np.testing.assert_array_equal(attsvm.optimal_tokens(g1), [0, 2])  # docs/theory.md §4 E1
    np.testing.assert_allclose(
        attsvm.token_scores(g1), [[-0.840, -1.072, -1.308], [0.578, 0.673, 0.765]], atol=6e-4
    )
    g2 = attsvm.paper_problem("geometry-2")
    assert g2.shape == (2, 5, 2)
    np.testing.assert_array_equal(attsvm.optimal_tokens(g2), [0, 0])  # docs/theory.md §4 E1'


def test_check_alpha_accepts_integral_floats_and_rejects_masked_tokens():
    prob = attsvm.random_problem(2, 3, 2, seed=0)
    np.testing.assert_array_equal(check_alpha(prob, np.array([1.0, 2.0])), [1, 2])
    causal = attsvm.random_problem(2, 3, 2, seed=0, queries="causal")
    bad = np.zeros((2, 3), int)
    bad[0, 0] = 2  # query 0 may only attend to token 0
    with pytest.raises(ValueError, match="`alpha`.*causal"):
        check_alpha(causal, bad)


def _reference_random(n, T, d, seed, queries):
    """The draw `random_problem`'s docstring states, written out: default_rng(seed), then v,
    X, Z, Y, V in that order, one call each, each row divided by np.linalg.norm."""
    rng = np.random.default_rng(seed)
    unit = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
    v = unit(rng.standard_normal(d))
    X = unit(rng.standard_normal((n, T, d)))
    Z = unit(rng.standard_normal((n, d) if queries == "single" else (n, T, d)))
    Y = rng.choice([-1.0, 1.0], size=(n,) if queries == "single" else (n, T))
    V = rng.standard_normal((d, d))
    return dict(v=v, X=X, Z=Z, Y=Y, V=V / np.linalg.norm(V))


@pytest.mark.parametrize("queries", ["single", "sequence"])
def test_random_problem_and_candidate_draw_the_stated_order_exactly(queries):
    """Bit for bit the reference draw; `random_candidate` (multi-token's skip of the all-+1
    seeds) is None exactly when every label is +1 and the same problem otherwise."""
    nones = 0
    for seed in range(60):
        for n, T, d in ((3, 4, 4), (3, 4, 10), (1, 2, 1), (6, 8, 7)):
            want = _reference_random(n, T, d, seed, queries)
            p = attsvm.random_problem(n, T, d, seed=seed, head="relu", queries=queries)
            for k, a in want.items():
                np.testing.assert_array_equal(getattr(p, k), a, err_msg=k)
            c = attsvm.problems.random_candidate(n, T, d, seed, head="relu", queries=queries)
            if np.all(want["Y"] > 0):
                assert c is None
                nones += 1
            else:
                for k, a in want.items():
                    np.testing.assert_array_equal(getattr(c, k), a, err_msg=k)
                assert c.name == p.name
    assert 0 < nones < 240


@pytest.mark.parametrize(
    "kw",
    [
        dict(head="relu"),
        dict(head="linear"),
        dict(head="quadratic", lam=0.3),
        dict(attention="self"),
        dict(queries="causal", attention="self"),
        dict(queries="sequence"),
    ],
)
def test_random_problem_skips_no_check_the_constructor_would_make(kw):
    """random_problem builds its Problem without re-validating its own draws
    (`Problem._trusted`): every field equals, in value, dtype and read-only flag, what the
    checked constructor makes of the same arrays."""
    a = random_problem(3, 4, 5, seed=11, **kw)
    b = Problem(
        **{
            f: getattr(a, f)
            for f in (
                "X",
                "Y",
                "Z",
                "v",
                "head",
                "V",
                "lam",
                "query_index",
                "queries",
                "lengths",
                "name",
            )
        }
    )
    for f in ("X", "Y", "Z", "v", "V", "lengths"):
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_array_equal(x, y)
            assert x.dtype == y.dtype and not x.flags.writeable
    assert (a.lam, a.query_index, a.head, a.queries) == (b.lam, b.query_index, b.head, b.queries)
    assert type(a.lam) is type(b.lam)
    with pytest.raises(TypeError, match="unknown Problem fields"):
        Problem._trusted(X=a.X, Y=a.Y, colour="red")
