"""A stack of L self-attention layers with H heads each, in pure JAX (float64): the model
of docs/hierarchy.md, the "hierarchy of SVMs" that arXiv 2308.16898 (§8, its closing
sentence) proposes to read into a multi-layer transformer. For sequence i, h⁰ = X_i and
l = 1 … L:

    S^{l,h}[t, s] = softmax_s( (h^{l−1}_s)ᵀ W^{l,h} h^{l−1}_t )     (keys s ≤ t if causal)
    h^l_t = ρ h^{l−1}_t + Σ_h Σ_s S^{l,h}[t, s] (U^{l,h})ᵀ h^{l−1}_s
    f_i = vᵀ h^L_{i,q},   L(W) = (1/n) Σ_i ℓ(Y_i f_i)

With L = H = 1, ρ = 0, U = I this is the paper's one-layer model (§2, eq. (1)) with
z_i = x_{i,q}. The data cross `jit` as `model.Data` (its stack fields: `U`, `rho`; K = T
query rows, `mask` (n, T, T) the keys of each query row, `w` (n, T) 1/n at the query token
q and 0 elsewhere, `Y` (n, 1)).

The softmax averages are written in the centred form of docs/followups.md §4b: with ρ_t the
argmax key of row t (an integer, no gradient through the choice),
Σ_s S[t, s] u_s = u_{ρ_t} + Σ_s S[t, s] (u_s − u_{ρ_t}). The same numbers, but the softmax
backward then sees a cotangent exactly 0 at ρ_t, so no term of size 1 cancels and the
gradient stays exact far into saturation (`centred=False`: the plain form).
"""

from __future__ import annotations

from .model import Data, jax, jnp, loss_fn


def heads_of(params, param: str, L: int, H: int):
    """(L, H, d, d) W^{l,h} from the engine's parameters: a tuple of L·H matrices W
    (param "W"), or of L·H pairs (K, Q) with W = K Qᵀ (param "KQ"), layer-major."""
    if param == "W":
        Ws = list(params)
    else:
        Ws = [K @ Q.T for K, Q in params]
    d = Ws[0].shape[0]
    return jnp.stack(Ws).reshape(L, H, d, d)


def _attend(a, u, centred: bool):
    """s = softmax over the last axis of the logits a (H, n, T, T) and r = Σ_s s u_s
    (H, n, T, d) for values u (H, n, T, d); centred: written as u_ρ + Σ_s s (u_s − u_ρ)."""
    s = jax.nn.softmax(a, axis=-1)
    if not centred:
        return s, jnp.einsum("hnts,hnsd->hntd", s, u)
    rho = jax.lax.stop_gradient(jnp.argmax(a, axis=-1))  # (H, n, T)
    u_rho = jnp.take_along_axis(u, rho[..., None], axis=2)  # (H, n, T, d)
    diff = u[:, :, None, :, :] - u_rho[:, :, :, None, :]  # (H, n, T, S, d)
    return s, u_rho + jnp.einsum("hnts,hntsd->hntd", s, diff)


def forward(Ws, data: Data, *, centred: bool = True):
    """Every layer's attention and tokens: (S (L, H, n, T, T), h (L + 1, n, T, d), h[0] = X)
    for W^{l,h} = Ws (L, H, d, d)."""
    h = data.X
    S, hs = [], [h]
    for l in range(Ws.shape[0]):
        a = jnp.einsum("nsd,hde,nte->hnts", h, Ws[l], h)
        a = jnp.where(data.mask[None], a, -jnp.inf)
        u = jnp.einsum("nsd,hde->hnse", h, data.U[l])  # (U^{l,h})ᵀ h_s
        s, r = _attend(a, u, centred)
        S.append(s)
        h = data.rho * h + jnp.sum(r, axis=0)
        hs.append(h)
    return jnp.stack(S), jnp.stack(hs)


def predictions(Ws, data: Data, *, centred: bool = True):
    """f_i = vᵀ h^L_{i,q} (n,) and the attention S (L, H, n, T, T)."""
    S, hs = forward(Ws, data, centred=centred)
    h = hs[-1]
    read = jnp.einsum("ntd,d->nt", h, data.v)
    return jnp.sum(jnp.where(data.w > 0, read, 0.0), axis=-1), S


def objective_and_records(
    params, data: Data, ridge, *, param: str, loss_kind: str, centred: bool = True
):
    """What the engine's GD minimizes for a stack, with its records: (objective,
    (L, S, W, logscale = 0)), objective = L(W) (+ ridge Σ_{l,h} (‖K‖² + ‖Q‖²) for "KQ")."""
    L_, H = data.U.shape[:2]
    Ws = heads_of(params, param, L_, H)
    f, S = predictions(Ws, data, centred=centred)
    risk = jnp.sum(jnp.sum(data.w, axis=-1) * loss_fn(data.Y[:, 0] * f, loss_kind))
    total = risk
    if param == "KQ":
        total = risk + ridge * sum(jnp.sum(K * K) + jnp.sum(Q * Q) for K, Q in params)
    return total, (risk, S, Ws, jnp.zeros((), Ws.dtype))
