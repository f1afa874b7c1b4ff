"""Batching for the GD engine: padding sizes to buckets, stacking runs, placing them on
devices.

Sizes are zero-padded up to buckets (`bucket`) so nearby sizes reuse one compiled program.
Padding is exact: padded features are zero, padded tokens are masked out of the softmax,
padded sequences carry zero loss weight, and padded rows/columns of W, K, Q start at 0 and
receive zero gradient.
"""

from __future__ import annotations

import numpy as np

from .limits import bucket
from .model import Data, jax
from .problems import Problem


def pad_data(prob: Problem, sizes) -> dict:
    """The arrays of `Data` for `prob`, zero-padded to sizes (nb, Tb, db)."""
    return {k: np.asarray(a[0]) for k, a in pad_batch([prob], sizes).items()}


def pad_batch(probs, sizes) -> dict:
    """The arrays of `Data` for B problems of one shape (n, T, d) and query mode, each
    zero-padded to sizes (nb, Tb, db) and stacked on a leading run axis: filled by whole
    batch slices, not a problem at a time (a 128-run chunk of multi-token's sweep: 4.5 →
    0.5 ms)."""
    B = len(probs)
    n, T, d = probs[0].shape
    nb, Tb, db = sizes
    views = [p.query_view() for p in probs]
    K = views[0][0].shape[1]
    Kb = 1 if K == 1 else Tb
    X = np.zeros((B, nb, Tb, db))
    X[:, :n, :T, :d] = [p.X for p in probs]
    Q = np.zeros((B, nb, Kb, db))
    Q[:, :n, :K, :d] = [qv for qv, _, _ in views]
    Y = np.ones((B, nb, Kb))
    Y[:, :n, :K] = [yl for _, yl, _ in views]
    M = np.zeros((B, nb, Kb, Tb), dtype=bool)
    M[:, :n, :K, :T] = [p.token_mask() for p in probs]  # query mask and padded sentences
    real = np.zeros((nb, Kb), dtype=bool)
    real[:n, :K] = True
    M[:, ~real, 0] = True  # padded queries attend somewhere (no 0/0)
    w = np.repeat(np.where(real, 1.0 / n, 0.0)[None], B, axis=0)
    v, V = np.zeros((B, db)), np.zeros((B, db, db))
    for b, p in enumerate(probs):
        if p.v is not None:
            v[b, :d] = p.v
        if p.V is not None:
            V[b, :d, :d] = p.V
    lam = np.array([float(p.lam) for p in probs])
    return dict(X=X, Q=Q, Y=Y, mask=M, w=w, v=v, V=V, lam=lam)


def padded_batch(probs, inits, *, param: str, m: int):
    """Stack B problems and their inits, padded to buckets: (data dict, params0)."""
    B = len(probs)
    n, T, d = probs[0].shape
    sizes = (bucket(n), bucket(T), bucket(d))
    db, mb = sizes[2], bucket(m)
    stacked = pad_batch(probs, sizes)
    if param == "W":
        params0 = np.zeros((B, db, db))
        params0[:, :d, :d] = np.stack(inits)
    else:
        Kp, Qp = np.zeros((B, db, mb)), np.zeros((B, db, mb))
        Kp[:, :d, :m] = np.stack([a[0] for a in inits])
        Qp[:, :d, :m] = np.stack([a[1] for a in inits])
        params0 = (Kp, Qp)
    return stacked, params0


def span_basis(stacked: dict, W0: np.ndarray):
    """The span form of W-parameterized GD, for a padded batch and its starting W0 (B, d, d).

    Every gradient of L(W) is ∇L = Σ_ikt (∂L/∂a_ikt) x_it z_ikᵀ (the logits a_ikt = x_itᵀ W
    z_ik carry all of W's influence: arXiv 2308.16898 eq. (1)), so GD along ∇L (plain,
    normalized, Polyak) keeps W − W0 in span{x_it z_ikᵀ}. With A (n·K·T, d²) the rows
    vec(x_it z_ikᵀ) and A = U S Vᵀ (thin SVD, singular values below numpy's rank tolerance
    dropped: their rows below are 0), W = W0 + Σ_j e_j V_j and
        a = a0 + Rᵀe,   ∂L/∂e = R ∂L/∂a = Vᵀ∇L,   ‖∂L/∂e‖ = ‖∇L‖_F     (R = S Uᵀ),
    the same steps in p = min(d², n·K·T) numbers instead of d² (`model.logits`).
    Returns R (B, p, n·K·T), a0 (B, n, K, T) and V (B, p, d²)."""
    X, Qz = stacked["X"], stacked["Q"]
    B, n, T, d = X.shape
    K = Qz.shape[2]
    A = np.einsum("bitd,bike->biktde", X, Qz).reshape(B, n * K * T, d * d)
    U, S, Vt = np.linalg.svd(A, full_matrices=False)
    keep = S > S[:, :1] * max(A.shape[1:]) * np.finfo(np.float64).eps
    S = np.where(keep, S, 0.0)
    R = S[:, :, None] * np.swapaxes(U, 1, 2)
    Vt = np.where(keep[:, :, None], Vt, 0.0)
    a0 = np.einsum("bitd,bde,bike->bikt", X, W0, Qz)
    return R, a0, Vt


SPLIT_MIN = 16  # runs per part, at least, when a CPU batch is split over the cores


def cpu_split(B: int, devices=None):
    """The CPU devices `train_batch` splits B runs over (one block each, one program:
    `engine.simulate_split`), or None: one program on one device. Only when `devices` is
    None (sweeps pass one device per chunk), the backend is the CPU with several devices
    (`runtime.use_cpu_cores`) and every block gets at least `SPLIT_MIN` runs. Measured on the
    2-core machine (docs/performance.md): the W workload 0.46 → 0.30 s warm. The last bits
    of a run then depend on the block size, as they depend on the batch size (XLA picks
    its kernels by size)."""
    if devices is not None or jax.default_backend() != "cpu":
        return None
    devs = jax.devices()
    k = min(len(devs), B // SPLIT_MIN)
    return None if k < 2 else devs[:k]


def repeat_last(stacked: dict, params0, Bp: int):
    """The batch with its last run repeated up to Bp runs."""
    B = len(next(iter(stacked.values())))
    if Bp == B:
        return stacked, params0
    rep = lambda a: np.concatenate([a, np.repeat(a[-1:], Bp - B, axis=0)])  # noqa: E731
    return {k: rep(a) for k, a in stacked.items()}, jax.tree_util.tree_map(rep, params0)


def place(stacked: dict, params0, devices=None):
    """Spread the runs over `devices` (default: every accelerator JAX sees, a GPU or several;
    on CPU the first device: a program sharded over the CPU devices, one per core
    (`runtime.use_cpu_cores`), did every run's work on each here, twice the CPU time; a CPU
    batch is split by `cpu_split` instead): repeat the last run up to a multiple of the
    device count, then shard the run axis."""
    if devices is None:
        devices = jax.devices()[:1] if jax.default_backend() == "cpu" else jax.devices()
    devices = list(devices)
    nd = len(devices)
    B = len(next(iter(stacked.values())))
    stacked, params0 = repeat_last(stacked, params0, -(-B // nd) * nd)
    data = Data(**stacked)
    if nd > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        sh = NamedSharding(Mesh(np.array(devices), ("runs",)), PartitionSpec("runs"))
        return jax.device_put(data, sh), jax.device_put(params0, sh)
    return jax.device_put(data, devices[0]), jax.device_put(params0, devices[0])
