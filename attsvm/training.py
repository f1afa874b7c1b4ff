"""Gradient descent on one-layer attention: the public entry points `train` and
`train_batch`, their validation and the default initialization.

The update rule and the objective are in `engine` (the only place with `jax.jit`), the
record in `trajectory`, padding and device placement in `batching`. Normalized GD is the
paper's optimizer (arXiv 2308.16898 §2); the (K, Q)-parameterization's objective carries
the ridge ε(‖K‖_F² + ‖Q‖_F²), ε = `ridge` (docs/theory.md §A.1). Weight decay λ is the same
term written as λ/2 (‖K‖_F² + ‖Q‖_F²) (arXiv 2410.23819): `weight_decay=λ` sets ε = λ/2,
and the default ε = float64 machine epsilon is the vanishing-λ limit λ = 2ε.
`init_scale`/`init_kind` draw small or structured (K, Q) starts (`scaled_init`;
docs/staircase.md).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import limits, model
from .batching import cpu_split, padded_batch, place, repeat_last, span_basis
from .engine import compile_count, simulate, simulate_split
from .limits import SPAN_RULES, span_pays
from .model import jax, jnp
from .optimizers import DEFAULT_CENTRED, DEFAULT_EPS, KQ_OPTIMIZERS, MAX_P, MIN_P, OPTIMIZERS, Hyper
from .problems import Problem, check_choice, check_float, check_int, check_record_every
from .trajectory import Trajectory, saturation_tol_for

PARAMS = ("W", "KQ")
RIDGE_EPS = float(np.finfo(np.float64).eps)
MAX_STEPS = 1_000_000
MAX_RECORD_FLOATS = limits.MAX_RECORD_FLOATS  # ≈ 480 MB of recorded float64 per call
# The keyword options of `train` that a run's settings record (all but the inits `init`, `init_v`).
TRAIN_OPTIONS = (
    "param",
    "steps",
    "lr",
    "normalized",
    "loss",
    "seed",
    "record_every",
    "m",
    "ridge",
    "saturation_tol",
    "optimizer",
    "p",
    "eps",
    "centred",
    "train_v",
    "init_scale",
    "init_kind",
    "weight_decay",
)
JOINT_OPTIMIZERS = ("gd", "ngd", "polyak", "md", "nmd")  # rules that train the head too
INIT_KINDS = ("gaussian", "diagonal", "aligned")
MAX_INIT_SCALE = 10.0


def backend() -> dict:
    """Which JAX backend runs GD: {"platform", "devices", "x64"}."""
    devs = jax.devices()
    return {
        "platform": jax.default_backend(),
        "devices": len(devs),
        "device_kind": devs[0].device_kind,
        "x64": bool(jax.config.jax_enable_x64),
    }


def _check_optimizer(*, param, head, normalized, optimizer, p, eps, centred) -> dict:
    """The update rule: `optimizer` (default: "ngd", or "gd" with normalized=False), its
    mirror exponent p (md/nmd only), the normalizer's ε and the centred gradient."""
    if not isinstance(normalized, (bool, np.bool_)):
        raise ValueError(f"`normalized` must be True or False; got {normalized!r}")
    if optimizer is None:
        optimizer = "ngd" if normalized else "gd"
    check_choice("optimizer", optimizer, OPTIMIZERS if param == "W" else KQ_OPTIMIZERS)
    if optimizer == "polyak" and head != "linear":
        raise ValueError(
            f"`optimizer` 'polyak' needs the loss infimum L*, known for the "
            f"linear head only; got head={head!r}"
        )
    if optimizer in ("md", "nmd"):
        p = check_float("p", 2.0 if p is None else p, MIN_P, MAX_P)
    elif p is not None:
        raise ValueError(f"`p` must be None unless optimizer is 'md' or 'nmd'; got {p!r}")
    eps = DEFAULT_EPS[head] if eps is None else check_float("eps", eps, 0.0, 1.0)
    centred = DEFAULT_CENTRED if centred is None else centred
    if not isinstance(centred, (bool, np.bool_)):
        raise ValueError(f"`centred` must be True or False; got {centred!r}")
    return dict(
        optimizer=optimizer,
        p=p,
        eps=eps,
        centred=bool(centred),
        normalized=optimizer in ("ngd", "nmd"),
    )


def ridge_of(param: str, ridge, weight_decay) -> float:
    """The engine's ridge ε of ε (‖K‖² + ‖Q‖²): `ridge`, or λ/2 for `weight_decay` = λ (one
    term, two spellings: λ/2 (‖K‖² + ‖Q‖²) is weight decay λ, arXiv 2410.23819); default
    float64 machine epsilon (the vanishing ridge, λ = 2ε). Both may be given when they agree
    (ε = λ/2 exactly: a run's recorded settings carry both)."""
    if weight_decay is None:
        return RIDGE_EPS if ridge is None else check_float("ridge", ridge, 0.0, 1.0)
    if param != "KQ":
        raise ValueError(
            f"`weight_decay` must be None for param='W' (it acts on the factors "
            f"K, Q); got {weight_decay!r}"
        )
    eps = check_float("weight_decay", weight_decay, 0.0, 2.0) / 2.0
    if ridge is not None and check_float("ridge", ridge, 0.0, 1.0) != eps:
        raise ValueError(
            f"`weight_decay` must be None or 2·ridge when `ridge` is given "
            f"(ridge ε = λ/2 is the same term); got ridge={ridge!r}, "
            f"weight_decay={weight_decay!r}"
        )
    return eps


def _check_settings(
    prob: Problem,
    *,
    param,
    steps,
    lr,
    normalized,
    loss,
    record_every,
    m,
    ridge,
    n_runs,
    optimizer=None,
    p=None,
    eps=None,
    centred=None,
    weight_decay=None,
):
    check_choice("param", param, PARAMS)
    check_choice("loss", loss, model.LOSSES)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    record_every = check_record_every(record_every, steps)
    lr = check_float("lr", lr, 0.0, 1e3, lo_open=True)
    rule = _check_optimizer(
        param=param,
        head=prob.head,
        normalized=normalized,
        optimizer=optimizer,
        p=p,
        eps=eps,
        centred=centred,
    )
    m = prob.d if m is None else check_int("m", m, 1, prob.d)
    ridge = ridge_of(param, ridge, weight_decay)
    _check_record_floats(prob, steps, record_every, n_runs)
    return dict(
        param=param,
        steps=steps,
        lr=lr,
        loss=loss,
        record_every=record_every,
        m=m,
        ridge=ridge,
        weight_decay=2.0 * ridge if param == "KQ" else None,
        **rule,
    )


def _check_record_floats(prob: Problem, steps: int, record_every: int, n_runs: int) -> None:
    """Refuse a recorded history over `MAX_RECORD_FLOATS` numbers, naming the `record_every`
    that fits."""
    k = steps // record_every + 1
    total = limits.record_floats(
        n=prob.n,
        T=prob.T,
        d=prob.d,
        steps=steps,
        record_every=record_every,
        runs=n_runs,
        queries=prob.queries,
    )
    if total > MAX_RECORD_FLOATS:
        per = total // (n_runs * k)
        most = max(1, MAX_RECORD_FLOATS // (n_runs * per) - 1)
        raise ValueError(
            f"`record_every` must keep the recorded history under {MAX_RECORD_FLOATS:,} "
            f"numbers; got {record_every} ({n_runs} runs × {k} records × {per} numbers). "
            f"Record every {math.ceil(steps / most)} steps or fewer runs."
        )


def default_init(
    prob: Problem, param: str = "W", *, seed: int = 0, m: int | None = None, index: int = 0
):
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


def gradient_at_zero(prob: Problem, loss: str = "logistic") -> np.ndarray:
    """∇L(W) at W = 0 (d, d): uniform attention, the direction small-init GD learns first
    (arXiv 2306.07042: the top singular pair of −∇L(0) takes off first)."""
    from .batching import pad_data

    data = model.Data(**{k: jnp.asarray(v) for k, v in pad_data(prob, prob.shape).items()})
    g = jax.grad(model.risk)(jnp.zeros((prob.d, prob.d)), data, prob.head, loss)
    return np.asarray(g)


def scaled_init(
    prob: Problem,
    *,
    init_scale: float,
    init_kind: str = "gaussian",
    m: int | None = None,
    seed: int = 0,
    index: int = 0,
    loss: str = "logistic",
):
    """(K₀, Q₀), each (d, m), at scale α = `init_scale` (docs/staircase.md §1):

    - "gaussian": K₀, Q₀ = α·N(0, 1) entries, drawn by `numpy.random.default_rng([seed,
      index])` (the small-init regime of arXiv 2306.07042);
    - "diagonal": K₀ = Q₀ = α·I (d × m, ones on the diagonal): the diagonal start of
      arXiv 2403.08699 (their theorem also keeps K, Q diagonal while training; GD here
      trains full matrices, so off-diagonal entries move as the gradient asks);
    - "aligned": K₀ = α·U_m, Q₀ = α·V_m with −∇L(0) = U S Vᵀ (its top m singular pairs):
      the factors' singular spaces aligned with the data's at the start, and balanced
      (K₀ᵀK₀ = Q₀ᵀQ₀ = α² I), our reading of the aligned case of arXiv 2403.08699.
    """
    d = prob.d
    m = d if m is None else m
    check_choice("init_kind", init_kind, INIT_KINDS)
    a = check_float("init_scale", init_scale, 0.0, MAX_INIT_SCALE, lo_open=True)
    if init_kind == "gaussian":
        rng = np.random.default_rng([seed, index])
        return a * rng.standard_normal((d, m)), a * rng.standard_normal((d, m))
    if init_kind == "diagonal":
        return a * np.eye(d, m), a * np.eye(d, m)
    U, _, Vt = np.linalg.svd(-gradient_at_zero(prob, loss))
    return a * U[:, :m], a * Vt[:m].T


def _check_init(init, prob: Problem, param: str, m: int, name="init"):
    d = prob.d
    if param == "W":
        W = np.asarray(init, dtype=np.float64)
        if W.shape != (d, d):
            raise ValueError(
                f"`{name}` must be a ({d}, {d}) array for param='W'; got shape {W.shape}"
            )
        parts = (W,)
    else:
        if not isinstance(init, (tuple, list)) or len(init) != 2:
            raise ValueError(
                f"`{name}` must be a pair (K, Q) of ({d}, {m}) arrays for param='KQ'; "
                f"got {type(init).__name__}"
            )
        parts = tuple(np.asarray(a, dtype=np.float64) for a in init)
        if any(a.shape != (d, m) for a in parts):
            raise ValueError(
                f"`{name}` must be a pair (K, Q) of ({d}, {m}) arrays for param='KQ'; "
                f"got shapes {[a.shape for a in parts]}"
            )
    if not all(np.all(np.isfinite(a)) for a in parts):
        raise ValueError(f"`{name}` must be finite (no NaN or inf); got non-finite entries")
    return parts[0] if param == "W" else parts


def _check_probs(probs) -> list:
    try:
        probs = list(probs)
    except TypeError:
        raise ValueError(
            f"`probs` must be a sequence of attsvm.Problem; got {type(probs).__name__}"
        ) from None
    if not probs or not all(isinstance(p, Problem) for p in probs):
        raise ValueError("`probs` must be a non-empty sequence of attsvm.Problem")
    p0 = probs[0]
    for p in probs[1:]:
        if (p.shape, p.head, p.queries) != (p0.shape, p0.head, p0.queries):
            raise ValueError(
                "`probs` must share shape, head and query mode; got "
                f"{p0.shape}/{p0.head}/{p0.queries} and "
                f"{p.shape}/{p.head}/{p.queries}"
            )
    return probs


def _inits(
    probs,
    init,
    *,
    param: str,
    seed: int,
    m: int,
    init_scale=None,
    init_kind=None,
    loss: str = "logistic",
) -> list:
    B, p0 = len(probs), probs[0]
    if init_scale is not None or init_kind is not None:
        if param != "KQ":
            raise ValueError(
                f"`init_scale` must be None for param='W' (it scales the "
                f"factors K, Q); got {init_scale!r}"
            )
        if init is not None:
            raise ValueError(
                "`init` must be None when `init_scale`/`init_kind` is given; "
                f"got {type(init).__name__}"
            )
        if init_scale is None:
            raise ValueError(
                f"`init_scale` must be a number in (0, {MAX_INIT_SCALE:g}] "
                f"when `init_kind` is given; got None"
            )
        return [
            scaled_init(
                p,
                init_scale=init_scale,
                init_kind=init_kind or "gaussian",
                m=m,
                seed=seed,
                index=b,
                loss=loss,
            )
            for b, p in enumerate(probs)
        ]
    if init is None:
        return [default_init(p, param, seed=seed, m=m, index=b) for b, p in enumerate(probs)]
    if isinstance(init, np.ndarray) and param == "W" and init.ndim == 3:
        init = list(init)
    if not isinstance(init, (list, tuple)) or len(init) != B:
        raise ValueError(
            f"`init` must be None or a list of {B} initializations; got {type(init).__name__}"
        )
    return [_check_init(a, p0, param, m, name=f"init[{b}]") for b, a in enumerate(init)]


def train(
    prob: Problem,
    *,
    param: str = "W",
    steps: int = 2000,
    lr: float = 0.1,
    normalized: bool = True,
    loss: str = "logistic",
    init=None,
    seed: int = 0,
    record_every: int = 1,
    m: int | None = None,
    ridge: float | None = None,
    saturation_tol: float | None = None,
    optimizer: str | None = None,
    p: float | None = None,
    eps: float | None = None,
    centred: bool | None = None,
    train_v: bool = False,
    init_v=None,
    init_scale: float | None = None,
    init_kind: str | None = None,
    weight_decay: float | None = None,
) -> Trajectory:
    """Run GD on one problem. See `train_batch` for the arguments."""
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    return train_batch(
        [prob],
        param=param,
        steps=steps,
        lr=lr,
        normalized=normalized,
        loss=loss,
        init=None if init is None else [init],
        seed=seed,
        record_every=record_every,
        m=m,
        ridge=ridge,
        saturation_tol=saturation_tol,
        optimizer=optimizer,
        p=p,
        eps=eps,
        centred=centred,
        train_v=train_v,
        init_v=None if init_v is None else [init_v],
        init_scale=init_scale,
        init_kind=init_kind,
        weight_decay=weight_decay,
    )[0]


def train_batch(
    probs,
    *,
    param: str = "W",
    steps: int = 2000,
    lr: float = 0.1,
    normalized: bool = True,
    loss: str = "logistic",
    init=None,
    seed: int = 0,
    record_every: int = 1,
    m: int | None = None,
    ridge: float | None = None,
    saturation_tol: float | None = None,
    devices=None,
    optimizer: str | None = None,
    p: float | None = None,
    eps: float | None = None,
    centred: bool | None = None,
    train_v: bool = False,
    init_v=None,
    init_scale: float | None = None,
    init_kind: str | None = None,
    weight_decay: float | None = None,
) -> Trajectory:
    """Run GD on several problems of equal shape at once (one compiled, vmapped program);
    returns a batched `Trajectory` (index it for single runs).

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
        ridge: ε of the (K, Q) ridge ε (‖K‖² + ‖Q‖²); default float64's epsilon; 0 allowed.
        weight_decay: λ ∈ [0, 2] ("KQ" only): the same term written λ/2 (‖K‖² + ‖Q‖²),
            i.e. ε = λ/2 (arXiv 2410.23819); give `ridge` or `weight_decay`, not both.
        init_scale, init_kind: ("KQ" only, with init=None) start from `scaled_init`: scale
            α ∈ (0, 10] and kind "gaussian" (default; α·N(0, 1), index b of the batch drawn
            by `default_rng([seed, b])`), "diagonal" (α·I) or "aligned" (α times −∇L(0)'s
            singular vectors).
        saturation_tol: threshold of `Trajectory.saturated_at`; None: where a run with
            these gradient settings stops (`trajectory.saturation_tol_for`: 1e-300 for the
            exact default, 1e-13 for the authors' gradient).
        devices: the JAX devices to spread the runs over (default: every accelerator; on the
            CPU, a batch of 32 runs or more is split into one block per CPU device, one per
            core: `batching.cpu_split`). One device runs it all (sweeps deal chunks this way).
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
        train_v: also train the linear head v (joint training, arXiv 2306.13596 §2 and
            2410.14581): v is one more tensor of the rule, with its own normalized step for
            ngd/nmd (and, for md/nmd, the same p); rules gd, ngd, polyak (L* = 0), md, nmd.
            The attention keeps the exact centred gradient. `Trajectory.v` records v.
        init_v: with train_v, B starting heads (d,) (zero allowed); None: the problems' v.

    Long because its docstring documents every option of the public entry point.
    """
    probs = _check_probs(probs)
    gd = dict(param=param, steps=steps, lr=lr, normalized=normalized, loss=loss, m=m, ridge=ridge)
    rule = dict(optimizer=optimizer, p=p, eps=eps, centred=centred, weight_decay=weight_decay)
    cfg = _check_settings(probs[0], **gd, **rule, record_every=record_every, n_runs=len(probs))
    start = dict(init=init, seed=seed, init_scale=init_scale, init_kind=init_kind)
    return _train_checked(probs, cfg, start, saturation_tol, devices, train_v, init_v)


def _train_checked(probs, cfg: dict, start: dict, saturation_tol, devices, train_v, init_v):
    """`train_batch` once the problems and the GD settings `cfg` are checked: check the start
    (init, seed, init_scale, init_kind in `start`), pad, run and unpad."""
    p0, B, m, param = probs[0], len(probs), cfg["m"], cfg["param"]
    init_scale, init_kind = start["init_scale"], start["init_kind"]
    seed = check_int("seed", start["seed"], 0, 2**63 - 1)
    if saturation_tol is None:
        saturation_tol = saturation_tol_for(centred=cfg["centred"], eps=cfg["eps"])
    check_float("saturation_tol", saturation_tol, 0.0, 1.0)
    inits = _inits(
        probs,
        start["init"],
        param=param,
        seed=seed,
        m=m,
        init_scale=init_scale,
        init_kind=init_kind,
        loss=cfg["loss"],
    )
    train_v = _check_train_v(probs, train_v, cfg["optimizer"])
    stacked, params0 = _padded(probs, inits, init_v, train_v=train_v, param=param, m=m)
    recs, final, bad_at = _run_form(cfg, stacked, params0, devices, head=p0.head, train_v=train_v)
    settings = dict(
        cfg,
        train_v=train_v,
        seed=seed,
        init_scale=init_scale,
        init_kind=init_kind,
        saturation_tol=float(saturation_tol),
        n=p0.n,
        T=p0.T,
        d=p0.d,
        head=p0.head,
        queries=p0.queries,
        attention=p0.attention,
        runs=B,
    )
    return _unpad(p0, B, recs, final, bad_at, settings)


def _padded(probs, inits, init_v, *, train_v: bool, param: str, m: int):
    """The padded batch and its starting parameters, (W or (K, Q)) or, with train_v,
    ((W or (K, Q)), v)."""
    stacked, params0 = padded_batch(probs, inits, param=param, m=m)
    if train_v:
        params0 = (params0, _init_heads(probs, init_v, stacked["v"].shape[-1]))
    elif init_v is not None:
        raise ValueError(f"`init_v` must be None unless train_v=True; got {type(init_v).__name__}")
    return stacked, params0


def _span_form(cfg: dict, stacked: dict, params0, *, train_v: bool):
    """The batch in the span form (`batching.span_basis`) when it applies (the W
    parameterization, a rule of `SPAN_RULES`) and pays: (stacked with R and a0, params0 with
    W replaced by its coordinates e = 0, (V, W0) to map records back), else unchanged and
    None. The same GD in exact arithmetic; tests/test_span.py holds it to the plain form."""
    W0 = params0[0] if train_v else params0
    if cfg["param"] != "W" or cfg["optimizer"] not in SPAN_RULES:
        return stacked, params0, None
    B, n, K, T = stacked["mask"].shape
    if not span_pays(n, K, T, W0.shape[-1], cfg["record_every"], cfg["steps"], B):
        return stacked, params0, None
    R, a0, V = span_basis(stacked, W0)
    e0 = np.zeros((B, V.shape[1]))
    return dict(stacked, R=R, a0=a0), ((e0, params0[1]) if train_v else e0), (V, W0)


def _run_form(cfg: dict, stacked: dict, params0, devices, *, head: str, train_v: bool):
    """`_run` in the span form where it applies and pays (`_span_form`), records mapped
    back to W; else `_run` itself."""
    B = len(stacked["X"])
    stacked, params0, span = _span_form(cfg, stacked, params0, train_v=train_v)
    recs, final, bad_at = _run(cfg, stacked, params0, devices, head=head, train_v=train_v)
    if span is not None:
        recs, final = _from_span(span, recs, final, B, train_v=train_v)
    return recs, final, bad_at


def _from_span(span, recs, final, B: int, *, train_v: bool):
    """The span form's records and final params with W = W0 + Σ_j e_j V_j again."""
    V, W0 = span
    d = W0.shape[-1]

    def to_W(e):  # e (B, k, p) → W (B, k, d, d)
        return (e @ V + W0.reshape(len(W0), 1, d * d)).reshape(len(W0), -1, d, d)

    e_recs = np.moveaxis(np.asarray(recs[0]), 1, 0)[:B]
    W_recs = np.moveaxis(to_W(e_recs), 0, 1)  # record-major view, as the engine's
    ef = np.asarray(final[0] if train_v else final)[:B]
    Wf = to_W(ef[:, None])[:, 0]
    return (W_recs, *recs[1:]), ((Wf, final[1]) if train_v else Wf)


def _run(cfg: dict, stacked: dict, params0, devices, *, head: str, train_v: bool):
    """The padded batch through the engine: placed on `devices` (`batching.place`), or
    split over the CPU devices (`batching.cpu_split`, `_simulate_parts`)."""
    split = cpu_split(len(stacked["X"]), devices)
    if split is not None:
        return _simulate_parts(cfg, stacked, params0, split, head=head, train_v=train_v)
    data, params0 = place(stacked, params0, devices)
    return _simulate(cfg, params0, data, head=head, train_v=train_v)


def _simulate_parts(cfg: dict, stacked: dict, params0, devices, *, head: str, train_v: bool):
    """`_simulate` split over CPU devices (`batching.cpu_split`): one program
    (`engine.simulate_split`), each device running an equal block of runs (the last run
    repeated to fill the last block). One thread per block then copies its records into one
    history, so the cores share the copy too (240 MB for the benchmark's workload; copied by
    one thread it costs 0.1–0.3 s more, most of it page faults). The history is
    allocated before the program is called and, when the call traces a new program, its
    pages are touched by one of those threads meanwhile, so that the faults overlap the
    compilation (docs/performance.md). Returns numpy records
    (record-major), final params and bad_at, as `_simulate`'s arrays."""
    B = len(stacked["X"])
    stacked, params0 = repeat_last(stacked, params0, -(-B // len(devices)) * len(devices))
    mesh = jax.sharding.Mesh(np.array(devices), ("runs",))
    runs = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("runs"))
    args, static = _engine_args(
        cfg,
        jax.device_put(params0, runs),
        jax.device_put(model.Data(**stacked), runs),
        head=head,
        train_v=train_v,
    )
    traces = compile_count()
    shapes = simulate_split.eval_shape(*args, mesh=mesh, **static)[0]  # traced once, reused
    out = [np.empty(a.shape, a.dtype) for a in shapes]
    touch = compile_count() > traces  # a warm call does not: beside the program, 10 % slower
    with ThreadPoolExecutor(len(devices)) as pool:
        touched = pool.submit(lambda: [o.fill(0) for o in out] if touch else None)  # no GIL
        recs, final, bad_at = simulate_split(*args, mesh=mesh, **static)
        # The shard lists are taken here, once, and the threads only read them. A copying
        # thread once found a record with fewer shards than devices (an IndexError, in one of
        # 20 fresh processes of a script making the bench's engine calls; not reproduced in
        # 300 calls of that workload or in 3000 two-thread listings of fresh sharded
        # outputs), so a record whose list is not one shard per device is copied whole by
        # JAX instead.
        shards = [a.addressable_shards for a in recs]
        whole = [len(s) != len(devices) for s in shards]
        touched.result()
        for o, a, w in zip(out, recs, whole, strict=True):
            if w:
                o[...] = np.asarray(a)

        def copy(j):
            for o, s, w in zip(out, shards, whole, strict=True):
                if not w:
                    o[s[j].index] = np.asarray(s[j].data)

        list(pool.map(copy, range(len(devices))))
    return tuple(out), jax.tree_util.tree_map(np.asarray, final), np.asarray(bad_at)


def _engine_args(cfg: dict, params0, data, *, head: str, train_v: bool):
    """The engine's arguments and static settings for checked settings `cfg`: traced
    numbers, static structure (`engine.simulate`, `engine.simulate_split`)."""
    f64 = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    hyper = Hyper(
        lr=f64(cfg["lr"]),
        p=f64(cfg["p"] or 2.0),
        eps=f64(cfg["eps"]),
        cap=f64(np.inf),
        gap=f64(0.0),
        max_step=f64(10.0 * cfg["lr"]),
    )
    static = dict(
        rule=cfg["optimizer"],
        param=cfg["param"],
        head=head,
        loss=cfg["loss"],
        centred=cfg["centred"],
        n_records=cfg["steps"] // cfg["record_every"],
        train_v=train_v,
    )
    return (
        params0,
        data,
        hyper,
        f64(cfg["ridge"]),
        jnp.asarray(cfg["record_every"], jnp.int64),
    ), static


def _simulate(cfg: dict, params0, data, *, head: str, train_v: bool):
    """The engine's call (`engine.simulate`) for checked settings `cfg`."""
    args, static = _engine_args(cfg, params0, data, head=head, train_v=train_v)
    return simulate(*args, **static)


def _check_train_v(probs, train_v, optimizer: str) -> bool:
    if not isinstance(train_v, (bool, np.bool_)):
        raise ValueError(f"`train_v` must be True or False; got {train_v!r}")
    if train_v and probs[0].head != "linear":
        raise ValueError(f"`train_v` needs the linear head; got head={probs[0].head!r}")
    if train_v and optimizer not in JOINT_OPTIMIZERS:
        raise ValueError(
            f"`optimizer` must be one of {list(JOINT_OPTIMIZERS)} with "
            f"train_v=True; got {optimizer!r}"
        )
    return bool(train_v)


def _init_heads(probs, init_v, db: int) -> np.ndarray:
    """(B, db) starting heads, zero-padded: `init_v` (B vectors (d,)) or each problem's v."""
    B, d = len(probs), probs[0].d
    if init_v is None:
        init_v = [p.v for p in probs]
    if not isinstance(init_v, (list, tuple)) or len(init_v) != B:
        raise ValueError(
            f"`init_v` must be None or a list of {B} vectors (d,); got {type(init_v).__name__}"
        )
    out = np.zeros((B, db))
    for b, a in enumerate(init_v):
        try:
            a = np.asarray(a, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"`init_v[{b}]` must be a ({d},) array of numbers") from None
        if a.shape != (d,):
            raise ValueError(f"`init_v[{b}]` must be a ({d},) array; got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"`init_v[{b}]` must be finite (no NaN or inf)")
        out[b, :d] = a
    return out


def _unpad(p0: Problem, B: int, recs, final, bad_at, settings: dict) -> Trajectory:
    """The engine's padded, record-major output as a batched Trajectory of B real runs."""
    n, T, d = p0.shape
    m = settings["m"]
    Wr, S, L, G = (np.moveaxis(np.asarray(a), 1, 0)[:B] for a in recs[:4])  # (B, k, ...)
    v = np.moveaxis(np.asarray(recs[4]), 1, 0)[:B, :, :d] if len(recs) > 4 else None
    if v is not None:
        final = final[0]
    K_real = 1 if p0.queries == "single" else T
    W = Wr[:, :, :d, :d]
    S = S[:, :, :n, :K_real, :T]
    if p0.queries == "single":
        S = S[:, :, :, 0, :]
    Kf = Qf = None
    if settings["param"] == "KQ":
        Kf = np.asarray(final[0])[:B, :d, :m]
        Qf = np.asarray(final[1])[:B, :d, :m]
    return Trajectory(
        W=W,
        probs=S,
        loss=L,
        grad_norm=G,
        steps=np.arange(0, settings["steps"] + 1, settings["record_every"]),
        K=Kf,
        Q=Qf,
        overflow_at=np.asarray(bad_at)[:B],
        settings=settings,
        backend=jax.default_backend(),
        batched=True,
        v=v,
    )
