"""One-layer softmax attention, its heads and losses, in pure JAX (float64).

    s_ik = softmax_t( x_itᵀ W z_ik )  over the tokens query k may attend to
                                             (arXiv 2308.16898 §2, eq. (1))
    r_ik = X_iᵀ s_ik,   f_ik = h(r_ik)
    L(W) = Σ_i Σ_k w_ik ℓ(Y_ik f_ik),   w_ik = 1/n for real (i, k), 0 for padding

With W = K Qᵀ for the (K, Q)-parameterization, whose objective adds the vanishing ridge
ε (‖K‖_F² + ‖Q‖_F²) (docs/theory.md §A.1). Everything here acts on one problem; `jax.vmap` batches.
"""
from __future__ import annotations

import os
from typing import NamedTuple

import jax

jax.config.update("jax_enable_x64", True)


def use_cpu_cores(n: int | None = None) -> bool:
    """Expose `n` CPU devices to JAX (default: one per core), so that a sweep's chunks run on
    every core (`experiments.core.sweep`, chunks dealt round-robin; its numbers do not depend
    on the device count); JAX's CPU backend otherwise runs one program on one core. Only
    possible before JAX starts its backends (False then, and nothing changes). Importing
    attsvm calls it unless the user chose already: XLA_FLAGS names a host device count,
    `jax_num_cpu_devices` is set, or this is a pytest-xdist worker (its sibling workers
    hold the other cores)."""
    try:
        jax.config.update("jax_num_cpu_devices", int(n or os.cpu_count() or 1))
    except RuntimeError:        # a backend is already running: keep it
        return False
    return True


COMPILE_CACHE_MB = 512


def compile_cache_dir() -> str | None:
    """Where `use_compile_cache` keeps compiled programs: `ATTSVM_XLA_CACHE` ("off" for
    none), else $XDG_CACHE_HOME/attsvm/xla/<cpu> (else ~/.cache/…), <cpu> a fingerprint of
    this CPU's model and instruction-set flags: XLA compiles for the host's instructions
    and JAX's cache key does not name them, so a home folder shared by different machines
    must not hand one machine's programs to another."""
    chosen = os.environ.get("ATTSVM_XLA_CACHE", "").strip()
    if chosen.lower() in ("off", "0", "none", "false"):
        return None
    if chosen:
        return chosen
    home = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(
        os.path.expanduser("~"), ".cache")
    return os.path.join(home, "attsvm", "xla", _cpu_fingerprint())


def _cpu_fingerprint() -> str:
    import hashlib
    import platform
    desc = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo") as f:
            desc += sorted({line.strip() for line in f
                            if line.startswith(("model name", "flags", "Features"))})
    except OSError:
        pass
    return hashlib.sha256("\n".join(desc).encode()).hexdigest()[:16]


def use_compile_cache(path: str | None = None) -> str | None:
    """Keep every compiled XLA program on disk (JAX's persistent compilation cache, at most
    `COMPILE_CACHE_MB`, least recently used evicted, file-locked across processes), so a new
    process reuses the programs an earlier one compiled: a second `reproduce all` skipped
    15 s of its 96 here (docs/performance.md). The CLI and the app call it; a program's
    numbers do not depend on where it was compiled. path: the folder (default
    `compile_cache_dir()`; None there: off). Returns the folder used, or None."""
    path = path or compile_cache_dir()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:         # a read-only home: compile as before
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_MB * 2**20)
    return path


# XLA's CPU compiler has two code generators for loop fusions: the MLIR emitters (jaxlib
# 0.10's default) and the older LLVM-IR emitters. For the engine's programs the older ones
# compile in about half the time (the benchmark's W program 0.51-0.54 → 0.29-0.30 s in four
# alternating pairs) and run as fast. The GD benchmark's records come out bit for bit the same, other programs'
# the same to rounding (tests/test_cores.py; docs/performance.md, the sixteenth session).
# An unknown flag in XLA_FLAGS aborts the process, so it is set only for the jaxlib
# releases it was measured on.
FAST_COMPILE_FLAG = "--xla_cpu_use_fusion_emitters=false"
FAST_COMPILE_JAXLIB = ("0.10.",)


def use_fast_compile() -> bool:
    """Choose XLA's older CPU fusion emitters (`FAST_COMPILE_FLAG`), unless the user's
    XLA_FLAGS already names that setting, jaxlib is not one of `FAST_COMPILE_JAXLIB`, or
    JAX's backends are already running (XLA reads its flags when they start). Importing
    attsvm calls it. True when the flag was added."""
    import jaxlib

    flags = os.environ.get("XLA_FLAGS", "")
    if ("xla_cpu_use_fusion_emitters" in flags
            or not jaxlib.__version__.startswith(FAST_COMPILE_JAXLIB)):
        return False
    from jax._src import xla_bridge     # private: imported only for the jaxlib measured on
    if xla_bridge.backends_are_initialized():
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {FAST_COMPILE_FLAG}".strip()
    return True


MALLOC_KEEP_BYTES = 1 << 30


def keep_freed_memory(limit: int = MALLOC_KEEP_BYTES) -> bool:
    """Ask glibc's malloc to serve blocks under `limit` bytes from its heap and to keep up
    to `limit` bytes of freed memory there (mallopt's M_MMAP_THRESHOLD and
    M_TRIM_THRESHOLD; the GLIBC_TUNABLES route caps the first at 32 MB). A batch's history
    is large (the GD benchmark's: 240 MB of XLA's records, then 240 MB of numpy copy), and
    by default each such block is a fresh mapping whose every page the kernel faults in and
    zeroes on first write, again on every call; kept in the heap, the next call reuses
    pages already touched. The GD benchmark's warm W call took 0.27 → 0.25 s here
    (docs/performance.md, the sixteenth session). The price: a process may hold up to
    `limit` of freed memory. Importing attsvm calls it unless ATTSVM_MALLOC=system (the
    app sets that: a long-running server keeps the system's default); not glibc: nothing.
    True when both settings were taken."""
    if os.environ.get("ATTSVM_MALLOC", "").strip().lower() == "system":
        return False
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):       # not glibc (macOS, Windows)
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3                 # glibc's malloc.h
    mapped = mallopt(M_MMAP_THRESHOLD, int(limit))
    trimmed = mallopt(M_TRIM_THRESHOLD, int(limit))
    return bool(mapped and trimmed)


use_fast_compile()
keep_freed_memory()
if ("xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", "")
        and jax.config.jax_num_cpu_devices < 1 and "PYTEST_XDIST_WORKER" not in os.environ):
    use_cpu_cores()

import jax.numpy as jnp  # noqa: E402

LOSSES = ("logistic", "exponential", "correlation")


class Data(NamedTuple):
    """Arrays of one (possibly padded) problem, as they cross `jit`."""

    X: jnp.ndarray      # (n, T, d) tokens
    Q: jnp.ndarray      # (n, K, d) queries z_ik
    Y: jnp.ndarray      # (n, K) labels
    mask: jnp.ndarray   # (n, K, T) bool: token t is attendable by query (i, k)
    w: jnp.ndarray      # (n, K) loss weights: 1/n for real queries, 0 for padding
    v: jnp.ndarray      # (d,) head vector (linear, quadratic)
    V: jnp.ndarray      # (d, d) relu head's first layer
    lam: jnp.ndarray    # () quadratic head's λ
    # the span form (`batching.span_basis`): W = W0 + Σ_j e_j V_j over an orthonormal basis
    # V of span{x_it z_ikᵀ}; GD then runs on e and the logits are a0 + Rᵀe
    R: jnp.ndarray | None = None     # (p, n·K·T) coordinates of the x_it z_ikᵀ in V
    a0: jnp.ndarray | None = None    # (n, K, T) the logits of W0
    # a stack of attention layers (`attsvm.hierarchy`): K = T, Q = X, mask (n, T, T) the
    # keys of query t, w (n, T) 1/n at the query token q of each sequence, 0 elsewhere
    U: jnp.ndarray | None = None     # (L, H, d, d) value matrices U^{l,h}
    rho: jnp.ndarray | None = None   # () the residual stream's weight ρ (1 or 0)


def logits(W, data: Data):
    """a_ikt = x_itᵀ W z_ik, with -inf where the mask forbids: (n, K, T). In the span form
    (data.R set) W is the coordinate vector e (p,) and a = a0 + Rᵀe, the same logits."""
    if data.R is None:
        a = jnp.einsum("ntd,de,nke->nkt", data.X, W, data.Q)
    else:
        a = data.a0 + (W @ data.R).reshape(data.a0.shape)
    return jnp.where(data.mask, a, -jnp.inf)


def attention(W, data: Data):
    """s: (n, K, T) softmax weights (max-shifted, exactly 0 on masked tokens)."""
    return jax.nn.softmax(logits(W, data), axis=-1)


def head(r, data: Data, kind: str):
    """h(r) for r (..., d)."""
    if kind == "linear":
        return r @ data.v
    if kind == "relu":
        return jnp.sum(jax.nn.relu(r @ data.V), axis=-1)
    if kind == "quadratic":
        return r @ data.v - data.lam * jnp.sum(r * r, axis=-1)
    raise ValueError(f"`head` must be one of ['linear', 'relu', 'quadratic']; got {kind!r}")


def _features(data: Data, kind: str):
    """What the attention averages for the head: the linear and relu heads read r = Σ_t s_t
    x_t only through r·v and r V, and Σ_t s_t (x_tᵀv) = r·v, Σ_t s_t (x_tᵀV) = r V, so the
    attention averages those per-token features, (n, T, 1) and (n, T, d), instead of the
    tokens: the head's product then sits outside the softmax's dependence on W, and XLA
    hoists it out of the GD loop (multi-token's step 0.64 → 0.37 µs, docs/performance.md).
    The quadratic head needs r itself."""
    if kind == "linear":
        return jnp.sum(data.X * data.v[None, None, :], axis=-1, keepdims=True)
    if kind == "relu":
        return jnp.sum(data.X[..., :, None] * data.V[None, None], axis=-2)
    return data.X


def _head_of_features(h, data: Data, kind: str):
    """h(r) from the attention's average of `_features`."""
    if kind == "linear":
        return h[..., 0]
    if kind == "relu":
        return jnp.sum(jax.nn.relu(h), axis=-1)
    return head(h, data, kind)


def outputs(W, data: Data, kind: str, *, centred: bool = False):
    """f: (n, K) predictions and s: (n, K, T) attention.

    centred: differentiate r = Σ_t s_t x_t as x_ρ + Σ_t s_t (x_t − x_ρ), ρ = the argmax of
    the logits (an integer: no gradient flows through the choice). The same numbers, but the
    softmax backward then never subtracts two terms of size 1, so the gradient stays exact
    to rounding far into saturation (the plain form loses the selected token's term once
    1 − s_ρ < 2⁻⁵³, logit gaps ≳ 37: docs/followups.md §4b).
    """
    if not centred:
        s = attention(W, data)
        return _head_of_features(jnp.einsum("nkt,ntd->nkd", s, _features(data, kind)), data,
                                 kind), s
    f, s, _ = centred_outputs(W, data, kind)
    return f, s


def centred_outputs(W, data: Data, kind: str, scaled=0.0):
    """(f, s, logscale): `outputs(centred=True)`, and with `scaled` ≠ 0 (traced) a backward
    that returns the gradient divided by e^{logscale}, logscale ≤ 0 the log of the largest
    non-selected softmax weight over the real sequences (0 if unscaled): for the scale-free
    normalized steps, which only use its direction and then keep moving after the weights
    themselves underflow (logit gaps ≳ 745)."""
    s, h, logscale = _attend_centred(logits(W, data), _features(data, kind), data.w, scaled)
    return _head_of_features(h, data, kind), s, logscale


def _top(a):
    """One-hot (bool) of the first argmax over the last axis."""
    idx = jnp.arange(a.shape[-1]).reshape((1,) * (a.ndim - 1) + (-1,))
    return idx == jnp.argmax(a, axis=-1)[..., None]


def _attend_parts(a, w, scaled):
    """The forward: s = softmax(a), the one-hot of ρ, e_t = e^{a_t − a_ρ − logscale} (0 at ρ
    and on masked tokens), Z = Σ_t e^{a_t − a_ρ} and logscale. One exp per entry, as a
    softmax; e is what the backward needs, so it computes no exp of its own."""
    top = _top(a)
    l = a - jnp.max(a, axis=-1, keepdims=True)                             # ≤ 0, 0 at ρ
    tail = jnp.where(top | (w[..., None] <= 0), -jnp.inf, l)
    m = jnp.max(tail)
    logscale = jnp.where(jnp.isfinite(m) & (scaled != 0), jnp.minimum(m, 0.0), 0.0)
    e = jnp.where(top, 0.0, jnp.exp(l - logscale))
    Z = 1.0 + jnp.exp(logscale) * jnp.sum(e, axis=-1, keepdims=True)
    s = jnp.where(top, 1.0, e * jnp.exp(logscale)) / Z
    return s, top, e, Z, jax.lax.stop_gradient(logscale)


@jax.custom_vjp
def _attend_centred(a, X, w, scaled):
    """s = softmax(a) (n, K, T), r = Σ_t s_t x_t (n, K, d) and logscale, with the centred
    backward (X: the tokens' features, `_features`): with c_t the cotangent reaching s_t
    (through r: ⟨ḡ_r, x_t⟩), the logit gradient s_t (c_t − ⟨s, c⟩) is computed as
    s_t (c'_t − ⟨s, c'⟩), c' = c − c_ρ, ρ = argmax_t a_t. The same number in exact
    arithmetic (a softmax ignores a shift of c), but c'_ρ is exactly 0, so no term of size 1
    cancels (docs/followups.md §4b). Differentiating x_ρ + Σ_t s_t (x_t − x_ρ): c'_t is
    formed from x_t − x_ρ, so it is exactly 0 at ρ and at every token equal to x_ρ however
    XLA fuses the step (c_t − c_ρ, two products rounded apart, broke a tie of identical
    tokens by 1e-19 once fused with a contraction into an FMA). The logit
    gradient comes out times e^{−logscale} (`centred_outputs`): the weights s_t, t ≠ ρ, enter
    as e_t / Z, and ρ's term −s_ρ ⟨s, c'⟩ as −s_ρ ⟨e/Z, c'⟩."""
    s, _, _, _, logscale = _attend_parts(a, w, scaled)
    return s, jnp.einsum("nkt,ntd->nkd", s, X), logscale


def _attend_fwd(a, X, w, scaled):
    s, top, e, Z, logscale = _attend_parts(a, w, scaled)
    out = (s, jnp.einsum("nkt,ntd->nkd", s, X), logscale)
    return out, (s, top, e, Z, X, w, scaled, logscale)


def _attend_bwd(res, cts):
    s, top, e, Z, X, w, scaled, logscale = res
    gs, gr, _ = cts
    x_rho = jnp.sum(jnp.where(top[..., None], X[:, None], 0.0), axis=2)    # (n, K, d), exact
    gs_rho = jnp.sum(jnp.where(top, gs, 0.0), axis=-1, keepdims=True)
    c = (jnp.einsum("nkd,nktd->nkt", gr, X[:, None] - x_rho[:, :, None])  # exactly 0 at ρ
         + (gs - gs_rho))
    u = e / Z                                                               # s_t e^{−logscale}
    sig = jnp.sum(u * c, axis=-1, keepdims=True)                            # ⟨s, c'⟩ e^{−ls}
    ga = jnp.where(top, -s * sig, u * (c - jnp.exp(logscale) * sig))
    return (ga, jnp.einsum("nkt,nkd->ntd", s, gr), jnp.zeros_like(w),
            jnp.zeros_like(scaled))


_attend_centred.defvjp(_attend_fwd, _attend_bwd)


def loss_fn(u, kind: str):
    """ℓ(u), computed stably."""
    if kind == "logistic":
        return jnp.logaddexp(0.0, -u)          # log(1 + e^{-u})
    if kind == "exponential":
        return jnp.exp(-u)
    if kind == "correlation":
        return -u
    raise ValueError(f"`loss` must be one of {list(LOSSES)}; got {kind!r}")


def risk(W, data: Data, head_kind: str, loss_kind: str):
    """L(W) = Σ_ik w_ik ℓ(Y_ik f_ik) (no ridge)."""
    f, _ = outputs(W, data, head_kind)
    return jnp.sum(data.w * loss_fn(data.Y * f, loss_kind))


def objective_and_records(params, data: Data, ridge, *, param: str, head_kind: str,
                          loss_kind: str, centred: bool = False, scaled=False):
    """What GD minimizes, with what it records: (objective, (L, s, W, logscale)).

    objective = L(W) for "W"; L(K Qᵀ) + ridge (‖K‖² + ‖Q‖²) for "KQ" (the GD engine
    differentiates exactly this function; `objective` is its first output).
    scaled (centred, "W" only; may be traced): the gradient comes out divided by
    e^{logscale} (`centred_outputs`; logscale = 0 when not scaled): for the scale-free
    normalized steps, which then keep moving after the non-selected weights underflow.
    """
    W = as_W(params, param)
    if centred:
        flag = jnp.asarray(scaled if param == "W" else False, W.dtype)
        f, s, logscale = centred_outputs(W, data, head_kind, flag)
    else:
        f, s = outputs(W, data, head_kind)
        logscale = jnp.zeros((), W.dtype)
    L = jnp.sum(data.w * loss_fn(data.Y * f, loss_kind))
    total = L
    if param == "KQ":
        K, Q = params
        total = L + ridge * (jnp.sum(K * K) + jnp.sum(Q * Q))
    return total, (L, s, W, logscale)


def joint_objective(params, *, objective, data: Data):
    """`objective` (a partial of `objective_and_records` on `data`) at params = (attention
    params, v), with v in place of the fixed head vector `data.v` (trained head)."""
    inner, v = params
    return objective(inner, data=data._replace(v=v))


def objective(params, data: Data, ridge, *, param: str, head_kind: str, loss_kind: str,
              centred: bool = False):
    """What GD minimizes: L(W) for "W"; L(K Qᵀ) + ridge (‖K‖² + ‖Q‖²) for "KQ"."""
    return objective_and_records(params, data, ridge, param=param, head_kind=head_kind,
                                 loss_kind=loss_kind, centred=centred)[0]


def as_W(params, param: str):
    """The combined matrix W (= K Qᵀ for the (K, Q)-parameterization)."""
    if param == "W":
        return params
    K, Q = params
    return K @ Q.T
