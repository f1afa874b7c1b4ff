"""The Geometry page's panels: intro, the editable token tables, the numbers and the two
pictures (tokens with separating lines; GD paths against the SVM rays)."""

from __future__ import annotations

import numpy as np
import streamlit as st

import attsvm
from attsvm.config import custom_spec
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import about, hosted, linkdata
from ui.widgets import BOUND


def intro():
    st.title("Geometry in 2-D")
    st.markdown(
        "With d = 2 everything can be drawn. Each query z_i maps W to a vector W z_i in the token "
        "plane; token t gets the logit x_itᵀ(W z_i). GD on **W** drives W(k) z_i along the "
        "Frobenius SVM direction W^mm z_i, GD on **K Qᵀ** along the nuclear-norm direction "
        "W^mm_* z_i — the paper's two 2-D figures are the presets, and every token is editable."
    )


def _linked_arrays(prob0, link, tag: str) -> tuple:
    """(X, Y, Z, v): the link's edited data when it holds edits of these data (`tag`, shape),
    else `prob0`'s; a bad or stale link is dropped (with a warning when it is bad)."""
    n, T = prob0.n, prob0.T
    arrays = (prob0.X, prob0.Y, prob0.Z, prob0.v)
    hosted.read_param("geo_data")
    if link is not None:
        try:
            ltag, *linked = linkdata.decode(link, max_n=8, max_T=12)
        except ValueError as exc:
            st.warning(
                f"Ignored the link's edited data: {hosted.escape_markdown(exc)}",
                icon=":material/link_off:",
            )
            hosted.drop_param("geo_data")
        else:
            if ltag == tag and linked[0].shape[:2] == (n, T):
                arrays = tuple(linked)
            else:  # edits of other data (the source changed)
                hosted.drop_param("geo_data")
    return arrays


def edited_spec(prob0, base, *, tag: str, attention: str):
    """The problem to show: `base` (whose problem is `prob0`), or the user's edits of its
    tokens, queries, labels and v (kept in the link as `geo_data`, see ui/linkdata.py)."""
    n, T = prob0.n, prob0.T
    link = st.query_params.get("geo_data")
    arrays = _linked_arrays(prob0, link, tag)
    base_tables = frames.geometry_tables(prob0.X, prob0.Y, prob0.Z, prob0.v)
    tok, seq, vdf = frames.geometry_tables(*arrays)
    num = st.column_config.NumberColumn(format="%.4f")
    with st.expander(
        "Edit the tokens, queries, labels and v", expanded=link is not None, key="geo_edit_box"
    ):
        e1, e2, e3 = st.columns([3, 3, 2])
        tok_e = e1.data_editor(
            tok,
            key=f"geo_tok_{tag}",
            hide_index=True,
            disabled=["sequence", "token"],
            column_config={"x₁": num, "x₂": num},
        )
        seq_e = e2.data_editor(
            seq,
            key=f"geo_seq_{tag}",
            hide_index=True,
            disabled=["sequence"],
            column_config={
                "z₁": num,
                "z₂": num,
                "label Y": st.column_config.NumberColumn(help="+1 or −1", step=1),
            },
        )
        v_e = e3.data_editor(
            vdf, key=f"geo_v_{tag}", hide_index=True, column_config={"v₁": num, "v₂": num}
        )
        st.caption(
            "Token scores are γ_it = Y_i vᵀx_it; the optimal token (★) has the highest "
            "score in its sequence. Edits are kept in the page's URL: copy it to share "
            "them."
        )
    edited = not all(a.equals(b) for a, b in zip((tok_e, seq_e, v_e), base_tables, strict=True))
    if edited:
        mine = (
            tok_e[["x₁", "x₂"]].to_numpy(dtype=float).reshape(n, T, 2),
            seq_e["label Y"].to_numpy(dtype=float),
            seq_e[["z₁", "z₂"]].to_numpy(dtype=float),
            v_e[["v₁", "v₂"]].to_numpy(dtype=float)[0],
        )
        if all(np.all(np.isfinite(a)) for a in mine):  # (a blank cell is reported below)
            st.query_params["geo_data"] = linkdata.encode(tag, *mine)
        pspec = custom_spec(*mine, attention=attention)
        st.info("Showing your edited data.", icon=":material/edit:")
    else:
        hosted.drop_param("geo_data")  # no edits (any more): nothing to carry
        pspec = base.with_(attention=attention)
    return pspec


def numbers(runs: dict, fro, nuc, opt):
    """Each run's selection against opt, and its correlation with both SVMs."""
    cols = st.columns(4)
    for col, (label, run) in zip(cols[:2], runs.items(), strict=True):
        sel = run.alpha
        same = np.array_equal(sel, opt)
        col.metric(
            f"GD on {label}: selection",
            "·".join(map(str, sel)),
            "= opt" if same else "≠ opt",
            delta_color="normal" if same else "inverse",
        )
    if fro.feasible:
        for col, (label, run) in zip(cols[2:], runs.items(), strict=True):
            c_f = attsvm.correlation(run.W[-1], fro.W) if np.any(run.W[-1]) else float("nan")
            c_n = attsvm.correlation(run.W[-1], nuc.W) if np.any(run.W[-1]) else float("nan")
            col.metric(
                f"{label}-GD: corr with W^mm / W^mm_*",
                f"{c_f:.4f} / {c_n:.4f}",
                help="Each parameterization prefers its own norm: W-GD correlates best "
                "with the Frobenius solution, K Qᵀ-GD with the nuclear one.",
            )


def pictures(prob, opt, runs: dict, fro, nuc, sols: dict, tspec, init: str):
    """The token picture (separating lines of the chosen SVM) and the GD paths.

    Long because it lays out two controls, then two charts with their captions, in order."""
    show = st.segmented_control(
        "Separating lines of",
        ["Frobenius", "nuclear"],
        key="geo_lines",
        default="Frobenius",
        required=True,
        **BOUND,
        help="the SVM whose lines and support tokens are drawn: "
        "W^mm (Frobenius) or W^mm_* (nuclear)",
    )
    sol = fro if show == "Frobenius" else nuc
    tokens, lines, arrows = frames.geometry_tokens(prob, opt, sol, sols)
    scale = st.segmented_control(
        "GD paths",
        ["raw", "direction"],
        key="geo_scale",
        default="raw",
        required=True,
        **BOUND,
        help="**raw**: W(k) z_i, as the paper draws them; **direction**: W(k) z_i / ‖W(k)‖_F, "
        "which converges to W^mm z_i / ‖W^mm‖_F (resp. the nuclear solution)",
    )
    paths, rays = frames.geometry_paths(prob, runs, sols, direction=scale == "direction")
    left, right = st.columns(2)
    left.altair_chart(
        charts.geometry_tokens(
            tokens,
            lines,
            arrows,
            title=f"Tokens, optimal ★, support ○, separating lines of "
            f"{'W^mm' if show == 'Frobenius' else 'W^mm_*'}",
        )
    )
    about.explain(left, "geometry-tokens")
    left.caption(
        "Dotted: for each query, the line {x : xᵀ(W z_i) = x_optᵀ(W z_i) − ½}, halfway "
        "between the optimal token and the margin-1 level of its support tokens. "
        "Solid/dashed arrows: the directions W^mm z_i and W^mm_* z_i."
    )
    right.altair_chart(
        charts.geometry_paths(
            paths,
            rays,
            axis="W z_i" if scale == "raw" else "W z_i/‖W‖",
            title="GD paths W(k) z_i (solid W, dashed K Qᵀ)",
        )
    )
    about.explain(right, "geometry-paths")
    start = "W = 0 (K = 0.1·N(0, I), Q = 0)" if init == "zero" else "U(±1/√d)"
    right.caption(
        f"{tspec.steps} steps of {'normalized' if tspec.normalized else 'plain'} GD, "
        f"η = {tspec.lr:g}, from {start}"
        ". Scroll to zoom, drag to pan. Thin lines: the SVM rays"
        + (
            " (in the direction view they end where W(k) z_i/‖W(k)‖ converges)."
            if scale == "direction"
            else "."
        )
    )
    st.caption(
        "Separating lines go through each sequence's own optimal token (the authors' "
        "second 2-D notebook assumes it is token 0, true only for its data). The "
        "geometry-2 preset uses the 4-decimal values printed from that notebook, whose "
        "draw order could not be recovered."
    )
