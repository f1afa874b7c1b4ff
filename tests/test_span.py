"""The span form of W-parameterized GD (`batching.span_basis`, `training._span_form`): the
same logits, gradient and norm as the plain form, and the same trajectories to rounding."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attsvm import model, training
from attsvm.batching import bucket, padded_batch, span_basis
from attsvm.limits import span_pays
from attsvm.optimizers import AUTHORS_GRADIENT
from attsvm.problems import random_problem


def _batch(probs, seed=0):
    rng = np.random.default_rng(seed)
    d = probs[0].d
    inits = [rng.uniform(-1, 1, (d, d)) for _ in probs]
    return padded_batch(probs, inits, param="W", m=d)


def _problem(kind, n, T, d, seed):
    if kind == "lengths":
        p = random_problem(n, T, d, seed=seed)
        lengths = np.random.default_rng(seed).integers(1, T + 1, n)
        return p.with_(lengths=lengths)
    if kind == "duplicates":  # repeated tokens: A is rank-deficient
        p = random_problem(n, T, d, seed=seed)
        X = p.X.copy()
        X[:, 1] = X[:, 0]
        return p.with_(X=X)
    return random_problem(
        n, T, d, seed=seed, queries=kind, attention="self" if kind != "single" else "cross"
    )


# one compiled program per shape: op-by-op jax.grad took ~1.4 s an example
_GRAD = jax.jit(jax.grad(model.risk), static_argnums=(2, 3))
_LOGITS = jax.jit(model.logits)


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["single", "sequence", "causal", "lengths", "duplicates"]),
    n=st.integers(1, 4),
    T=st.integers(2, 5),
    d=st.integers(1, 7),
    seed=st.integers(0, 99),
)
def test_span_logits_gradient_and_norm_are_the_plain_forms(kind, n, T, d, seed):
    """a0 + Rᵀe = the logits of W0 + Σ e_j V_j; ∂L/∂e = Vᵀ vec(∇L); ‖∂L/∂e‖ = ‖∇L‖_F; and
    ∇L lies in the span (V Vᵀ ∇L = ∇L): checked against jax.grad of the plain risk."""
    prob = _problem(kind, n, T, d, seed)
    stacked, W0 = _batch([prob], seed)
    R, a0, V = span_basis(stacked, W0)
    db = W0.shape[-1]
    e = np.random.default_rng(seed + 1).standard_normal(V.shape[1]) * (V[0].any(-1))
    W = W0[0] + (e @ V[0]).reshape(db, db)
    plain = model.Data(**{k: jnp.asarray(a[0]) for k, a in stacked.items()})
    span = plain._replace(R=jnp.asarray(R[0]), a0=jnp.asarray(a0[0]))
    real = np.asarray(plain.mask)
    a_plain, a_span = np.asarray(_LOGITS(W, plain)), np.asarray(_LOGITS(e, span))
    np.testing.assert_allclose(a_span[real], a_plain[real], rtol=0, atol=1e-12)
    assert np.all(np.isneginf(a_span[~real]))
    g_W = np.asarray(_GRAD(jnp.asarray(W), plain, prob.head, "logistic"))
    g_e = np.asarray(_GRAD(jnp.asarray(e), span, prob.head, "logistic"))
    np.testing.assert_allclose(g_e, V[0] @ g_W.ravel(), rtol=0, atol=1e-13)
    np.testing.assert_allclose(V[0].T @ (V[0] @ g_W.ravel()), g_W.ravel(), rtol=0, atol=1e-13)
    assert np.linalg.norm(g_e) == pytest.approx(np.linalg.norm(g_W), rel=1e-12, abs=1e-15)


def test_span_basis_is_orthonormal_and_drops_only_dependent_directions():
    """Duplicated tokens make A rank-deficient: the kept rows of V are orthonormal, the
    dropped ones (and their rows of R) exactly 0, and A = Rᵀ V still holds."""
    prob = _problem("duplicates", 3, 4, 5, 7)
    stacked, W0 = _batch([prob])
    R, a0, V = span_basis(stacked, W0)
    kept = V[0].any(-1)
    assert kept.sum() == 3 * 3 < V.shape[1]  # 3 sequences × 3 distinct tokens
    np.testing.assert_allclose(V[0][kept] @ V[0][kept].T, np.eye(kept.sum()), atol=1e-14)
    assert not R[0][~kept].any()
    X, Qz = stacked["X"][0], stacked["Q"][0]
    A = np.einsum("itd,ike->iktde", X, Qz).reshape(-1, X.shape[-1] ** 2)
    np.testing.assert_allclose(R[0].T @ V[0], A, atol=1e-14)


RUNS = [random_problem(3, 4, 10, seed=s, head="relu") for s in range(6)]


@pytest.mark.parametrize(
    "kw",
    [
        dict(optimizer="ngd"),  # exact centred default
        dict(optimizer="ngd", **AUTHORS_GRADIENT),
        dict(optimizer="gd", lr=0.5),
        dict(optimizer="polyak"),
        dict(optimizer="ngd", record_every=7),
    ],
)
@pytest.mark.parametrize("head", ["linear", "relu"])
def test_train_batch_in_the_span_form_follows_the_plain_form(monkeypatch, kw, head):
    """Every record of 6 runs (W, softmax, loss, ‖∇L‖) to rounding, over 350 steps that
    reach saturation (the linear head's softmax reaches 1 − 1e-8)."""
    if kw["optimizer"] == "polyak" and head != "linear":
        pytest.skip("Polyak's L* is known for the linear head only")
    probs = [p.with_(head=head) for p in RUNS]
    kw = dict(dict(steps=350, lr=0.1, record_every=1), **kw)
    out = {}
    for mode in ("never", "always"):
        monkeypatch.setattr(training, "span_pays", lambda *a, m=mode: m == "always")
        out[mode] = training.train_batch(probs, devices=[jax.devices()[0]], **kw)
    a, b = out["never"], out["always"]
    scale = np.abs(a.W).max()
    np.testing.assert_allclose(b.W, a.W, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(b.probs, a.probs, rtol=0, atol=1e-9)
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-8, atol=1e-300)
    np.testing.assert_allclose(b.grad_norm, a.grad_norm, rtol=1e-7, atol=1e-300)
    np.testing.assert_array_equal(b.overflow_at, a.overflow_at)


def test_span_form_with_a_trained_head_and_an_overflowing_run(monkeypatch):
    """train_v keeps v as its own leaf; a run that overflows (plain GD, exponential loss, a
    large head: tests/test_train.py) stops at the same step in both forms."""
    probs = [random_problem(2, 3, 6, seed=s) for s in range(3)]
    kw = dict(steps=60, lr=0.1, record_every=1, train_v=True, optimizer="ngd")
    big = dict(steps=20, lr=1.0, record_every=1, optimizer="gd", loss="exponential")
    overflowing = [p.with_(v=2000 * p.v) for p in probs]
    out = {}
    for mode in ("never", "always"):
        monkeypatch.setattr(training, "span_pays", lambda *a, m=mode: m == "always")
        out[mode] = (training.train_batch(probs, **kw), training.train_batch(overflowing, **big))
    (a, oa), (b, ob) = out["never"], out["always"]
    np.testing.assert_allclose(b.W, a.W, rtol=0, atol=1e-10 * np.abs(a.W).max())
    np.testing.assert_allclose(b.v, a.v, rtol=0, atol=1e-10)
    assert (oa.overflow_at >= 0).sum() >= 2
    np.testing.assert_array_equal(ob.overflow_at, oa.overflow_at)
    assert np.isfinite(ob.W).all()


def test_span_form_is_used_where_it_pays_and_never_recompiles_on_lr_or_steps(monkeypatch):
    """`auto` takes the span form for multi-token's shape (n = 3, T = 4, d = 10), not for the
    benchmark's (n = 6, T = 8, d = 10, every step recorded); a new lr or step count with the
    same number of records reuses its program."""
    from attsvm import engine

    assert span_pays(3, 1, 4, bucket(10), 100, 2000, 128)
    assert not span_pays(6, 1, 8, bucket(10), 1, 2000, 100)
    assert not span_pays(2, 1, 3, 2, 1, 2000)  # p = d²: nothing to gain
    assert not span_pays(3, 1, 4, bucket(10), 100, 20)  # 20 steps: the SVD would dominate
    # the basis's size: n = 50, T = 2, d = 256 is 100 × 65 536 numbers a run, under
    # SPAN_MAX_FLOATS (2²³) for one run, over it for two
    assert span_pays(50, 1, 2, 256, 1000, 10**6, 1)
    assert not span_pays(50, 1, 2, 256, 1000, 10**6, 2)
    monkeypatch.setenv("ATTSVM_MODE", "hosted")  # ≤ its 2 M recorded numbers
    assert not span_pays(50, 1, 2, 256, 1000, 10**6, 1)
    assert span_pays(3, 1, 4, bucket(10), 100, 2000, 128)
    monkeypatch.delenv("ATTSVM_MODE")
    calls = []
    real = training.span_basis
    monkeypatch.setattr(training, "span_basis", lambda *a: calls.append(1) or real(*a))
    probs = [random_problem(3, 4, 10, seed=s, head="relu") for s in range(3)]
    training.train_batch(probs, steps=2000, lr=0.1, record_every=100, devices=[jax.devices()[0]])
    before = engine.compile_count()
    training.train_batch(probs, steps=3000, lr=0.3, record_every=150, devices=[jax.devices()[0]])
    assert engine.compile_count() == before and len(calls) == 2
    training.train_batch([random_problem(6, 8, 10, seed=1)], steps=4, record_every=1)
    assert len(calls) == 2


def test_span_form_rejects_rules_that_leave_the_span(monkeypatch):
    """sign, spectral and ℓp mirror descent move W off span{x zᵀ}: they keep the plain form
    even when asked for the span form."""
    monkeypatch.setattr(training, "span_pays", lambda *a: True)
    called = []
    monkeypatch.setattr(training, "span_basis", lambda *a: called.append(1))
    probs = [random_problem(3, 4, 10, seed=s) for s in range(2)]
    for opt in ("sign", "spectral", "md", "nmd"):
        training.train_batch(probs, steps=3, optimizer=opt, devices=[jax.devices()[0]])
    assert not called


def _pad_one(prob, sizes):
    """The padding of one problem, written out as a plain loop over its fields (the
    reference for `batching.pad_batch`, which fills whole batch slices)."""
    n, T, d = prob.shape
    nb, Tb, db = sizes
    Qv, Yl, _ = prob.query_view()
    K = Qv.shape[1]
    Kb = 1 if K == 1 else Tb
    out = dict(
        X=np.zeros((nb, Tb, db)),
        Q=np.zeros((nb, Kb, db)),
        Y=np.ones((nb, Kb)),
        mask=np.zeros((nb, Kb, Tb), dtype=bool),
        w=np.zeros((nb, Kb)),
        v=np.zeros(db),
        V=np.zeros((db, db)),
        lam=np.array(prob.lam),
    )
    tm = prob.token_mask()
    for i in range(nb):
        for k in range(Kb):
            if i < n and k < K:
                out["Y"][i, k] = Yl[i, k]
                out["w"][i, k] = 1.0 / n
                out["Q"][i, k, :d] = Qv[i, k]
                out["mask"][i, k, :T] = tm[i, k]
            else:
                out["mask"][i, k, 0] = True
    out["X"][:n, :T, :d] = prob.X
    if prob.v is not None:
        out["v"][:d] = prob.v
    if prob.V is not None:
        out["V"][:d, :d] = prob.V
    return out


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["single", "sequence", "causal", "lengths", "duplicates"]),
    head=st.sampled_from(["linear", "relu", "quadratic"]),
    n=st.integers(1, 4),
    T=st.integers(2, 5),
    d=st.integers(1, 7),
    seed=st.integers(0, 99),
)
def test_batched_padding_is_each_problems_padding(kind, head, n, T, d, seed):
    """`padded_batch` stacks exactly what padding each problem alone gives (`_pad_one`):
    zeros beyond the real sizes, padded queries attending token 0, loss weights 1/n."""
    probs = [
        _problem(kind, n, T, d, seed + b).with_(
            head=head, V=np.eye(d) / np.sqrt(d), lam=0.25 * (head == "quadratic")
        )
        for b in range(3)
    ]
    stacked, _ = _batch(probs, seed)
    sizes = (bucket(n), bucket(T), bucket(d))
    for b, p in enumerate(probs):
        ref = _pad_one(p, sizes)
        assert set(ref) == set(stacked)
        for key, a in ref.items():
            assert stacked[key][b].dtype == a.dtype, key
            np.testing.assert_array_equal(stacked[key][b], a, err_msg=key)
