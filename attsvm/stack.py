"""Gradient descent on a stack of attention layers (`attsvm.hierarchy`, docs/hierarchy.md):
`train_stack` and its record `StackRun`.

One compiled program of the GD engine (`engine.simulate` with head "stack"), vmapped over
runs, placed like every other batch (`training._run`: the accelerators when present, CPU
blocks per core for large batches). Each head W^{l,h} (or each factor K^{l,h}, Q^{l,h}) is
its own leaf of the update rule, so normalized GD moves each head by its own gradient over
that gradient's Frobenius norm, as the factors of K Qᵀ are moved today (docs/theory.md §A.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from . import limits, model
from .optimizers import DEFAULT_CENTRED, KQ_OPTIMIZERS, MAX_P, MIN_P, OPTIMIZERS
from .problems import Problem, check_choice, check_float, check_int, check_record_every
from .training import MAX_STEPS, PARAMS, _run, ridge_of

MAX_LAYERS, MAX_HEADS = 6, 8
STACK_OPTIMIZERS = tuple(o for o in OPTIMIZERS if o != "polyak")  # L* of a stack: unknown
STACK_KQ_OPTIMIZERS = tuple(o for o in KQ_OPTIMIZERS if o != "polyak")
PER_RUN = ("W", "attention", "loss", "grad_norm", "final", "overflow_at")


@dataclass(frozen=True, eq=False)
class StackRun:
    """Records of GD on a stack after steps 0, r, 2r, …, `steps` (a batch adds a leading
    run axis B to every per-run array).

    Attributes:
        W: (k, L, H, d, d) every head's W^{l,h} (K Qᵀ for the (K, Q)-parameterization).
        attention: (k, L, H, n, T, T) S^{l,h}[t, s]: query row t's weights over keys s.
        loss: (k,) the risk L(W) (without the (K, Q) ridge); grad_norm: (k,) ‖∇‖ over all
            heads of the objective GD followed.
        steps: (k,) iteration numbers.
        final: the parameters after the last step, W (L, H, d, d) or a pair (K, Q) of
            (L, H, d, m): pass it as `init` to continue exactly.
        overflow_at: the last finite step where GD stopped on overflow, -1 if none.
        values: (L, H, d, d) the value matrices U^{l,h}; settings: the call's settings.
    """

    W: np.ndarray
    attention: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    steps: np.ndarray
    final: object
    overflow_at: np.ndarray
    values: np.ndarray
    settings: dict = field(repr=False)
    batched: bool = False

    def __len__(self):
        if not self.batched:
            raise TypeError("a single run has no len(); StackRun.batched is False")
        return self.W.shape[0]

    def __getitem__(self, b) -> "StackRun":
        """Run b of a batch (int), or a smaller batch (slice, index array)."""
        if not self.batched:
            raise TypeError("index a batch of runs, not a single run")

        def take(a):
            if isinstance(a, tuple):
                return tuple(x[b] for x in a)
            return a[b]

        return replace(
            self,
            batched=not isinstance(b, (int, np.integer)),
            **{k: take(getattr(self, k)) for k in PER_RUN},
        )

    @property
    def final_params(self):
        return self.final

    @property
    def selections(self) -> np.ndarray:
        """(L, H, n, T) the key each query row selects at the end (argmax of its final
        attention row); (B, L, H, n, T) for a batch."""
        return np.take(self.attention, -1, axis=int(self.batched)).argmax(-1)


def values_default(layers: int, heads: int, d: int) -> np.ndarray:
    """The default value matrices: U^{l,h} = I / H, so every layer adds the average of its
    heads' attention outputs to the stream (with one head, the paper's identity value)."""
    return np.broadcast_to(np.eye(d) / heads, (layers, heads, d, d)).copy()


def random_values(layers: int, heads: int, d: int, seed: int = 0) -> np.ndarray:
    """U^{l,h} = O^{l,h} / H with O^{l,h} random orthogonal (QR of a Gaussian matrix, signs
    fixed by R's diagonal), drawn by `default_rng([seed, 1])`: heads whose values differ."""
    rng = np.random.default_rng([seed, 1])
    G = rng.standard_normal((layers, heads, d, d))
    Q, R = np.linalg.qr(G)
    return Q * np.sign(np.diagonal(R, axis1=-2, axis2=-1))[..., None, :] / heads


def stack_init(
    prob: Problem,
    layers: int,
    heads: int,
    *,
    param: str = "W",
    m: int | None = None,
    seed: int = 0,
    index: int = 0,
):
    """The default initialization of every head: entries U(−1/√d, 1/√d), as
    `training.default_init` (PyTorch's `nn.Linear`), drawn by `default_rng([seed, index])`
    in one call, layer-major: W (L, H, d, d), or K then Q (L, H, d, m). With one layer and
    one head, `default_init`'s very numbers."""
    d = prob.d
    m = d if m is None else m
    rng = np.random.default_rng([seed, index])
    b = 1.0 / math.sqrt(d)
    if param == "W":
        return rng.uniform(-b, b, (layers, heads, d, d))
    return rng.uniform(-b, b, (layers, heads, d, m)), rng.uniform(-b, b, (layers, heads, d, m))


def _check_probs(prob) -> tuple[list, bool]:
    batched = not isinstance(prob, Problem)
    probs = list(prob) if batched else [prob]
    if not probs or not all(isinstance(p, Problem) for p in probs):
        raise ValueError("`prob` must be an attsvm.Problem or a non-empty sequence of them")
    p0 = probs[0]
    for p in probs:
        if p.attention != "self" or p.queries != "single":
            raise ValueError(
                "`prob` must be a self-attention problem with one query token "
                f"(Z=None, queries='single'); got {p!r}"
            )
        if p.head != "linear" or p.lengths is not None:
            raise ValueError(
                "`prob` must have the linear head and no padded lengths; got "
                f"head={p.head!r}, lengths={'set' if p.lengths is not None else None}"
            )
        if (p.shape, p.query_index) != (p0.shape, p0.query_index):
            raise ValueError(
                "`prob` must share shape and query_index across the batch; got "
                f"{p0.shape}/{p0.query_index} and {p.shape}/{p.query_index}"
            )
    return probs, batched


def _as_array(name: str, a, shape) -> np.ndarray:
    try:
        arr = np.array(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be a numeric array of shape {shape}") from None
    if arr.shape != shape:
        raise ValueError(f"`{name}` must have shape {shape}; got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"`{name}` must be finite (no NaN or inf)")
    return arr


def _check_inits(init, B: int, batched: bool, *, param, L, H, d, m, probs, seed):
    shape = (L, H, d, d) if param == "W" else (L, H, d, m)
    if init is None:
        return [
            stack_init(p, L, H, param=param, m=m, seed=seed, index=b) for b, p in enumerate(probs)
        ]
    inits = list(init) if batched else [init]
    if len(inits) != B:
        raise ValueError(f"`init` must hold {B} initializations, one per problem; got {len(inits)}")
    out = []
    for b, a in enumerate(inits):
        name = f"init[{b}]" if batched else "init"
        if param == "W":
            out.append(_as_array(name, a, shape))
        else:
            if not isinstance(a, (tuple, list)) or len(a) != 2:
                raise ValueError(f"`{name}` must be a pair (K, Q) of {shape} arrays")
            out.append(tuple(_as_array(name, x, shape) for x in a))
    return out


def _check_record_floats(prob: Problem, layers, heads, steps, record_every, runs) -> None:
    """Refuse a stack's recorded history over `limits.MAX_RECORD_FLOATS` numbers, naming the
    `record_every` that fits."""
    total = limits.stack_record_floats(
        n=prob.n,
        T=prob.T,
        d=prob.d,
        layers=layers,
        heads=heads,
        steps=steps,
        record_every=record_every,
        runs=runs,
    )
    if total > limits.MAX_RECORD_FLOATS:
        k = steps // record_every + 1
        per = total // (runs * k)
        most = max(1, limits.MAX_RECORD_FLOATS // (runs * per) - 1)
        raise ValueError(
            f"`record_every` must keep the recorded history under "
            f"{limits.MAX_RECORD_FLOATS:,} numbers; got {record_every}. Record "
            f"every {math.ceil(steps / most)} steps or fewer runs."
        )


def check_stack_settings(
    prob: Problem,
    *,
    layers,
    heads,
    steps,
    lr,
    record_every,
    runs=1,
    param="W",
    m=None,
    loss="logistic",
    optimizer=None,
    normalized=True,
    p=None,
    eps=None,
    centred=None,
    ridge=None,
) -> dict:
    """The checked settings of `train_stack` (ValueError naming the bad one)."""
    layers = check_int("layers", layers, 1, MAX_LAYERS)
    heads = check_int("heads", heads, 1, MAX_HEADS)
    check_choice("param", param, PARAMS)
    check_choice("loss", loss, model.LOSSES)
    steps = check_int("steps", steps, 1, MAX_STEPS)
    record_every = check_record_every(record_every, steps)
    lr = check_float("lr", lr, 0.0, 1e3, lo_open=True)
    if not isinstance(normalized, (bool, np.bool_)):
        raise ValueError(f"`normalized` must be True or False; got {normalized!r}")
    optimizer = ("ngd" if normalized else "gd") if optimizer is None else optimizer
    check_choice("optimizer", optimizer, STACK_OPTIMIZERS if param == "W" else STACK_KQ_OPTIMIZERS)
    if optimizer in ("md", "nmd"):
        p = check_float("p", 2.0 if p is None else p, MIN_P, MAX_P)
    elif p is not None:
        raise ValueError(f"`p` must be None unless optimizer is 'md' or 'nmd'; got {p!r}")
    eps = 0.0 if eps is None else check_float("eps", eps, 0.0, 1.0)
    centred = DEFAULT_CENTRED if centred is None else centred
    if not isinstance(centred, (bool, np.bool_)):
        raise ValueError(f"`centred` must be True or False; got {centred!r}")
    m = prob.d if m is None else check_int("m", m, 1, prob.d)
    _check_record_floats(prob, layers, heads, steps, record_every, runs)
    return dict(
        layers=layers,
        heads=heads,
        param=param,
        m=m,
        loss=loss,
        steps=steps,
        record_every=record_every,
        lr=lr,
        optimizer=optimizer,
        p=p,
        eps=eps,
        centred=bool(centred),
        ridge=ridge_of(param, ridge, None),
    )


def train_stack(
    prob,
    *,
    layers: int = 2,
    heads: int = 2,
    steps: int = 2000,
    lr: float = 0.1,
    residual: bool = True,
    causal: bool = False,
    values=None,
    init=None,
    seed: int = 0,
    record_every: int = 1,
    param: str = "W",
    m: int | None = None,
    loss: str = "logistic",
    normalized: bool = True,
    optimizer: str | None = None,
    p: float | None = None,
    eps: float | None = None,
    centred: bool | None = None,
    ridge: float | None = None,
    devices=None,
) -> StackRun:
    """GD on L layers × H heads of self-attention (the model of `attsvm.hierarchy`).

    Args:
        prob: a self-attention `Problem` (Z=None, queries "single", linear head; its
            query_index is the token q read out by v), or a sequence of such problems of
            one shape: one vmapped program, a batched `StackRun`.
        layers, heads: L ∈ [1, 6], H ∈ [1, 8].
        residual: ρ = 1 (the residual stream) or 0.
        causal: keys s ≤ t for query row t (then the readout token q sees tokens ≤ q).
        values: (L, H, d, d) value matrices U^{l,h}; None: `values_default`, U = I / H.
        init: (L, H, d, d) W^{l,h} (a pair (K, Q) of (L, H, d, m) for param "KQ"), a list
            of those for a batch, or None: `stack_init` (index b of a batch drawn by
            `default_rng([seed, b])`).
        param: "W" or "KQ" (W^{l,h} = K^{l,h} Q^{l,h}ᵀ, rank m, with the vanishing ridge
            `ridge` of `attsvm.train`).
        optimizer: default "ngd" ("gd" with normalized=False); also md, nmd, sign,
            spectral (W) and sign (KQ), each acting on every head by itself. Not polyak
            (a stack's loss infimum is not known).
        steps, lr, record_every, loss, p, eps, centred, seed, devices: as `attsvm.train`
            (eps default 0, the exact normalized step; centred default True, the
            cancellation-free gradient, docs/followups.md §4b).
    Returns:
        A `StackRun` (batched for a sequence of problems).
    """
    probs, batched = _check_probs(prob)
    gd = dict(steps=steps, lr=lr, record_every=record_every, loss=loss, normalized=normalized)
    rule = dict(optimizer=optimizer, p=p, eps=eps, centred=centred, ridge=ridge, param=param, m=m)
    cfg = check_stack_settings(probs[0], layers=layers, heads=heads, runs=len(probs), **gd, **rule)
    return _train_stack_checked(
        probs, batched, cfg, residual, causal, values, init, seed=seed, devices=devices
    )


def _train_stack_checked(probs, batched, cfg, residual, causal, values, init, *, seed, devices):
    """`train_stack` once the problems and the GD settings `cfg` are checked: check the flags,
    the values and the start, run, and gather the `StackRun`."""
    p0, B, param = probs[0], len(probs), cfg["param"]
    for name, flag in (("residual", residual), ("causal", causal)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"`{name}` must be True or False; got {flag!r}")
    seed = check_int("seed", seed, 0, 2**63 - 1)
    L, H, (n, T, d) = cfg["layers"], cfg["heads"], p0.shape
    U = values_default(L, H, d) if values is None else _as_array("values", values, (L, H, d, d))
    inits = _check_inits(
        init, B, batched, param=param, L=L, H=H, d=d, m=cfg["m"], probs=probs, seed=seed
    )
    stacked = stack_data(probs, U, residual=bool(residual), causal=bool(causal))
    recs, final, bad_at = _run(
        cfg, stacked, _params0(inits, param, L, H), devices, head="stack", train_v=False
    )
    Wr, S, Lr, G = (np.moveaxis(np.asarray(a), 1, 0)[:B] for a in recs)
    fin = _final(final, param, L, H, B)
    settings = dict(
        cfg,
        residual=bool(residual),
        causal=bool(causal),
        seed=seed,
        n=n,
        T=T,
        d=d,
        query_index=p0.query_index,
        runs=B,
    )
    out = StackRun(
        W=Wr,
        attention=S,
        loss=Lr,
        grad_norm=G,
        steps=np.arange(0, cfg["steps"] + 1, cfg["record_every"]),
        final=fin,
        overflow_at=np.asarray(bad_at)[:B],
        values=U,
        settings=settings,
        batched=True,
    )
    return out if batched else out[0]


def stack_data(probs, U: np.ndarray, *, residual: bool, causal: bool) -> dict:
    """The engine's arrays (`model.Data` fields, leading run axis) of a batch of stack
    problems: K = T query rows, mask (T, T) per sequence, w = 1/n at the query token."""
    B = len(probs)
    n, T, d = probs[0].shape
    X = np.stack([p.X for p in probs])
    Y = np.stack([p.Y for p in probs])[:, :, None]
    keys = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    w = np.zeros((B, n, T))
    w[:, :, probs[0].query_index] = 1.0 / n
    return dict(
        X=X,
        Q=X,
        Y=Y,
        mask=np.broadcast_to(keys, (B, n, T, T)).copy(),
        w=w,
        v=np.stack([p.v for p in probs]),
        V=np.zeros((B, d, d)),
        lam=np.zeros(B),
        U=np.broadcast_to(U, (B,) + U.shape).copy(),
        rho=np.full(B, 1.0 if residual else 0.0),
    )


def _params0(inits, param: str, L: int, H: int):
    """The engine's parameters: one leaf per head (W), or one (K, Q) pair per head, each
    with the run axis first, layer-major."""
    heads = [(l, h) for l in range(L) for h in range(H)]
    if param == "W":
        A = np.stack(inits)
        return tuple(A[:, l, h] for l, h in heads)
    K, Q = np.stack([a[0] for a in inits]), np.stack([a[1] for a in inits])
    return tuple((K[:, l, h], Q[:, l, h]) for l, h in heads)


def _final(final, param: str, L: int, H: int, B: int):
    if param == "W":
        A = np.stack([np.asarray(a)[:B] for a in final], axis=1)
        return A.reshape((B, L, H) + A.shape[2:])
    K = np.stack([np.asarray(k)[:B] for k, _ in final], axis=1)
    Q = np.stack([np.asarray(q)[:B] for _, q in final], axis=1)
    return (K.reshape((B, L, H) + K.shape[2:]), Q.reshape((B, L, H) + Q.shape[2:]))


# -- the state of a trained stack, and its audit ---------------------------------------------
def _single(prob, run: StackRun) -> None:
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    if not isinstance(run, StackRun) or run.batched:
        raise ValueError("`run` must be a single StackRun (index a batch first)")
    s = run.settings
    if (prob.n, prob.T, prob.d, prob.query_index) != (s["n"], s["T"], s["d"], s["query_index"]):
        raise ValueError(
            "`prob` must be the problem `run` was trained on; got another shape or query_index"
        )


def layer_states(prob: Problem, run: StackRun, record: int = -1):
    """(S (L, H, n, T, T), h (L + 1, n, T, d)) at record `record` of `run`: every layer's
    attention and the tokens h^0 = X, h^1, …, h^L (`hierarchy.forward`)."""
    from . import hierarchy

    _single(prob, run)
    s = run.settings
    data = model.Data(
        **{
            k: model.jnp.asarray(v[0])
            for k, v in stack_data(
                [prob], run.values, residual=s["residual"], causal=s["causal"]
            ).items()
        }
    )
    S, hs = hierarchy.forward(model.jnp.asarray(run.W[record]), data, centred=False)
    return np.asarray(S), np.asarray(hs)


def evaluated(
    prob: Problem, W, values, *, residual: bool = True, causal: bool = False, loss: str = "logistic"
) -> StackRun:
    """A one-record `StackRun` of the stack at W (L, H, d, d): its attention and loss at
    step 0, computed without compiling a program (grad_norm NaN: no gradient taken)."""
    from . import hierarchy

    _check_probs(prob)
    W = np.asarray(W, dtype=np.float64)
    U = _as_array("values", values, W.shape)
    data = model.Data(
        **{
            k: model.jnp.asarray(v[0])
            for k, v in stack_data([prob], U, residual=residual, causal=causal).items()
        }
    )
    f, S = hierarchy.predictions(model.jnp.asarray(W), data, centred=False)
    risk = float(np.mean(np.asarray(model.loss_fn(prob.Y * np.asarray(f), loss))))
    L, H = W.shape[:2]
    settings = dict(
        layers=L,
        heads=H,
        param="W",
        residual=residual,
        causal=causal,
        n=prob.n,
        T=prob.T,
        d=prob.d,
        query_index=prob.query_index,
        steps=0,
        loss=loss,
    )
    return StackRun(
        W=W[None],
        attention=np.asarray(S)[None],
        loss=np.array([risk]),
        grad_norm=np.array([np.nan]),
        steps=np.array([0]),
        final=W,
        overflow_at=np.asarray(-1),
        values=U,
        settings=settings,
    )


@dataclass(frozen=True, eq=False)
class StackAudit:
    """`audit_stack`'s answer. heads[l][h]: the `attsvm.audit.HeadAudit` of head (l, h) on
    its own layer's final inputs; cos, cos_span, coverage: (L, H) arrays of theirs (NaN
    where no SVM was found); cos_nuc: (L, H) cosine with the nuclear-norm Att-SVM (param
    "KQ"), else None; selections: (L, H, n, T) the key each query row selects (−1 where not
    kept under τ, and for every row but q in the last layer); agree: (L, H, H) share of the
    rows kept by both heads where heads h and h' select the same key (NaN: none kept by
    both); inputs: (L + 1, n, T, d) h^0 … h^L; optimal: (n,) the optimal token of the
    one-layer picture (`attsvm.optimal_tokens` of `prob`), or None when tied."""

    heads: list
    cos: np.ndarray
    cos_span: np.ndarray
    coverage: np.ndarray
    cos_nuc: np.ndarray | None
    selections: np.ndarray
    agree: np.ndarray
    inputs: np.ndarray
    optimal: np.ndarray | None
    tau: float

    def svm(self, layer: int, head: int) -> np.ndarray | None:
        """The Frobenius Att-SVM W^mm of head (layer, head) (0-based), or None."""
        sol = self.heads[layer][head].svm
        return None if sol is None or not sol.feasible else sol.W


def audit_stack(prob: Problem, run: StackRun, *, tau: float = 0.5) -> StackAudit:
    """Every head of a trained stack against the Att-SVM of its own final selections
    (docs/hierarchy.md), on its own layer's final inputs h^{l−1}: the last layer's heads
    at the query token q, earlier layers' heads at every token (each token is a query of
    the next layer). `attsvm.audit.audit_attention` selects (argmax, kept at weight ≥ τ),
    solves the Frobenius Att-SVM (`attsvm.pairsvm.solve_pairs`, with its certificate) and
    gives cos and cos_span; with param "KQ" also the nuclear-norm one (arXiv 2308.16898
    §4, Att-SVM*)."""
    from .audit import audit_attention
    from .problems import optimal_tokens

    tau = check_float("tau", tau, 0.0, 1.0)
    S, hs = layer_states(prob, run)
    L, H, n, T, _ = S.shape
    q, causal = prob.query_index, run.settings["causal"]
    kq = run.settings["param"] == "KQ"
    heads, nan = [], float("nan")
    cos, cos_span, cov = (np.full((L, H), nan) for _ in range(3))
    cos_nuc = np.full((L, H), nan) if kq else None
    sel = np.full((L, H, n, T), -1)
    for l in range(L):
        rows = [np.array([q])] * n if l == L - 1 else None
        keys = list(hs[l])
        row = []
        for h in range(H):
            W = run.W[-1, l, h]
            a = audit_attention(
                keys, keys, W, list(S[l, h]), tau=tau, query_rows=rows, causal=causal, nuclear=kq
            )
            row.append(a)
            cos[l, h], cos_span[l, h], cov[l, h] = a.cos, a.cos_span, a.coverage
            sel[l, h] = np.stack(a.alpha)
            if kq and a.svm_nuc is not None and a.svm_nuc.feasible:
                Wn = a.svm_nuc.W
                cos_nuc[l, h] = float(np.sum(W * Wn) / (np.linalg.norm(W) * np.linalg.norm(Wn)))
        heads.append(row)
    try:
        opt = optimal_tokens(prob)
    except ValueError:
        opt = None
    return StackAudit(
        heads=heads,
        cos=cos,
        cos_span=cos_span,
        coverage=cov,
        cos_nuc=cos_nuc,
        selections=sel,
        agree=agreement(sel),
        inputs=hs,
        optimal=opt,
        tau=tau,
    )


def agreement(sel: np.ndarray) -> np.ndarray:
    """(L, H, H): for heads h, h' of one layer, the share of query rows kept by both
    (selections ≥ 0) where they select the same key; NaN where no row is kept by both."""
    L, H = sel.shape[:2]
    out = np.full((L, H, H), np.nan)
    for l in range(L):
        for a in range(H):
            for b in range(H):
                both = (sel[l, a] >= 0) & (sel[l, b] >= 0)
                if both.any():
                    out[l, a, b] = float(np.mean(sel[l, a][both] == sel[l, b][both]))
    return out
