"""The products of `attsvm.pairsvm.Pairs` on JAX's default device: margins ⟨A_j, W⟩, the
combination B(λ) = Σ_j λ_j A_j and the dual Gram product K λ, jitted, in float64.

The certified solvers (docs/svm-solvers.md) spend their time in these products; on an
accelerator they run there while the solvers' bookkeeping stays in numpy. On this project's
CPUs numpy is as fast or faster (docs/svm-solvers.md, "Measured and not kept"), so "auto"
takes JAX only where `jax.default_backend()` is not the CPU and the problem is large enough
for the transfers (one W, one λ and one m-vector per product) to pay (`pick`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

PRODUCTS = ("auto", "numpy", "jax")
# "auto" sends products to an accelerator from this many multiply-adds per Gram product
# (x = m·d + q·d·d2): below it a product takes well under a millisecond in numpy
JAX_MIN_WORK = 1_000_000


def pick(products: str, *, m: int, d: int, d2: int, q: int) -> str:
    """ "numpy" or "jax" for `products` ("auto", "numpy" or "jax") at this size."""
    if products not in PRODUCTS:
        raise ValueError(f"`products` must be one of {list(PRODUCTS)}; got {products!r}")
    if products != "auto":
        return products
    big = m * d + q * d * d2 >= JAX_MIN_WORK
    return "jax" if big and jax.default_backend() != "cpu" else "numpy"


@jax.jit
def _margins(D, Z, query, W):
    return jnp.sum((D @ W) * Z[query], axis=1)


@partial(jax.jit, static_argnames=("q",))
def _combine(D, Z, query, lam, q):
    C = jax.ops.segment_sum(lam[:, None] * D, query, num_segments=q)  # (q, d)
    return C.T @ Z


@partial(jax.jit, static_argnames=("shape",))
def _token_margins(X, alpha, flat, Z, W, shape):
    n, K, _ = shape
    V = (Z @ W.T).reshape(n, K, -1)  # W z_ik
    G = jnp.einsum("nkd,ntd->nkt", V, X)
    G = jnp.take_along_axis(G, alpha[:, :, None], axis=2) - G
    return G.reshape(-1)[flat]


@partial(jax.jit, static_argnames=("shape",))
def _token_combine(X, alpha, flat, Z, lam, shape):
    n, K, T = shape
    # .add: the padding's multipliers are zero and share index 0 with a real constraint
    L = jnp.zeros(n * K * T).at[flat].add(-lam).reshape(n, K, T)
    selected = jnp.arange(T)[None, None, :] == alpha[:, :, None]
    L = jnp.where(selected, -L.sum(axis=2, keepdims=True), L)  # λ_ikα = 0: it is no pair
    C = jnp.einsum("nkt,ntd->nkd", L, X)
    return C.reshape(n * K, -1).T @ Z


def _bucket(m: int) -> int:
    """The padded length of m constraints: the next power of two (at least 64), so that the
    working sets' changing sizes reuse a few compiled shapes instead of one each."""
    return max(64, 1 << (int(m) - 1).bit_length())


class DeviceProducts:
    """The constraints of a `Pairs` (and its `Tokens`, if any) held on the device, with the
    same products as `Pairs`, taking and returning numpy arrays. The m constraints are
    padded to `_bucket(m)` with zero rows (zero margins, zero multipliers), cut off again on
    return."""

    def __init__(self, D, Z, query, tokens=None):
        self.m, self.q = int(D.shape[0]), int(Z.shape[0])
        pad = _bucket(self.m) - self.m
        self.D = jnp.asarray(np.concatenate([D, np.zeros((pad, D.shape[1]))]))
        self.query = jnp.asarray(np.concatenate([query, np.zeros(pad, dtype=query.dtype)]))
        self.Z = jnp.asarray(Z)
        self.tokens = None
        if tokens is not None:
            flat = np.concatenate([tokens.flat, np.zeros(pad, dtype=tokens.flat.dtype)])
            self.tokens = (jnp.asarray(tokens.X), jnp.asarray(tokens.alpha), jnp.asarray(flat))
            self.shape = tuple(int(v) for v in tokens.shape)

    def _lam(self, lam):
        lam = np.asarray(lam, dtype=np.float64)
        return jnp.asarray(np.concatenate([lam, np.zeros(self.D.shape[0] - self.m)]))

    def _margins(self, W):
        if self.tokens is not None:
            return _token_margins(*self.tokens, self.Z, W, self.shape)
        return _margins(self.D, self.Z, self.query, W)

    def _combine(self, lam):
        if self.tokens is not None:
            return _token_combine(*self.tokens, self.Z, lam, self.shape)
        return _combine(self.D, self.Z, self.query, lam, self.q)

    def margins(self, W) -> np.ndarray:
        return np.asarray(self._margins(jnp.asarray(W, dtype=jnp.float64)))[: self.m]

    def combine(self, lam) -> np.ndarray:
        return np.asarray(self._combine(self._lam(lam)))

    def gram(self, lam) -> np.ndarray:
        """K λ = margins of B(λ), with B(λ) left on the device."""
        return np.asarray(self._margins(self._combine(self._lam(lam))))[: self.m]
