"""Edited 2-D data in a link: the Geometry page's tokens, labels, queries and v as one URL
parameter, so a copied link shows the edited problem.

Format (plain text, no eval): ``TAG|n,T|X|Y|Z|v`` where TAG names the data the edits were
made on (a preset, or random_n_T_seed) and X (n·T·2), Y (n), Z (n·2), v (2) are
comma-separated numbers, each the shortest text that reads back to the same float64. A link
is untrusted input: `decode` checks the length, the counts, that every number is finite and
the sizes against the page's caps, and raises ValueError naming what is wrong.
"""

from __future__ import annotations

import math

import numpy as np

MAX_CHARS = 12_000


def _numbers(arr) -> str:
    return ",".join(repr(float(x)) for x in np.asarray(arr, dtype=float).ravel())


def encode(tag: str, X, Y, Z, v) -> str:
    """The link parameter for 2-D data X (n, T, 2), Y (n,), Z (n, 2), v (2,) edited from
    the data named `tag`."""
    n, T, _ = np.shape(X)
    return "|".join([tag, f"{n},{T}", _numbers(X), _numbers(Y), _numbers(Z), _numbers(v)])


def _parse(part: str, count: int, what: str) -> np.ndarray:
    items = part.split(",") if part else []
    if len(items) != count:
        raise ValueError(f"{what} must have {count} numbers; got {len(items)}")
    try:
        out = np.array([float(x) for x in items])
    except ValueError:
        raise ValueError(f"{what} must be numbers") from None
    if not all(math.isfinite(x) for x in out):
        raise ValueError(f"{what} must be finite")
    return out


def decode(text: str, *, max_n: int, max_T: int):
    """(tag, X, Y, Z, v) from a link parameter made by `encode`; ValueError if malformed."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        raise ValueError(f"the edited data must be text of at most {MAX_CHARS:,} characters")
    parts = text.split("|")
    if len(parts) != 6:
        raise ValueError("the edited data must read TAG|n,T|X|Y|Z|v")
    tag, size, xs, ys, zs, vs = parts
    try:
        n, T = (int(s) for s in size.split(","))
    except ValueError:
        raise ValueError("the edited data's size must read n,T") from None
    if not (1 <= n <= max_n and 1 <= T <= max_T):
        raise ValueError(
            f"the edited data must have 1 ≤ n ≤ {max_n} and 1 ≤ T ≤ {max_T}; got n={n}, T={T}"
        )
    X = _parse(xs, n * T * 2, "the tokens").reshape(n, T, 2)
    Y = _parse(ys, n, "the labels")
    Z = _parse(zs, n * 2, "the queries").reshape(n, 2)
    v = _parse(vs, 2, "v")
    return tag, X, Y, Z, v
