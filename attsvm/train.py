"""Gradient descent on one-layer attention: the only place with `jax.jit`.

Normalized GD (docs/theory.md §A.1, the paper's optimizer; docs/theory.md §1):
    W ← W − η ∇L(W) / (‖∇L(W)‖_F + ε₀)                                   (param="W")
    K ← K − η ∇_K / (‖∇_K‖_F + ε₀),  Q ← Q − η ∇_Q / (‖∇_Q‖_F + ε₀)      (param="KQ")
with ε₀ = 2⁻⁵² and, for (K, Q), the objective L(K Qᵀ) + ε (‖K‖_F² + ‖Q‖_F²), ε = `ridge`.
Plain GD (`normalized=False`) drops the normalization.

One compiled program runs a whole batch: `vmap` over runs of a `lax.scan` over records of
a loop over steps. The step size, the ridge and `record_every` are traced (a new value never
recompiles; only the number of records is part of the program). Sizes are zero-padded up to
buckets (`bucket`); padding is exact: padded features are zero, padded tokens are masked out
of the softmax, padded sequences carry zero loss weight, and padded rows/columns of W, K, Q
start at 0 and receive zero gradient.

Overflow (docs/theory.md §A.3): a run stops at its last finite state and reports the step
(`Trajectory.overflow_at`); its records stay finite.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np

from . import model
from .model import Data, jax, jnp
from .problems import Problem, check_choice, check_float, check_int, check_record_every

PARAMS = ("W", "KQ")
NORM_EPS = 2.0 ** -52            # ε₀ of the normalized step, as in the authors' code
RIDGE_EPS = float(np.finfo(np.float64).eps)
SATURATION_TOL = 1e-13           # non-selected softmax mass below which float64 gradients are noise
MAX_STEPS = 1_000_000
MAX_RECORD_FLOATS = 60_000_000   # ≈ 480 MB of recorded float64 per call
_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192,
            256, 320, 384, 512)

TRACE_COUNT = 0                   # times the engine was traced (compiled); see bench.py


def bucket(x: int) -> int:
    """The padded size used for a dimension of size `x`."""
    for b in _BUCKETS:
        if b >= x:
            return b
    return x


def backend() -> dict:
    """Which JAX backend runs GD: {"platform", "devices", "x64"}."""
    devs = jax.devices()
    return {"platform": jax.default_backend(), "devices": len(devs),
            "device_kind": devs[0].device_kind, "x64": bool(jax.config.jax_enable_x64)}


# -- the compiled engine ------------------------------------------------------------------
@partial(jax.jit, static_argnames=("param", "head", "loss", "normalized", "n_records"))
def _simulate(params0, data: Data, lr, ridge, record_every, *, param, head, loss, normalized,
              n_records):
    """Batched GD. params0 and data carry a leading run axis; returns per-run records.

    Only the number of records is static: `record_every` (and so `steps`) is traced, like
    `lr` and `ridge`, so a new step count with the same number of records reuses the program.
    """
    global TRACE_COUNT
    TRACE_COUNT += 1

    def one_run(params0, data):
        def obj(params):
            W = model.as_W(params, param)
            f, s = model.outputs(W, data, head)
            L = jnp.sum(data.w * model.loss_fn(data.Y * f, loss))
            total = L
            if param == "KQ":
                K, Q = params
                total = L + ridge * (jnp.sum(K * K) + jnp.sum(Q * Q))
            return total, (L, s, W)

        vg = jax.value_and_grad(obj, has_aux=True)
        leaves = jax.tree_util.tree_leaves
        tmap = jax.tree_util.tree_map

        def step(carry):
            """One GD step from `params`; returns the record of the state it started from.

            Overflow: if this state's objective or gradient is not finite, the update that
            produced it (step k − 1) broke the run: go back to the previous state, record that
            one, and stop there. If this state is fine but its update is not (or ‖·‖² of the
            result overflows), stop here. Either way `bad_at` is the last good step.
            """
            params, prev, prev_rec, bad_at, k = carry
            (total, (L, s, W)), g = vg(params)
            sq = [jnp.sum(a * a) for a in leaves(g)]
            gnorm = jnp.sqrt(sum(sq))
            if normalized:
                g = tmap(lambda a, q: a / (jnp.sqrt(q) + NORM_EPS), g,
                         jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(g), sq))
            new = tmap(lambda p, a: p - lr * a, params, g)
            rec = (W, s, L, gnorm)
            here_ok = jnp.isfinite(total) & jnp.isfinite(gnorm)
            next_ok = jnp.isfinite(sum(jnp.sum(a * a) for a in leaves(new)))
            running = bad_at < 0
            back = running & ~here_ok & (k > 0)
            bad_at = jnp.where(running & ~here_ok, jnp.maximum(k - 1, 0),
                               jnp.where(running & ~next_ok, k, bad_at))
            rec_out = tmap(lambda a, b: jnp.where(back, a, b), prev_rec, rec)
            nxt = tmap(lambda a, b, c: jnp.where(back, a, jnp.where(bad_at >= 0, b, c)),
                       prev, params, new)
            return (nxt, params, rec, bad_at, k + 1), rec_out

        def chunk(carry, j):
            carry, rec = step(carry)                 # record the state this chunk starts from
            # the extra last chunk only records the final state
            todo = jnp.where(j < n_records, record_every - 1, 0)
            carry = jax.lax.fori_loop(0, todo, lambda _, c: step(c)[0], carry)
            return carry, rec

        L0, s0, W0 = jax.eval_shape(lambda p: vg(p)[0][1], params0)
        zrec = tuple(jnp.zeros(a.shape, a.dtype) for a in (W0, s0, L0, L0))
        carry0 = (params0, params0, zrec, jnp.array(-1), jnp.array(0))
        carry, recs = jax.lax.scan(chunk, carry0, jnp.arange(n_records + 1))
        bad_at = jnp.where(carry[3] >= n_records * record_every, -1, carry[3])
        final = tmap(lambda a, b: jnp.where(bad_at >= 0, a, b), carry[0], carry[1])
        return recs, final, bad_at

    # Records come out record-major, (k, B, ...), as the scan writes them: a run-major layout
    # would cost XLA a transposing copy of the whole history (≈ 40% of a 2000-step call).
    return jax.vmap(one_run, out_axes=(1, 0, 0))(params0, data)


# -- results ----------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Trajectory:
    """Records of GD after steps 0, r, 2r, …, `steps` (one run, or a batch of runs).

    Attributes (a batch adds a leading run axis B to every array):
        W: (k, d, d) the combined matrix W(j) (K Qᵀ for the (K, Q)-parameterization).
        probs: (k, n, T) softmax weights s_it at W(j) ((k, n, T, T) for sequence modes:
            query k's weights over tokens).
        loss: (k,) the risk L(W(j)) without the ridge.
        grad_norm: (k,) ‖∇‖ of the objective GD followed, at W(j).
        steps: (k,) iteration numbers.
        K, Q: (d, m) final factors (param="KQ"), else None.
        final_params: W (d, d) or the pair (K, Q) after the last step: pass it as `init`
            to continue the run exactly where it stopped.
        overflow_at: the last finite step, where GD was stopped because the next update
            (or the objective at the state it led to) was not finite; that state is kept and
            every later record repeats it. -1 if nothing overflowed.
        settings: the call's settings; backend: the JAX platform that ran it.
    """

    W: np.ndarray
    probs: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    steps: np.ndarray
    K: np.ndarray | None
    Q: np.ndarray | None
    overflow_at: np.ndarray
    settings: dict = field(repr=False)
    backend: str = "cpu"
    batched: bool = False

    # -- batches ------------------------------------------------------------------------
    def __len__(self):
        if not self.batched:
            raise TypeError("a single run has no len(); Trajectory.batched is False")
        return self.W.shape[0]

    def __getitem__(self, b: int) -> "Trajectory":
        if not self.batched:
            raise TypeError("index a batch of runs (from train_batch), not a single run")
        return Trajectory(W=self.W[b], probs=self.probs[b], loss=self.loss[b],
                          grad_norm=self.grad_norm[b], steps=self.steps,
                          K=None if self.K is None else self.K[b],
                          Q=None if self.Q is None else self.Q[b],
                          overflow_at=self.overflow_at[b], settings=self.settings,
                          backend=self.backend, batched=False)

    # -- derived ---------------------------------------------------------------------------
    @property
    def final_params(self):
        if self.K is None:
            return self.W[..., -1, :, :]
        return (self.K, self.Q)

    @property
    def alpha(self) -> np.ndarray:
        """The selection at the end: argmax_t of the final softmax, (n,) (or (B, n))."""
        return np.take(self.probs, -1, axis=int(self.batched)).argmax(-1)

    @cached_property
    def selected_prob(self) -> np.ndarray:
        """max_t s_it(j): (k, n) ((k, n, K) in sequence modes)."""
        return self.probs.max(-1)

    @cached_property
    def tail_mass(self) -> np.ndarray:
        """Σ_{t ≠ argmax} s_it(j), computed without the cancellation of 1 − max."""
        return self.probs.sum(-1) - self.probs.max(-1)

    @cached_property
    def saturated_at(self) -> np.ndarray:
        """Per sequence (and query), the first recorded step at which the non-selected
        softmax mass fell below `SATURATION_TOL` = 1e-13: from there on float64 cannot
        resolve the selected token's gradient term, so the direction is frozen by rounding,
        not converged. -1 where it never happened. Shape (n,) (or (B, n), (…, n, K)).
        A causal query that can attend to one token only (query 0) has nothing to saturate: -1.
        """
        sat = self.tail_mass < self.settings.get("saturation_tol", SATURATION_TOL)
        axis = 1 if self.batched else 0
        first = np.argmax(sat, axis=axis)
        hit = np.any(sat, axis=axis)
        out = np.where(hit, self.steps[first], -1)
        if self.settings.get("queries") == "causal":
            out[..., 0] = -1
        return out

    @cached_property
    def singular_values(self) -> np.ndarray:
        """σ(W(j)): (k, d), descending (computed on first use)."""
        return np.linalg.svd(self.W, compute_uv=False)

    @property
    def norms(self) -> np.ndarray:
        """‖W(j)‖_F: (k,)."""
        return np.linalg.norm(self.W, axis=(-2, -1))


# -- public entry points ------------------------------------------------------------------------
def _check_settings(prob: Problem, *, param, steps, lr, normalized, loss, record_every, m,
                    ridge, n_runs):
    check_choice("param", param, PARAMS)
    check_choice("loss", loss, model.LOSSES)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    record_every = check_record_every(record_every, steps)
    lr = check_float("lr", lr, 0.0, 1e3, lo_open=True)
    if not isinstance(normalized, (bool, np.bool_)):
        raise ValueError(f"`normalized` must be True or False; got {normalized!r}")
    m = prob.d if m is None else check_int("m", m, 1, prob.d)
    ridge = RIDGE_EPS if ridge is None else check_float("ridge", ridge, 0.0, 1.0)
    k = steps // record_every + 1
    per = prob.d * prob.d + prob.n * prob.T * (prob.T if prob.queries != "single" else 1) + 2
    if n_runs * k * per > MAX_RECORD_FLOATS:
        most = max(1, MAX_RECORD_FLOATS // (n_runs * per) - 1)
        raise ValueError(
            f"`record_every` must keep the recorded history under {MAX_RECORD_FLOATS:,} "
            f"numbers; got {record_every} ({n_runs} runs × {k} records × {per} numbers). "
            f"Record every {math.ceil(steps / most)} steps or fewer runs.")
    return dict(param=param, steps=steps, lr=lr, normalized=bool(normalized), loss=loss,
                record_every=record_every, m=m, ridge=ridge)


def default_init(prob: Problem, param: str = "W", *, seed: int = 0, m: int | None = None,
                 index: int = 0):
    """The default initialization: entries U(−1/√d, 1/√d), as PyTorch's `nn.Linear`
    (the paper's init), drawn by `numpy.random.default_rng([seed, index])`.

    Returns W (d, d) for "W" or (K, Q), each (d, m), for "KQ".
    """
    d = prob.d
    m = d if m is None else m
    rng = np.random.default_rng([seed, index])
    b = 1.0 / math.sqrt(d)
    if param == "W":
        return rng.uniform(-b, b, (d, d))
    return rng.uniform(-b, b, (d, m)), rng.uniform(-b, b, (d, m))


def _check_init(init, prob: Problem, param: str, m: int, name="init"):
    d = prob.d
    if param == "W":
        W = np.asarray(init, dtype=np.float64)
        if W.shape != (d, d):
            raise ValueError(f"`{name}` must be a ({d}, {d}) array for param='W'; "
                             f"got shape {W.shape}")
        parts = (W,)
    else:
        if not isinstance(init, (tuple, list)) or len(init) != 2:
            raise ValueError(f"`{name}` must be a pair (K, Q) of ({d}, {m}) arrays for param='KQ'; "
                             f"got {type(init).__name__}")
        parts = tuple(np.asarray(a, dtype=np.float64) for a in init)
        if any(a.shape != (d, m) for a in parts):
            raise ValueError(f"`{name}` must be a pair (K, Q) of ({d}, {m}) arrays for param='KQ'; "
                             f"got shapes {[a.shape for a in parts]}")
    if not all(np.all(np.isfinite(a)) for a in parts):
        raise ValueError(f"`{name}` must be finite (no NaN or inf); got non-finite entries")
    return parts[0] if param == "W" else parts


def _pad_data(prob: Problem, sizes) -> dict:
    n, T, d = prob.shape
    nb, Tb, db = sizes
    Qv, Yl, mask = prob.query_view()
    K = Qv.shape[1]
    Kb = 1 if K == 1 else Tb
    X = np.zeros((nb, Tb, db))
    X[:n, :T, :d] = prob.X
    Q = np.zeros((nb, Kb, db))
    Q[:n, :K, :d] = Qv
    Y = np.ones((nb, Kb))
    Y[:n, :K] = Yl
    M = np.zeros((nb, Kb, Tb), dtype=bool)
    M[:n, :K, :T] = mask[None]
    real = np.zeros((nb, Kb), dtype=bool)
    real[:n, :K] = True
    M[~real, 0] = True                       # padded queries attend somewhere (no 0/0)
    w = np.where(real, 1.0 / n, 0.0)
    v, V = np.zeros(db), np.zeros((db, db))
    if prob.v is not None:
        v[:d] = prob.v
    if prob.V is not None:
        V[:d, :d] = prob.V
    return dict(X=X, Q=Q, Y=Y, mask=M, w=w, v=v, V=V, lam=np.array(prob.lam))


def train(prob: Problem, param: str = "W", steps: int = 2000, lr: float = 0.1,
          normalized: bool = True, loss: str = "logistic", init=None, seed: int = 0,
          record_every: int = 1, *, m: int | None = None, ridge: float | None = None,
          saturation_tol: float = SATURATION_TOL) -> Trajectory:
    """Run GD on one problem. See `train_batch` for the arguments."""
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    return train_batch([prob], param=param, steps=steps, lr=lr, normalized=normalized,
                       loss=loss, init=None if init is None else [init], seed=seed,
                       record_every=record_every, m=m, ridge=ridge,
                       saturation_tol=saturation_tol)[0]


def train_batch(probs, param: str = "W", steps: int = 2000, lr: float = 0.1,
                normalized: bool = True, loss: str = "logistic", init=None, seed: int = 0,
                record_every: int = 1, *, m: int | None = None, ridge: float | None = None,
                saturation_tol: float = SATURATION_TOL, devices=None) -> Trajectory:
    """Run GD on several problems of equal shape at once (one compiled, vmapped program).

    Args:
        probs: sequence of B `Problem`s with equal (n, T, d), head and query mode.
        param: "W" (train W) or "KQ" (train K, Q ∈ R^{d×m}, W = K Qᵀ).
        steps: number of GD iterations, 1 … 1e6.
        lr: step size η > 0 (traced: a new value does not recompile).
        normalized: normalized GD (the paper's) or plain GD.
        loss: "logistic", "exponential" or "correlation".
        init: None (default init `default_init`, a different draw per problem: index b of
            the batch uses `numpy.random.default_rng([seed, b])`), or a list of B inits
            (W (d, d), or (K, Q) pairs of (d, m) arrays).
        seed: seed of the default initialization.
        record_every: r, must divide `steps`; records after 0, r, 2r, …, steps iterations.
        m: rank of K and Q (default d).
        ridge: ε of the (K, Q) ridge; default float64 machine epsilon; 0 allowed.
        saturation_tol: threshold of `Trajectory.saturated_at`.
        devices: the JAX devices to spread the runs over (default: all of them). One device
            runs the whole batch there (sweeps deal fixed-size chunks to devices this way).

    Returns:
        A batched `Trajectory` (index it for single runs).
    """
    try:
        probs = list(probs)
    except TypeError:
        raise ValueError("`probs` must be a sequence of attsvm.Problem; "
                         f"got {type(probs).__name__}") from None
    if not probs or not all(isinstance(p, Problem) for p in probs):
        raise ValueError("`probs` must be a non-empty sequence of attsvm.Problem")
    p0 = probs[0]
    for p in probs[1:]:
        if (p.shape, p.head, p.queries) != (p0.shape, p0.head, p0.queries):
            raise ValueError("`probs` must share shape, head and query mode; got "
                             f"{p0.shape}/{p0.head}/{p0.queries} and "
                             f"{p.shape}/{p.head}/{p.queries}")
    B = len(probs)
    cfg = _check_settings(p0, param=param, steps=steps, lr=lr, normalized=normalized,
                          loss=loss, record_every=record_every, m=m, ridge=ridge, n_runs=B)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    check_float("saturation_tol", saturation_tol, 0.0, 1.0)
    m = cfg["m"]
    if init is None:
        inits = [default_init(p, param, seed=seed, m=m, index=b) for b, p in enumerate(probs)]
    else:
        if isinstance(init, np.ndarray) and param == "W" and init.ndim == 3:
            init = list(init)
        if not isinstance(init, (list, tuple)) or len(init) != B:
            raise ValueError(f"`init` must be None or a list of {B} initializations; "
                             f"got {type(init).__name__}")
        inits = [_check_init(a, p0, param, m, name=f"init[{b}]") for b, a in enumerate(init)]

    n, T, d = p0.shape
    sizes = (bucket(n), bucket(T), bucket(d))
    db, mb = sizes[2], bucket(m)
    datas = [_pad_data(p, sizes) for p in probs]
    stacked = {k: np.stack([dd[k] for dd in datas]) for k in datas[0]}
    if param == "W":
        params0 = np.zeros((B, db, db))
        params0[:, :d, :d] = np.stack(inits)
    else:
        Kp, Qp = np.zeros((B, db, mb)), np.zeros((B, db, mb))
        Kp[:, :d, :m] = np.stack([a[0] for a in inits])
        Qp[:, :d, :m] = np.stack([a[1] for a in inits])
        params0 = (Kp, Qp)

    # Spread the runs over every device JAX sees (a GPU, or several).
    devices = jax.devices() if devices is None else list(devices)
    nd = len(devices)
    Bp = -(-B // nd) * nd
    if Bp != B:
        rep = lambda a: np.concatenate([a, np.repeat(a[-1:], Bp - B, axis=0)])  # noqa: E731
        stacked = {k: rep(a) for k, a in stacked.items()}
        params0 = jax.tree_util.tree_map(rep, params0)
    data = Data(**stacked)
    if nd > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        sh = NamedSharding(Mesh(np.array(devices), ("runs",)), PartitionSpec("runs"))
        data = jax.device_put(data, sh)
        params0 = jax.device_put(params0, sh)
    else:
        data = jax.device_put(data, devices[0])
        params0 = jax.device_put(params0, devices[0])

    recs, final, bad_at = _simulate(
        params0, data, jnp.asarray(cfg["lr"], jnp.float64), jnp.asarray(cfg["ridge"], jnp.float64),
        jnp.asarray(cfg["record_every"], jnp.int64),
        param=param, head=p0.head, loss=loss, normalized=cfg["normalized"],
        n_records=steps // cfg["record_every"])
    Wr, S, L, G = (np.moveaxis(np.asarray(a), 1, 0)[:B] for a in recs)   # (B, k, ...) views
    K_real = 1 if p0.queries == "single" else T
    W = Wr[:, :, :d, :d]
    S = S[:, :, :n, :K_real, :T]
    if p0.queries == "single":
        S = S[:, :, :, 0, :]
    Kf = Qf = None
    if param == "KQ":
        Kf = np.asarray(final[0])[:B, :d, :m]
        Qf = np.asarray(final[1])[:B, :d, :m]
    bad = np.asarray(bad_at)[:B]
    settings = dict(cfg, seed=seed, saturation_tol=float(saturation_tol), n=n, T=T, d=d,
                    head=p0.head, queries=p0.queries, attention=p0.attention, runs=B)
    return Trajectory(W=W, probs=S, loss=L, grad_norm=G,
                      steps=np.arange(0, steps + 1, cfg["record_every"]),
                      K=Kf, Q=Qf, overflow_at=bad, settings=settings,
                      backend=jax.default_backend(), batched=True)
