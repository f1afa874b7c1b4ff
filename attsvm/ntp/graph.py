"""Token-priority graphs (TPGs) and their strongly connected components (arXiv 2403.08081
"token-priority graph"; the authors' `Tarjan.initialize`).

One directed graph G^(k) on the vocabulary [K] per last token k: every sequence i ending in k
(x_iT = e_k) adds an edge y_i → j for every other token j of X_i ("the label has priority
over every token it beat"). Tokens in one SCC of G^(k) have equal priority (the model
composes them softly, W^fin); an edge between two SCCs is a strict priority (the model
retrieves the higher one, W^svm).

SCC ids here are canonical: per graph, the SCCs are numbered in a topological order of the
condensation, 0 = highest priority (ties broken by the smallest token id, untouched tokens
last). Rows of last tokens that no sequence ends in are -1.

The *local* graph (the authors' local-convergence notebook, `Tarjan.initialize_local`) replaces
the label by the set C_i of tokens GD actually selected (attention mass > `select`) and
leaves out the ambiguous tokens E_i (mass in (`ambiguous`, `select`]).
"""

from __future__ import annotations

import numpy as np

from .problem import NTPProblem
from .tpg import PriorityGraphs, build_graphs, scc_ids_of  # noqa: F401  (re-exported)

SELECT, AMBIGUOUS = 1e-2, 9e-3  # the authors' local thresholds (ad hoc, pitfall 7)


def priority_graphs(prob: NTPProblem) -> PriorityGraphs:
    """The data TPGs G^(k), k ∈ [K] (the authors' `Tarjan.initialize`; `docs/followups.md`
    §3.2)."""
    if not isinstance(prob, NTPProblem):
        raise ValueError(f"`prob` must be an attsvm.ntp.NTPProblem; got {type(prob).__name__}")
    return build_graphs(prob.tokens, [[int(y)] for y in prob.labels], prob.K)


def scc_ids(prob: NTPProblem) -> np.ndarray:
    """(K, K) int: SCC id of token j in G^(k) at [k, j] (0 = top priority); -1 rows for
    last tokens that never occur."""
    return priority_graphs(prob).scc


def selection_sets(prob: NTPProblem, mass, *, select: float = SELECT, ambiguous: float = AMBIGUOUS):
    """C_i = {tokens with attention mass > select}, E_i = {ambiguous < mass ≤ select}.

    mass: (n, T) attention s_it (tokens are distinct, so the mass of a token id is s_it).
    """
    mass = np.asarray(mass, dtype=float)
    if mass.shape != (prob.n, prob.T):
        raise ValueError(f"`mass` must be an ({prob.n}, {prob.T}) array; got {mass.shape}")
    C = [prob.tokens[i][mass[i] > select].tolist() for i in range(prob.n)]
    E = [
        prob.tokens[i][(mass[i] > ambiguous) & (mass[i] <= select)].tolist() for i in range(prob.n)
    ]
    return C, E


def local_graphs(
    prob: NTPProblem, mass, *, select: float = SELECT, ambiguous: float = AMBIGUOUS
) -> PriorityGraphs:
    """Local TPGs from GD's selection: edges c → j, c ∈ C_i, j ∈ X_i \\ ({c} ∪ E_i)."""
    C, E = selection_sets(prob, mass, select=select, ambiguous=ambiguous)
    return build_graphs(prob.tokens, C, prob.K, E)


# -- the cyclic part: reduced data and the subspace S_fin --------------------------------------
def _anchors(prob: NTPProblem, anchors):
    return prob.labels if anchors is None else np.asarray(anchors, np.int64)


def reduced_mask(prob: NTPProblem, scc=None, anchors=None) -> np.ndarray:
    """(n, T) bool: the tokens of each sequence in its label's SCC (of G^(k_i)), for the
    sequences where that SCC holds at least one other token of the sequence (the others
    are dropped: all False). The data of W^fin ("soft composition").

    `anchors` (n,): the token whose SCC is kept (default the labels; for the local graphs
    a selected token, `PriorityGraphs.anchors` — the authors reduce by the label's local
    SCC, which drops a cycle among selected tokens that does not contain the label)."""
    scc = scc_ids(prob) if scc is None else np.asarray(scc)
    k = prob.last
    S = scc[k]  # (n, K)
    tok_scc = np.take_along_axis(S, prob.tokens, axis=1)  # (n, T)
    lab_scc = S[np.arange(prob.n), _anchors(prob, anchors)]  # (n,)
    mask = tok_scc == lab_scc[:, None]
    mask &= (mask.sum(1) >= 2)[:, None]
    return mask


def cyclic_basis(prob: NTPProblem, scc=None, anchors=None, *, rtol: float = 1e-10) -> np.ndarray:
    """Orthonormal (Frobenius) basis (r, d, d) of the cyclic subspace S_fin: the span of
    (e_j − ē_C) e_kᵀ over every token j of the label's SCC C of G^(k), for each sequence
    that keeps a reduced sample (ē_C the mean of C's embeddings; the authors' `cal_Sfin`)."""
    scc = scc_ids(prob) if scc is None else np.asarray(scc)
    keep = reduced_mask(prob, scc, anchors).any(1)
    gens = []
    for i in np.flatnonzero(keep):
        k, y = prob.last[i], _anchors(prob, anchors)[i]
        members = np.flatnonzero(scc[k] == scc[k, y])
        C = prob.E[members] - prob.E[members].mean(0)
        gens += [np.outer(c, prob.E[k]).ravel() for c in C]
    d = prob.d
    if not gens:
        return np.zeros((0, d, d))
    _, sv, Vt = np.linalg.svd(np.array(gens), full_matrices=False)
    r = int(np.sum(sv > rtol * max(sv.max(), 1.0)))
    return Vt[:r].reshape(r, d, d)


def project(basis: np.ndarray, W) -> np.ndarray:
    """Π_S W = Σ_b ⟨B_b, W⟩ B_b for an orthonormal basis (r, d, d); W may be a stack."""
    W = np.asarray(W, dtype=float)
    if basis.shape[0] == 0:
        return np.zeros_like(W)
    c = np.einsum("rab,...ab->...r", basis, W)
    return np.einsum("...r,rab->...ab", c, basis)


def top_scc_tokens(prob: NTPProblem, scc=None, anchors=None) -> np.ndarray:
    """(n, T) bool: token t of sequence i is in its top SCC — the label's SCC of G^(k_i),
    the highest-priority SCC present in the sequence, since the label beats every other
    token of it (or the anchor's, see `reduced_mask`)."""
    scc = scc_ids(prob) if scc is None else np.asarray(scc)
    S = scc[prob.last]
    return (
        np.take_along_axis(S, prob.tokens, axis=1)
        == S[np.arange(prob.n), _anchors(prob, anchors)][:, None]
    )


def top_scc_mass(prob: NTPProblem, probs, scc=None, anchors=None) -> np.ndarray:
    """Attention mass on the top SCC, Σ_{t in top SCC} s_it (`top_scc_tokens`).

    probs: (..., n, T) attention; returns (..., n). (The authors' plotted `attn_probs` is
    the largest mass over all SCCs, which equals this once it exceeds ½.)"""
    return np.sum(np.asarray(probs) * top_scc_tokens(prob, scc, anchors), axis=-1)
