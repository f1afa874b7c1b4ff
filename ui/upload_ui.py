"""The upload widget: your own tokens, labels, queries and head from a CSV or NPZ file.

Files stay in this session's memory (Streamlit keeps uploads in RAM, `attsvm.io` parses
bytes); nothing is written to disk or shared with another session. The parsed problem is
kept in session state for the current file only.
"""

from __future__ import annotations

import streamlit as st

import attsvm
from attsvm import io as aio
from attsvm import limits
from attsvm.config import ProblemSpec, custom_spec

from . import hosted

FORMAT_HELP = (
    "**CSV**: header `kind,seq,token,label,f0,…,f{d-1}`; one `x` row per token "
    "(sequence `seq`, token `token`, its sequence's label ±1, features), optional one `z` row "
    "per sequence (its query; none means self-attention on token 0), one `v` row (the head "
    "vector) or, for the ReLU head, d `V` rows. **NPZ**: arrays `X` (n, T, d), `Y` (n,), "
    "optional `Z` (n, d), `v` (d,) or `V` (d, d), optional `head` (linear, relu, "
    "quadratic) and `lam`. "
    "The Export bundle's `data/problem.csv` is an example."
)


def upload_problem(*, key: str = "upload") -> attsvm.Problem | None:
    """Draw the uploader; return the uploaded problem, or None (nothing or a bad file, with
    the reason shown as st.error)."""
    L = limits.current()
    f = st.file_uploader(
        f"Your data (CSV or NPZ, ≤ {L.max_upload_bytes / 2**20:g} MB)",
        type=["csv", "npz"],
        key=key,
        max_upload_size=max(1, L.max_upload_bytes // 2**20),
        help=FORMAT_HELP,
    )
    memo = f"_{key}_parsed"
    if f is None:
        st.session_state.pop(memo, None)
        return None
    got = st.session_state.get(memo)
    if got is None or got[0] != f.file_id:
        try:
            got = (f.file_id, aio.load_problem(f.getvalue(), filename=f.name, limits=L), None)
        except ValueError as exc:
            got = (f.file_id, None, str(exc))
        st.session_state[memo] = got  # one entry per session: the current file
    _, prob, error = got
    if error:
        name = hosted.escape_markdown(f.name[:100].replace("`", "'"))
        st.error(
            f"**This file cannot be used** ({name}): {hosted.escape_markdown(error)}", icon="🚫"
        )
        return None
    head = prob.head + (f" (λ = {prob.lam:g})" if prob.head == "quadratic" else "")
    st.caption(
        f"Loaded n = {prob.n}, T = {prob.T}, d = {prob.d}, {prob.attention}-attention, {head} head."
    )
    return prob


def upload_spec(prob: attsvm.Problem, attention: str) -> ProblemSpec:
    """A ProblemSpec holding the uploaded arrays. Without queries the file means
    self-attention on token 0, which is cross-attention with z_i = x_i1."""
    Z = prob.Z if prob.Z is not None else prob.X[:, 0, :]
    return custom_spec(
        prob.X,
        prob.Y,
        Z,
        prob.v,
        attention="self" if prob.Z is None else attention,
        head=prob.head,
        V=prob.V,
        lam=prob.lam,
    )
