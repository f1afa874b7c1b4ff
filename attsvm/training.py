"""Gradient descent on one-layer attention: the public entry points `train` and
`train_batch`, their validation and the default initialization.

The update rule and the objective are in `engine` (the only place with `jax.jit`), the
record in `trajectory`, padding and device placement in `batching`. Normalized GD is the
paper's optimizer (arXiv 2308.16898 §2); the (K, Q)-parameterization's objective carries
the vanishing ridge ε(‖K‖_F² + ‖Q‖_F²), ε = `ridge` (docs/theory.md §A.1).
"""
from __future__ import annotations

import math

import numpy as np

from . import limits, model
from .batching import padded_batch, place
from .engine import simulate
from .model import jax, jnp
from .optimizers import DEFAULT_CENTRED, DEFAULT_EPS, KQ_OPTIMIZERS, MAX_P, MIN_P, OPTIMIZERS, Hyper
from .problems import Problem, check_choice, check_float, check_int, check_record_every
from .trajectory import Trajectory, saturation_tol_for

PARAMS = ("W", "KQ")
RIDGE_EPS = float(np.finfo(np.float64).eps)
MAX_STEPS = 1_000_000
MAX_RECORD_FLOATS = limits.MAX_RECORD_FLOATS   # ≈ 480 MB of recorded float64 per call
# The keyword options of `train` that a run's settings record (all but `init`).
TRAIN_OPTIONS = ("param", "steps", "lr", "normalized", "loss", "seed", "record_every", "m",
                 "ridge", "saturation_tol", "optimizer", "p", "eps", "centred")


def backend() -> dict:
    """Which JAX backend runs GD: {"platform", "devices", "x64"}."""
    devs = jax.devices()
    return {"platform": jax.default_backend(), "devices": len(devs),
            "device_kind": devs[0].device_kind, "x64": bool(jax.config.jax_enable_x64)}


def _check_optimizer(*, param, head, normalized, optimizer, p, eps, centred) -> dict:
    """The update rule: `optimizer` (default: "ngd", or "gd" with normalized=False), its
    mirror exponent p (md/nmd only), the normalizer's ε and the centred gradient."""
    if not isinstance(normalized, (bool, np.bool_)):
        raise ValueError(f"`normalized` must be True or False; got {normalized!r}")
    if optimizer is None:
        optimizer = "ngd" if normalized else "gd"
    check_choice("optimizer", optimizer, OPTIMIZERS if param == "W" else KQ_OPTIMIZERS)
    if optimizer == "polyak" and head != "linear":
        raise ValueError(f"`optimizer` 'polyak' needs the loss infimum L*, known for the "
                         f"linear head only; got head={head!r}")
    if optimizer in ("md", "nmd"):
        p = check_float("p", 2.0 if p is None else p, MIN_P, MAX_P)
    elif p is not None:
        raise ValueError(f"`p` must be None unless optimizer is 'md' or 'nmd'; got {p!r}")
    eps = DEFAULT_EPS[head] if eps is None else check_float("eps", eps, 0.0, 1.0)
    centred = DEFAULT_CENTRED if centred is None else centred
    if not isinstance(centred, (bool, np.bool_)):
        raise ValueError(f"`centred` must be True or False; got {centred!r}")
    return dict(optimizer=optimizer, p=p, eps=eps, centred=bool(centred),
                normalized=optimizer in ("ngd", "nmd"))


def _check_settings(prob: Problem, *, param, steps, lr, normalized, loss, record_every, m,
                    ridge, n_runs, optimizer=None, p=None, eps=None, centred=None):
    check_choice("param", param, PARAMS)
    check_choice("loss", loss, model.LOSSES)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    record_every = check_record_every(record_every, steps)
    lr = check_float("lr", lr, 0.0, 1e3, lo_open=True)
    rule = _check_optimizer(param=param, head=prob.head, normalized=normalized,
                            optimizer=optimizer, p=p, eps=eps, centred=centred)
    m = prob.d if m is None else check_int("m", m, 1, prob.d)
    ridge = RIDGE_EPS if ridge is None else check_float("ridge", ridge, 0.0, 1.0)
    k = steps // record_every + 1
    total = limits.record_floats(n=prob.n, T=prob.T, d=prob.d, steps=steps,
                                 record_every=record_every, runs=n_runs, queries=prob.queries)
    if total > MAX_RECORD_FLOATS:
        per = total // (n_runs * k)
        most = max(1, MAX_RECORD_FLOATS // (n_runs * per) - 1)
        raise ValueError(
            f"`record_every` must keep the recorded history under {MAX_RECORD_FLOATS:,} "
            f"numbers; got {record_every} ({n_runs} runs × {k} records × {per} numbers). "
            f"Record every {math.ceil(steps / most)} steps or fewer runs.")
    return dict(param=param, steps=steps, lr=lr, loss=loss, record_every=record_every, m=m,
                ridge=ridge, **rule)


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


def _check_probs(probs) -> list:
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
    return probs


def _inits(probs, init, *, param: str, seed: int, m: int) -> list:
    B, p0 = len(probs), probs[0]
    if init is None:
        return [default_init(p, param, seed=seed, m=m, index=b) for b, p in enumerate(probs)]
    if isinstance(init, np.ndarray) and param == "W" and init.ndim == 3:
        init = list(init)
    if not isinstance(init, (list, tuple)) or len(init) != B:
        raise ValueError(f"`init` must be None or a list of {B} initializations; "
                         f"got {type(init).__name__}")
    return [_check_init(a, p0, param, m, name=f"init[{b}]") for b, a in enumerate(init)]


def train(prob: Problem, *, param: str = "W", steps: int = 2000, lr: float = 0.1,
          normalized: bool = True, loss: str = "logistic", init=None, seed: int = 0,
          record_every: int = 1, m: int | None = None, ridge: float | None = None,
          saturation_tol: float | None = None, optimizer: str | None = None,
          p: float | None = None, eps: float | None = None,
          centred: bool | None = None) -> Trajectory:
    """Run GD on one problem. See `train_batch` for the arguments."""
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    return train_batch([prob], param=param, steps=steps, lr=lr, normalized=normalized,
                       loss=loss, init=None if init is None else [init], seed=seed,
                       record_every=record_every, m=m, ridge=ridge,
                       saturation_tol=saturation_tol, optimizer=optimizer, p=p, eps=eps,
                       centred=centred)[0]


def train_batch(probs, *, param: str = "W", steps: int = 2000, lr: float = 0.1,
                normalized: bool = True, loss: str = "logistic", init=None, seed: int = 0,
                record_every: int = 1, m: int | None = None, ridge: float | None = None,
                saturation_tol: float | None = None, devices=None,
                optimizer: str | None = None, p: float | None = None, eps: float | None = None,
                centred: bool | None = None) -> Trajectory:
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
        saturation_tol: threshold of `Trajectory.saturated_at`; None: where a run with
            these gradient settings stops (`trajectory.saturation_tol_for`: 1e-300 for the
            exact default, 1e-13 for the authors' gradient).
        devices: the JAX devices to spread the runs over (default: all of them). One device
            runs the whole batch there (sweeps deal fixed-size chunks to devices this way).
        optimizer: the update rule, one of `optimizers.OPTIMIZERS` ("gd", "ngd", "polyak",
            "md", "nmd", "sign", "spectral"; for "KQ" gd/ngd/polyak/sign); default "ngd"
            ("gd" when normalized=False). Traced: switching rules does not recompile.
        p: the mirror exponent of "md"/"nmd" (default 2: GD/NGD), 1.01 … 100.
        eps: ε added to the normalizer of "ngd"/"nmd"; None: `optimizers.DEFAULT_EPS`: 0 for
            the linear head, the exact normalized step (a zero gradient takes no step); 2⁻⁵²,
            the authors', for nonlinear heads (the step shrinks once ‖∇L‖ ≲ 1e-16; an exact
            normalized step oscillates in their finite part W^fin).
        centred: differentiate the centred attention, exact far into saturation
            (docs/followups.md §4b); None: `optimizers.DEFAULT_CENTRED` = True. False is the
            plain autodiff of the authors' code. `**optimizers.AUTHORS_GRADIENT` gives both
            of the authors' settings (to reproduce their figures).

    Returns:
        A batched `Trajectory` (index it for single runs).

    Long because its docstring documents every option of the public entry point.
    """
    probs = _check_probs(probs)
    p0, B = probs[0], len(probs)
    cfg = _check_settings(p0, param=param, steps=steps, lr=lr, normalized=normalized,
                          loss=loss, record_every=record_every, m=m, ridge=ridge, n_runs=B,
                          optimizer=optimizer, p=p, eps=eps, centred=centred)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    if saturation_tol is None:
        saturation_tol = saturation_tol_for(centred=cfg["centred"], eps=cfg["eps"])
    check_float("saturation_tol", saturation_tol, 0.0, 1.0)
    m = cfg["m"]
    inits = _inits(probs, init, param=param, seed=seed, m=m)
    data, params0 = place(*padded_batch(probs, inits, param=param, m=m), devices)
    f64 = lambda x: jnp.asarray(x, jnp.float64)   # noqa: E731
    hyper = Hyper(lr=f64(cfg["lr"]), p=f64(cfg["p"] or 2.0), eps=f64(cfg["eps"]),
                  cap=f64(np.inf), gap=f64(0.0), max_step=f64(10.0 * cfg["lr"]))
    recs, final, bad_at = simulate(
        params0, data, hyper, f64(cfg["ridge"]), jnp.asarray(cfg["record_every"], jnp.int64),
        rule=cfg["optimizer"], param=param, head=p0.head, loss=loss, centred=cfg["centred"],
        n_records=steps // cfg["record_every"])
    settings = dict(cfg, seed=seed, saturation_tol=float(saturation_tol), n=p0.n, T=p0.T,
                    d=p0.d, head=p0.head, queries=p0.queries, attention=p0.attention, runs=B)
    return _unpad(p0, B, recs, final, bad_at, settings)


def _unpad(p0: Problem, B: int, recs, final, bad_at, settings: dict) -> Trajectory:
    """The engine's padded, record-major output as a batched Trajectory of B real runs."""
    n, T, d = p0.shape
    m = settings["m"]
    Wr, S, L, G = (np.moveaxis(np.asarray(a), 1, 0)[:B] for a in recs)   # (B, k, ...) views
    K_real = 1 if p0.queries == "single" else T
    W = Wr[:, :, :d, :d]
    S = S[:, :, :n, :K_real, :T]
    if p0.queries == "single":
        S = S[:, :, :, 0, :]
    Kf = Qf = None
    if settings["param"] == "KQ":
        Kf = np.asarray(final[0])[:B, :d, :m]
        Qf = np.asarray(final[1])[:B, :d, :m]
    return Trajectory(W=W, probs=S, loss=L, grad_norm=G,
                      steps=np.arange(0, settings["steps"] + 1, settings["record_every"]),
                      K=Kf, Q=Qf, overflow_at=np.asarray(bad_at)[:B], settings=settings,
                      backend=jax.default_backend(), batched=True)
