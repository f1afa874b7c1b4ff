"""attsvm.io: the upload format round-trips, and every bad file gets a message naming it."""

from __future__ import annotations

import builtins
import io
import os
import re
import zipfile

import numpy as np
import pytest

import attsvm
from attsvm import io as aio
from attsvm.limits import LIMITS

HOSTED, LOCAL = LIMITS["hosted"], LIMITS["local"]


def npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def csv_of(prob, edit=None) -> bytes:
    text = aio.problem_to_csv(prob).decode()
    return (edit(text) if edit else text).encode()


@pytest.fixture
def prob():
    return attsvm.random_problem(n=3, T=4, d=5, seed=1)


def same(a: attsvm.Problem, b: attsvm.Problem):
    for k in ("X", "Y", "Z", "v", "V"):
        x, y = getattr(a, k), getattr(b, k)
        assert (x is None) == (y is None), k
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=k)  # exact: floats written by repr
    assert (a.head, a.lam, a.query_index, a.attention) == (
        b.head,
        b.lam,
        b.query_index,
        b.attention,
    )


@pytest.mark.parametrize("fmt", ["csv", "npz"])
@pytest.mark.parametrize("kw", [{}, {"attention": "self"}, {"head": "relu"}])
def test_written_problems_load_back_exactly(fmt, kw):
    p = attsvm.random_problem(n=3, T=4, d=5, seed=2, **kw)
    data = aio.problem_to_csv(p) if fmt == "csv" else aio.problem_to_npz(p)
    q = aio.load_problem(data, filename=f"mine.{fmt}", limits=HOSTED)
    same(p, q)
    assert q.name == f"upload: mine.{fmt}"


def test_npz_round_trips_the_quadratic_head_and_self_attention_query_index():
    p = attsvm.random_problem(
        n=2, T=3, d=4, seed=0, head="quadratic", lam=0.25, attention="self", query_index=2
    )
    same(p, aio.load_problem(aio.problem_to_npz(p), filename="q.npz"))
    with pytest.raises(ValueError, match="use NPZ"):
        aio.problem_to_csv(p)


def test_npz_accepts_the_long_names(prob):
    data = npz(tokens=prob.X, labels=prob.Y.astype(int), queries=prob.Z, v=prob.v)
    same(prob, aio.load_problem(data, filename="a.npz"))


def test_blank_lines_and_a_utf8_bom_are_fine(prob):
    data = b"\xef\xbb\xbf" + csv_of(prob, lambda t: t.replace("\n", "\n\n", 3))
    same(prob, aio.load_problem(data, filename="a.csv"))


# -- bad files: (what, file name, bytes builder, field named, rule fragment) -------------------
P = attsvm.random_problem(n=3, T=4, d=5, seed=1)
X, Y, Z, V = P.X, P.Y, P.Z, P.v
BIG = HOSTED.max_upload_bytes + 1


def set_cell(text, prefix, col, value):
    """Replace column `col` of the line starting with `prefix`."""
    lines = text.split("\n")
    k = next(j for j, line in enumerate(lines) if line.startswith(prefix))
    cells = lines[k].split(",")
    cells[col] = value
    lines[k] = ",".join(cells)
    return "\n".join(lines)


def _drop_line(text, prefix):
    return "\n".join(line for line in text.split("\n") if not line.startswith(prefix))


BAD = [
    ("empty file", "a.csv", lambda: b"", "file", "non-empty"),
    ("oversized file", "a.csv", lambda: b"x" * BIG, "file", "at most 2.00 MB in hosted mode"),
    ("unknown extension", "a.exe", lambda: b"MZ", "file", ".csv or .npz"),
    ("binary as csv", "a.csv", lambda: bytes(range(256)), "file", "UTF-8"),
    ("null bytes", "a.csv", lambda: b"kind\x00", "file", "text"),
    ("wrong header", "a.csv", lambda: b"a,b,c\n1,2,3\n", "file", "header is kind,seq"),
    ("html header", "a.csv", lambda: b"<script>alert(1)</script>\n", "file", "header"),
    ("no feature column", "a.csv", lambda: b"kind,seq,token,label\n", "file", "d ≥ 1"),
    (
        "too many columns",
        "a.csv",
        lambda: ("kind,seq,token,label," + ",".join(f"f{j}" for j in range(129))).encode(),
        "file",
        "at most 132 columns",
    ),
    (
        "ragged row",
        "a.csv",
        lambda: csv_of(P, lambda t: set_cell(t, "x,0,1,", 4, "9,9")),
        "file",
        "rows of 9 fields",
    ),
    (
        "nan token",
        "a.csv",
        lambda: csv_of(P, lambda t: set_cell(t, "x,0,1,", 4, "nan")),
        "tokens",
        "finite",
    ),
    (
        "html in a number",
        "a.csv",
        lambda: csv_of(P, lambda t: set_cell(t, "x,1,2,", 5, "<b>hi</b>")),
        "f1",
        "a number",
    ),
    (
        "label 0",
        "a.csv",
        lambda: csv_of(P, lambda t: set_cell(t, "x,0,0,", 3, "0")),
        "labels",
        "+1 or -1",
    ),
    (
        "labels differ within a sequence",
        "a.csv",
        lambda: csv_of(P, lambda t: set_cell(t, "x,0,3,", 3, str(-int(P.Y[0])))),
        "labels",
        "same on every token",
    ),
    (
        "missing token",
        "a.csv",
        lambda: csv_of(P, lambda t: _drop_line(t, "x,1,2,")),
        "tokens",
        "no row for seq 1, token 2",
    ),
    (
        "repeated token",
        "a.csv",
        lambda: csv_of(P, lambda t: t + t.split("\n")[1] + "\n"),
        "tokens",
        "one row per",
    ),
    (
        "negative seq",
        "a.csv",
        lambda: csv_of(P, lambda t: t.replace("x,2,0,", "x,-2,0,")),
        "seq",
        "an index in",
    ),
    (
        "10^9 seq",
        "a.csv",
        lambda: csv_of(P, lambda t: t.replace("x,2,0,", "x,1000000000,0,")),
        "seq",
        "an index in [0, 63]",
    ),
    (
        "unknown kind",
        "a.csv",
        lambda: csv_of(P, lambda t: t.replace("z,0,", "<img>,0,")),
        "kind",
        "one of",
    ),
    (
        "missing v",
        "a.csv",
        lambda: csv_of(P, lambda t: _drop_line(t, "v,")),
        "head vector v",
        "present",
    ),
    (
        "some queries missing",
        "a.csv",
        lambda: csv_of(P, lambda t: _drop_line(t, "z,1,")),
        "queries",
        "one z row for each",
    ),
    ("not a zip", "a.npz", lambda: b"PK\x03\x04garbage", "file", "valid NPZ"),
    (
        "unknown array",
        "a.npz",
        lambda: npz(X=X, Y=Y, v=V, evil=np.zeros(1)),
        "file",
        "arrays among",
    ),
    (
        "object array",
        "a.npz",
        lambda: npz(X=X, Y=np.array([1, -1, 1], dtype=object), v=V),
        "labels",
        "numeric",
    ),
    ("text tokens", "a.npz", lambda: npz(X=np.array(["a"]), Y=Y, v=V), "tokens", "numeric"),
    ("2-d tokens", "a.npz", lambda: npz(X=X[0], Y=Y, v=V), "tokens", "3-d"),
    ("wrong labels shape", "a.npz", lambda: npz(X=X, Y=Y[:2], v=V), "labels", "shape (3,)"),
    ("wrong queries shape", "a.npz", lambda: npz(X=X, Y=Y, Z=Z[:, :2], v=V), "queries", "shape"),
    (
        "inf token",
        "a.npz",
        lambda: npz(X=np.where(X > 0.5, np.inf, X), Y=Y, v=V),
        "tokens",
        "finite",
    ),
    ("nan head", "a.npz", lambda: npz(X=X, Y=Y, v=np.full(5, np.nan)), "head vector v", "finite"),
    ("labels ±2", "a.npz", lambda: npz(X=X, Y=2 * Y, v=V), "labels", "+1 or -1"),
    ("no labels", "a.npz", lambda: npz(X=X, v=V), "labels", "present"),
    (
        "too many sequences",
        "a.npz",
        lambda: npz(X=np.ones((65, 2, 2)), Y=np.ones(65), v=np.ones(2)),
        "tokens (n)",
        "between 1 and 64 in hosted mode",
    ),
    (
        "d over the cap",
        "a.npz",
        lambda: npz(X=np.ones((1, 2, 129)), Y=np.ones(1), v=np.ones(129)),
        "tokens (d)",
        "between 1 and 128",
    ),
    (
        "huge declared shape",
        "a.npz",
        lambda: npz(X=np.zeros((1, 100, 10_000), dtype=np.uint8), Y=Y, v=V),
        "tokens",
        "entries",
    ),
    (
        "unknown head",
        "a.npz",
        lambda: npz(X=X, Y=Y, v=V, head=np.array("<script>")),
        "head",
        "one of",
    ),
]


@pytest.mark.parametrize("what, name, make, field, rule", BAD, ids=[b[0] for b in BAD])
def test_bad_files_are_refused_with_a_message_naming_the_field(what, name, make, field, rule):
    with pytest.raises(ValueError) as info:
        aio.load_problem(make(), filename=name, limits=HOSTED)
    msg = str(info.value)
    assert f"`{field}" in msg and rule in msg, msg
    outside = re.sub(r"`[^`]*`", "", msg)  # user text only inside code spans
    assert "<" not in outside and "](" not in outside, msg


def test_user_text_is_echoed_short_and_inside_a_code_span():
    data = csv_of(P, lambda t: t.replace("z,0,", "`![x](http://e/p.png)" + "A" * 100 + ",0,"))
    with pytest.raises(ValueError) as info:
        aio.load_problem(data, filename="a.csv", limits=HOSTED)
    msg = str(info.value)
    assert "`?![x](http://e/p.png)" in msg and "A" * 40 not in msg


def test_local_mode_allows_what_hosted_refuses():
    X = np.random.default_rng(0).standard_normal((80, 3, 2))
    data = npz(X=X, Y=np.ones(80), v=np.array([1.0, 0.5]))
    with pytest.raises(ValueError, match="hosted"):
        aio.load_problem(data, filename="a.npz", limits=HOSTED)
    assert aio.load_problem(data, filename="a.npz", limits=LOCAL).n == 80


def test_a_zip_bomb_member_is_refused_before_it_is_inflated():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("X.npy", b"\x00" * (60 * 2**20))  # 60 MB of zeros, ~60 kB zipped
    assert len(buf.getvalue()) < HOSTED.max_upload_bytes
    with pytest.raises(ValueError, match="`tokens` must be at most .* uncompressed"):
        aio.load_problem(buf.getvalue(), filename="bomb.npz", limits=HOSTED)


def test_parsing_never_touches_the_disk(monkeypatch, prob):
    def no_disk(*a, **k):
        raise AssertionError("load_problem opened a file")

    monkeypatch.setattr(builtins, "open", no_disk)
    monkeypatch.setattr(os, "open", no_disk)
    aio.load_problem(aio.problem_to_csv(prob), filename="a.csv")
    aio.load_problem(aio.problem_to_npz(prob), filename="a.npz")


def test_non_bytes_are_refused():
    with pytest.raises(ValueError, match="`file` must be bytes"):
        aio.load_problem("kind,seq", filename="a.csv")
