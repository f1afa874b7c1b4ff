"""Bad input (docs/theory.md §A.3) is refused at the boundary with a ValueError naming the argument.

One table of (case, call, argument the message must name). Cases that need a solver or a
compiled program fail in validation, before either runs.
"""

from __future__ import annotations

import numpy as np
import pytest

import attsvm
from attsvm import metrics

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4))
Y = np.array([1.0, -1.0])
Z = rng.standard_normal((2, 4))
v = rng.standard_normal(4)
PROB = attsvm.Problem(X=X, Y=Y, Z=Z, v=v)


def problem(**kw):
    args = dict(X=X, Y=Y, Z=Z, v=v)
    args.update(kw)
    return lambda: attsvm.Problem(**args)


def with_value(a, index, value):
    a = np.array(a, dtype=float)
    a[index] = value
    return a


def tied():
    Xt = X.copy()
    best = attsvm.optimal_tokens(PROB)[0]
    Xt[0, (best + 1) % 3] = Xt[0, best]
    return PROB.with_(X=Xt)


def train(**kw):
    return lambda: attsvm.train(PROB, **{"steps": 10, **kw})


def solve(**kw):
    return lambda: attsvm.solve_att_svm(PROB, **kw)


CASES = [
    # -- Problem construction
    ("X 2-d", problem(X=X[0]), "X"),
    ("X NaN", problem(X=with_value(X, (0, 0, 0), np.nan)), "X"),
    ("X inf", problem(X=with_value(X, (1, 2, 3), np.inf)), "X"),
    ("X strings", problem(X="tokens"), "X"),
    ("X empty", problem(X=np.zeros((0, 3, 4)), Y=np.zeros(0), Z=np.zeros((0, 4))), "n"),
    ("Y shape", problem(Y=np.ones(3)), "Y"),
    ("Y label 0", problem(Y=np.array([1.0, 0.0])), "Y"),
    ("Y label 2", problem(Y=np.array([2.0, -1.0])), "Y"),
    ("Y NaN", problem(Y=np.array([1.0, np.nan])), "Y"),
    ("Z shape", problem(Z=Z[:, :3]), "Z"),
    ("Z inf", problem(Z=with_value(Z, (0, 0), -np.inf)), "Z"),
    ("Z zero query", problem(Z=with_value(Z, (1, slice(None)), 0.0)), "Z"),
    ("self-attention zero query", problem(Z=None, X=with_value(X, (0, 0), 0.0)), "X"),
    ("v missing", problem(v=None), "v"),
    ("v shape", problem(v=v[:3]), "v"),
    ("v zero", problem(v=np.zeros(4)), "v"),
    ("v NaN", problem(v=with_value(v, 0, np.nan)), "v"),
    ("head unknown", problem(head="softmax"), "head"),
    ("relu without V", problem(head="relu"), "V"),
    ("relu V shape", problem(head="relu", V=np.ones((4, 3))), "V"),
    ("lam negative", problem(head="quadratic", lam=-0.1), "lam"),
    ("lam NaN", problem(head="quadratic", lam=np.nan), "lam"),
    ("query_index out of range", problem(Z=None, query_index=3), "query_index"),
    ("queries unknown", problem(queries="all"), "queries"),
    ("sequence Y shape", problem(queries="sequence", Z=None), "Y"),
    # -- random_problem
    ("random n = 0", lambda: attsvm.random_problem(n=0), "n"),
    ("random T too large", lambda: attsvm.random_problem(T=10_000), "T"),
    ("random d negative", lambda: attsvm.random_problem(d=-1), "d"),
    ("random d float", lambda: attsvm.random_problem(d=2.5), "d"),
    ("random seed negative", lambda: attsvm.random_problem(seed=-1), "seed"),
    ("random attention", lambda: attsvm.random_problem(attention="both"), "attention"),
    ("random head", lambda: attsvm.random_problem(head="tanh"), "head"),
    ("paper preset", lambda: attsvm.paper_problem("geometry-3"), "name"),
    # -- train
    ("steps 0", train(steps=0), "steps"),
    ("steps huge", train(steps=10**9), "steps"),
    ("steps float", train(steps=1.5), "steps"),
    ("lr 0", train(lr=0.0), "lr"),
    ("lr negative", train(lr=-0.1), "lr"),
    ("lr NaN", train(lr=float("nan")), "lr"),
    ("lr inf", train(lr=float("inf")), "lr"),
    ("lr string", train(lr="fast"), "lr"),
    ("record_every 0", train(record_every=0), "record_every"),
    ("record_every not dividing", train(record_every=3), "record_every"),
    (
        "record history too large",
        lambda: attsvm.train(attsvm.random_problem(6, 8, 64), steps=10**6),
        "record_every",
    ),
    ("param unknown", train(param="QK"), "param"),
    ("loss unknown", train(loss="hinge"), "loss"),
    ("normalized not bool", train(normalized="yes"), "normalized"),
    ("init W shape", train(init=np.zeros((3, 3))), "init"),
    ("init W NaN", train(init=with_value(np.zeros((4, 4)), (0, 0), np.nan)), "init"),
    ("init KQ not a pair", train(param="KQ", init=np.zeros((4, 4))), "init"),
    ("init KQ shape", train(param="KQ", m=2, init=(np.zeros((4, 3)), np.zeros((4, 3)))), "init"),
    ("init KQ inf", train(param="KQ", init=(np.full((4, 4), np.inf), np.zeros((4, 4)))), "init"),
    ("m 0", train(param="KQ", m=0), "m"),
    ("m above d", train(param="KQ", m=5), "m"),
    ("ridge negative", train(param="KQ", ridge=-1e-3), "ridge"),
    ("seed negative", train(seed=-3), "seed"),
    ("prob not a Problem", lambda: attsvm.train("problem"), "prob"),
    (
        "batch of mixed shapes",
        lambda: attsvm.train_batch([PROB, attsvm.random_problem(2, 3, 5)], steps=2),
        "probs",
    ),
    ("batch empty", lambda: attsvm.train_batch([], steps=2), "probs"),
    (
        "batch init count",
        lambda: attsvm.train_batch([PROB, PROB], steps=2, init=[np.zeros((4, 4))]),
        "init",
    ),
    # -- SVMs
    ("norm unknown", solve(norm="l1"), "norm"),
    ("alpha shape", solve(alpha=[0, 1, 2]), "alpha"),
    ("alpha out of range", solve(alpha=[0, 3]), "alpha"),
    ("alpha negative", solve(alpha=[-1, 0]), "alpha"),
    ("alpha fractional", solve(alpha=[0.5, 1]), "alpha"),
    (
        "alpha beyond the causal mask",
        lambda: attsvm.solve_att_svm(
            attsvm.random_problem(2, 3, 4, queries="causal"), alpha=np.full((2, 3), 2)
        ),
        "alpha",
    ),
    ("support_tol negative", solve(support_tol=-1.0), "support_tol"),
    ("tie in the optimal token", lambda: attsvm.solve_att_svm(tied()), "prob"),
    ("tie for optimal_tokens", lambda: attsvm.optimal_tokens(tied()), "prob"),
    ("locally optimal alpha", lambda: attsvm.is_locally_optimal(PROB, [7, 0]), "alpha"),
    (
        "enumeration too large",
        lambda: attsvm.locally_optimal_selections(attsvm.random_problem(8, 8, 2)),
        "prob",
    ),
    ("generalized W shape", lambda: attsvm.solve_generalized_svm(PROB, np.eye(3)), "W"),
    (
        "generalized threshold",
        lambda: attsvm.solve_generalized_svm(PROB, np.eye(4), threshold=0.0),
        "threshold",
    ),
    # -- metrics
    ("correlation zero A", lambda: attsvm.correlation(np.zeros((2, 2)), np.eye(2)), "A"),
    ("correlation zero B", lambda: attsvm.correlation(np.eye(2), np.zeros((2, 2))), "B"),
    ("correlation shapes", lambda: attsvm.correlation(np.eye(2), np.eye(3)), "B"),
    ("correlation NaN", lambda: attsvm.correlation(np.full((2, 2), np.nan), np.eye(2)), "A"),
    ("correlation vector", lambda: attsvm.correlation(np.ones(3), np.ones(3)), "A"),
    ("margins W shape", lambda: metrics.token_margins(PROB, np.eye(3)), "W"),
    ("rank rtol", lambda: metrics.numerical_rank(np.eye(2), rtol=2.0), "rtol"),
]


@pytest.mark.parametrize("call,name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_naming_the_argument(call, name):
    with pytest.raises(ValueError) as err:
        call()
    assert f"`{name}" in str(err.value), str(err.value)


def test_messages_state_the_rule_and_the_value():
    with pytest.raises(
        ValueError,
        match=r"`lr` must be a finite number in \(0.0, 1000.0\]; "
        r"got -0.1",
    ):
        attsvm.train(PROB, steps=10, lr=-0.1)
    with pytest.raises(ValueError, match=r"`Y` must be labels in \{-1, \+1\}; got \[0.0, 1.0\]"):
        attsvm.Problem(X=X, Y=np.array([1.0, 0.0]), Z=Z, v=v)


@pytest.mark.parametrize("value", [(), ("W", "W"), ("W", "X"), 3])
def test_experiment_subsets_are_refused_naming_the_argument(value):
    from attsvm.experiments.local_convergence import Settings as S

    with pytest.raises(ValueError, match="`params` must be a non-empty subset"):
        S(params=value)
