"""Batching for the GD engine: padding sizes to buckets, stacking runs, placing them on
devices.

Sizes are zero-padded up to buckets (`bucket`) so nearby sizes reuse one compiled program.
Padding is exact: padded features are zero, padded tokens are masked out of the softmax,
padded sequences carry zero loss weight, and padded rows/columns of W, K, Q start at 0 and
receive zero gradient.
"""
from __future__ import annotations

import numpy as np

from .model import Data, jax
from .problems import Problem

_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192,
            256, 320, 384, 512)


def bucket(x: int) -> int:
    """The padded size used for a dimension of size `x`."""
    for b in _BUCKETS:
        if b >= x:
            return b
    return x


def pad_data(prob: Problem, sizes) -> dict:
    """The arrays of `Data` for `prob`, zero-padded to sizes (nb, Tb, db)."""
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


def padded_batch(probs, inits, *, param: str, m: int):
    """Stack B problems and their inits, padded to buckets: (data dict, params0)."""
    B = len(probs)
    n, T, d = probs[0].shape
    sizes = (bucket(n), bucket(T), bucket(d))
    db, mb = sizes[2], bucket(m)
    datas = [pad_data(p, sizes) for p in probs]
    stacked = {k: np.stack([dd[k] for dd in datas]) for k in datas[0]}
    if param == "W":
        params0 = np.zeros((B, db, db))
        params0[:, :d, :d] = np.stack(inits)
    else:
        Kp, Qp = np.zeros((B, db, mb)), np.zeros((B, db, mb))
        Kp[:, :d, :m] = np.stack([a[0] for a in inits])
        Qp[:, :d, :m] = np.stack([a[1] for a in inits])
        params0 = (Kp, Qp)
    return stacked, params0


def cpu_parts(B: int, devices=None):
    """How `train_batch` deals B runs to the CPU cores: None (one program for the whole batch,
    `place`) unless `devices` is the default and JAX sees several CPU devices
    (`model.use_cpu_cores`); else [(lo, hi, device)], equal contiguous parts, one per device,
    each its own program. A program sharded over CPU devices did every run on each (twice
    the CPU time here); separate programs on threads take the CPU time of one."""
    if devices is not None or jax.default_backend() != "cpu" or len(jax.devices()) < 2 or B < 2:
        return None
    devs = jax.devices()[:B]
    size = -(-B // len(devs))
    return [(lo, min(lo + size, B), dev) for lo, dev in zip(range(0, B, size), devs)]


def populated_empty(shape, dtype) -> np.ndarray:
    """An uninitialized array whose pages the kernel maps in one go (MAP_POPULATE, Linux):
    filling a fresh 240 MB history page fault by page took 0.36–0.55 s of CPU here, 0.09 s
    populated. np.empty elsewhere (or if the map fails)."""
    import mmap

    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    flags = getattr(mmap, "MAP_POPULATE", 0)
    if not flags or size < 2**20:
        return np.empty(shape, dtype)
    try:
        buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | flags)
    except (OSError, ValueError):
        return np.empty(shape, dtype)
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


def take(stacked: dict, params0, lo: int, hi: int, size: int):
    """Runs lo … hi − 1 of a padded batch, the last one repeated up to `size` runs (every
    part then has one shape: one program)."""
    idx = np.minimum(np.arange(lo, lo + size), hi - 1)
    return ({k: a[idx] for k, a in stacked.items()},
            jax.tree_util.tree_map(lambda a: a[idx], params0))


def place(stacked: dict, params0, devices=None):
    """Spread the runs over `devices` (default: every device JAX sees, a GPU or several):
    repeat the last run up to a multiple of the device count, then shard the run axis."""
    devices = jax.devices() if devices is None else list(devices)
    nd = len(devices)
    B = len(next(iter(stacked.values())))
    Bp = -(-B // nd) * nd
    if Bp != B:
        rep = lambda a: np.concatenate([a, np.repeat(a[-1:], Bp - B, axis=0)])  # noqa: E731
        stacked = {k: rep(a) for k, a in stacked.items()}
        params0 = jax.tree_util.tree_map(rep, params0)
    data = Data(**stacked)
    if nd > 1:
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        sh = NamedSharding(Mesh(np.array(devices), ("runs",)), PartitionSpec("runs"))
        return jax.device_put(data, sh), jax.device_put(params0, sh)
    return jax.device_put(data, devices[0]), jax.device_put(params0, devices[0])
