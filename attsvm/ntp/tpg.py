"""Token-priority graphs as arrays: build G^(k) from (tokens, winners) and number their SCCs
canonically (see `attsvm.ntp.graph` for the definitions; `docs/followups.md` §3.2). Works on
raw arrays, so `attsvm.ntp.problem` can use it without importing the problem-level API."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components


@dataclass(frozen=True, eq=False)
class PriorityGraphs:
    """TPGs of a data set.

    Attributes:
        adj: (K, K, K) bool, adj[k, a, b]: edge a → b in G^(k) (a has priority over b).
        present: (K,) bool, some sequence ends in k.
        scc: (K, K) int canonical SCC ids (0 = top), row -1 where not present.
        winners: per sequence, the tokens whose edges it adds ([y_i], or C_i for local).
        excluded: per sequence, tokens left out of its edges (E_i for local; else empty).
    """

    adj: np.ndarray
    present: np.ndarray
    scc: np.ndarray
    winners: tuple
    excluded: tuple

    @property
    def anchors(self) -> np.ndarray:
        """(n,) the first winner of each sequence (its label for the data graphs): the SCC
        of the anchor is the sequence's top SCC, which W^fin composes."""
        return np.array([w[0] if w else -1 for w in self.winners], np.int64)

    @property
    def cyclic(self) -> np.ndarray:
        """(K,) bool: G^(k) has a cycle (an SCC with ≥ 2 tokens)."""
        return np.array([row[0] >= 0 and len(set(row.tolist())) < len(row) for row in self.scc])

    def components(self, k: int) -> list[list[int]]:
        """The SCCs of G^(k), top first, as lists of token ids ([] if k is not present)."""
        row = self.scc[k]
        if row[0] < 0:
            return []
        return [np.flatnonzero(row == c).tolist() for c in range(row.max() + 1)]


def _canonical(adj: np.ndarray) -> np.ndarray:
    """SCC ids of one graph (K, K) numbered in topological order of the condensation."""
    K = adj.shape[0]
    nc, lab = connected_components(csr_matrix(adj), directed=True, connection="strong")
    cadj = np.zeros((nc, nc), bool)
    a, b = np.nonzero(adj)
    keep = lab[a] != lab[b]
    cadj[lab[a][keep], lab[b][keep]] = True
    indeg = cadj.sum(0)
    touched = np.zeros(nc, bool)
    touched[lab[a]] = True
    touched[lab[b]] = True
    first = np.array([np.flatnonzero(lab == c).min() for c in range(nc)])
    order, done = [], np.zeros(nc, bool)
    while len(order) < nc:
        ready = [c for c in range(nc) if not done[c] and indeg[c] == 0]
        c = min(ready, key=lambda c: (not touched[c], first[c]))
        done[c] = True
        order.append(c)
        indeg = indeg - cadj[c]
    rank = np.empty(nc, int)
    rank[order] = np.arange(nc)
    return rank[lab].astype(np.int64) if K else lab


def build_graphs(tokens: np.ndarray, winners, K: int, excluded=None) -> PriorityGraphs:
    """TPGs from token ids (n, T), per-sequence winner lists and excluded sets."""
    tokens = np.asarray(tokens)
    n = tokens.shape[0]
    excluded = [set() for _ in range(n)] if excluded is None else [set(e) for e in excluded]
    adj = np.zeros((K, K, K), bool)
    present = np.zeros(K, bool)
    for i in range(n):
        k = int(tokens[i, -1])
        present[k] = True
        seq = tokens[i].tolist()
        for c in winners[i]:
            if c not in seq:  # the authors skip labels absent from the sequence
                continue
            for j in seq:
                if j != c and j not in excluded[i]:
                    adj[k, c, j] = True
    scc = np.full((K, K), -1, np.int64)
    for k in np.flatnonzero(present):
        scc[k] = _canonical(adj[k])
    return PriorityGraphs(
        adj=adj,
        present=present,
        scc=scc,
        winners=tuple(tuple(int(c) for c in w) for w in winners),
        excluded=tuple(tuple(sorted(e)) for e in excluded),
    )


def scc_ids_of(tokens, labels, K: int) -> np.ndarray:
    """(K, K) SCC ids of the data TPGs (no validation; see `scc_ids`)."""
    return build_graphs(tokens, [[int(y)] for y in labels], K).scc
