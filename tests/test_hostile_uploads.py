"""Hostile uploads: every file a visitor can send is either a clean Problem or a ValueError
naming the field, refused fast and without allocating more than a few MB beyond the file.

Table-driven cases for each class of attack seen on the hosted demo (overflowing headers,
huge declared dtypes, compression bombs) and more (zip structure, encodings, formula and
markup text), then property-based fuzzing of both parsers with hypothesis.
"""

from __future__ import annotations

import io
import struct
import time
import tracemalloc
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import attsvm
from attsvm import io as aio
from attsvm.limits import LIMITS

HOSTED = LIMITS["hosted"]
PEAK_MB = 16  # allocation allowed beyond the file while refusing it


def header(descr: str, shape, fortran=False) -> bytes:
    """A version-1.0 .npy header with any descr and shape text (no validation)."""
    text = "{'descr': %r, 'fortran_order': %r, 'shape': %s, }" % (descr, fortran, shape)
    text = text + " " * ((-(len(text) + 11)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


def zipped(members: dict, method=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    return buf.getvalue()


def good_arrays() -> dict:
    p = attsvm.random_problem(n=2, T=3, d=2, seed=0)
    return {"X.npy": _npy(p.X), "Y.npy": _npy(p.Y), "v.npy": _npy(p.v)}


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def with_member(name: str, raw: bytes, method=zipfile.ZIP_STORED) -> bytes:
    return zipped({**good_arrays(), name: raw}, method)


def bomb(size: int) -> bytes:
    """A deflated X.npy member whose valid header declares a small float array but whose
    data inflates to `size` bytes (zeros compress ~1000:1)."""
    raw = header("<f8", (2, 3, 2)) + bytes(size)
    return zipped({**good_arrays(), "X.npy": raw}, zipfile.ZIP_DEFLATED)


def lying_size(n_bytes: int) -> bytes:
    """A zip whose X.npy says it inflates to 10 bytes but inflates to `n_bytes`."""
    data = zipped({**good_arrays(), "X.npy": bytes(n_bytes)}, zipfile.ZIP_DEFLATED)
    blob = bytearray(data)
    # patch the uncompressed size in the local header and in the central directory
    for sig, off in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        start = 0
        while (i := blob.find(sig, start)) >= 0:
            name_len = struct.unpack_from("<H", blob, i + (26 if sig == b"PK\x03\x04" else 28))[0]
            name = bytes(blob[i + (30 if sig == b"PK\x03\x04" else 46) :][:name_len])
            if name == b"X.npy":
                struct.pack_into("<I", blob, i + off, 10)
            start = i + 4
    return bytes(blob)


# (file name, bytes, the field the message must name, a word of the rule)
CASES = {
    # 1. array headers that overflow the int64 range
    "shape above int64": (
        "a.npz",
        with_member("X.npy", header("<f8", (2**70, 3, 2))),
        "tokens",
        "entries",
    ),
    "shape product overflows": (
        "a.npz",
        with_member("X.npy", header("<f8", (2**40, 2**40))),
        "tokens",
        "entries",
    ),
    "negative shape": (
        "a.npz",
        with_member("X.npy", header("<f8", (-1, 3, 2))),
        "tokens",
        "non-negative",
    ),
    "shape not ints": (
        "a.npz",
        with_member("X.npy", header("<f8", "(2.5, 3)")),
        "tokens",
        "valid .npy",
    ),
    "shape of strings": (
        "a.npz",
        with_member("X.npy", header("<f8", "('2', 3)")),
        "tokens",
        "valid .npy",
    ),
    "4-d tokens": (
        "a.npz",
        with_member("X.npy", header("<f8", (1, 1, 1, 1)) + bytes(8)),
        "tokens",
        "3-d",
    ),
    # 2. huge or forbidden dtypes
    "a million characters per element": (
        "a.npz",
        with_member("head.npy", header("<U1000000", (1000,))),
        "head",
        "one word",
    ),
    "string tokens": (
        "a.npz",
        with_member("X.npy", header("<U8", (2, 3, 2))),
        "tokens",
        "real numeric",
    ),
    "object dtype": (
        "a.npz",
        with_member("X.npy", header("|O", (2, 3, 2))),
        "tokens",
        "real numeric",
    ),
    "complex tokens": (
        "a.npz",
        with_member("X.npy", header("<c16", (2, 3, 2))),
        "tokens",
        "real numeric",
    ),
    "long double": (
        "a.npz",
        with_member("X.npy", header("<f16", (2, 3, 2))),
        "tokens",
        "real numeric",
    ),
    "structured dtype": (
        "a.npz",
        with_member("X.npy", header([("a", "<f8")], (2, 3, 2))),
        "tokens",
        "real numeric",
    ),
    "sub-array dtype": (
        "a.npz",
        with_member("X.npy", header([("a", "<f8", (1000,))], (2,))),
        "tokens",
        "real numeric",
    ),
    "datetime": (
        "a.npz",
        with_member("X.npy", header("<M8[s]", (2, 3, 2)) + bytes(96)),
        "tokens",
        "real numeric",
    ),
    "unknown descr": ("a.npz", with_member("X.npy", header("<q9", (2,))), "tokens", "valid .npy"),
    "header is code": (
        "a.npz",
        with_member("X.npy", b"\x93NUMPY\x01\x00\x10\x00__import__('os')\n"),
        "tokens",
        "valid .npy",
    ),
    "header too long": (
        "a.npz",
        with_member(
            "X.npy",
            b"\x93NUMPY\x02\x00" + struct.pack("<I", 10**7) + b"{" * 10**7,
            zipfile.ZIP_DEFLATED,
        ),
        "tokens",
        "at most",
    ),
    "npy version 9": (
        "a.npz",
        with_member("X.npy", b"\x93NUMPY\x09\x00" + bytes(60)),
        "tokens",
        "valid .npy",
    ),
    "truncated data": (
        "a.npz",
        with_member("X.npy", header("<f8", (2, 3, 2)) + bytes(40)),
        "tokens",
        "complete",
    ),
    "trailing data": (
        "a.npz",
        with_member("X.npy", header("<f8", (2, 3, 2)) + bytes(200)),
        "tokens",
        "complete",
    ),
    # 3. compression bombs
    "bomb 600 MB": ("a.npz", bomb(600 * 2**20), "tokens", "uncompressed"),
    "size field lies": ("a.npz", lying_size(50 * 2**20), "file", "readable"),
    # zip structure
    "not a zip": ("a.npz", b"PK\x03\x04" + bytes(100), "file", "NPZ"),
    "empty zip": ("a.npz", zipped({}), "tokens", "present"),
    "too many members": ("a.npz", zipped({f"m{i}.npy": b"" for i in range(40)}), "file", "at most"),
    "duplicate member": (
        "a.npz",
        zipped({**good_arrays(), "tokens.npy": _npy(np.ones(3))}),
        "file",
        "once",
    ),
    "member in a folder": ("a.npz", with_member("../../etc/X.npy", b""), "file", "among"),
    "bzip2 members": ("a.npz", zipped(good_arrays(), zipfile.ZIP_BZIP2), "tokens", "deflated"),
    # encodings and text
    "utf-16 csv": (
        "a.csv",
        "kind,seq,token,label,f0\nx,0,0,1,1\n".encode("utf-16"),
        "file",
        "UTF-8",
    ),
    "binary csv": ("a.csv", b"kind,seq\x00", "file", "text"),
    "formula injection": (
        "a.csv",
        b'kind,seq,token,label,f0\n=HYPERLINK("http://x"),0,0,1,1\n',
        "kind",
        "one of",
    ),
    "markdown in a cell": (
        "a.csv",
        b"kind,seq,token,label,f0\nx,0,0,1,[a](javascript:alert(1))\n",
        "f0",
        "number",
    ),
    "html in a cell": (
        "a.csv",
        b"kind,seq,token,label,f0\n<img src=x onerror=alert(1)>,0,0,1,1\n",
        "kind",
        "one of",
    ),
    "huge index": (
        "a.csv",
        b"kind,seq,token,label,f0\nx," + b"9" * 5000 + b",0,1,1\n",
        "seq",
        "integer",
    ),
    "number beyond float": (
        "a.csv",
        b"kind,seq,token,label,f0\nx,0,0,1,1e400\nv,,,,1\n",
        "tokens",
        "finite",
    ),
    "100 KB number": (
        "a.csv",
        b"kind,seq,token,label,f0\nx,0,0,1," + b"1" * 100_000 + b"\n",
        "tokens",
        "finite",
    ),
    "200 KB cell": (
        "a.csv",
        b"kind,seq,token,label,f0\nx,0,0,1," + b"1" * 200_000 + b"\n",
        "file",
        "well-formed",
    ),
    "nan label": ("a.csv", b"kind,seq,token,label,f0\nx,0,0,nan,1\n", "labels", "+1 or -1"),
    "million columns": (
        "a.csv",
        b"kind,seq,token,label," + b"f,".join([b""] * 200_000) + b"\n",
        "file",
        "columns",
    ),
    "many rows": (
        "a.csv",
        b"kind,seq,token,label,f0\n" + b"\n".join([b"x,0,0,1,1"] * 50_000),
        "tokens",
        "one row",
    ),
    "nested quotes": (
        "a.csv",
        b'kind,seq,token,label,f0\n"' + b'""' * 70_000 + b'",0,0,1,1\n',
        "kind",
        "one of",
    ),
    "bad file name": ("x.exe", b"1", "file", ".csv or .npz"),
    "npz scalars nan": (
        "a.npz",
        zipped(
            {
                **good_arrays(),
                "head.npy": _npy(np.array("quadratic")),
                "lam.npy": _npy(np.array(np.nan)),
            }
        ),
        "lam",
        "finite",
    ),
    "npz query index huge": (
        "a.npz",
        zipped(
            {**{k: v for k, v in good_arrays().items()}, "query_index.npy": _npy(np.array(2**62))}
        ),
        "query_index",
        "integer",
    ),
}


def _bad_crc() -> bytes:
    raw = bytearray(zipped(good_arrays()))
    i = raw.find(b"PK\x01\x02")  # central directory entry of the first member
    struct.pack_into("<I", raw, i + 16, 0xDEADBEEF)
    j = raw.find(b"PK\x03\x04")
    struct.pack_into("<I", raw, j + 14, 0xDEADBEEF)
    return bytes(raw)


def _encrypted() -> bytes:
    raw = bytearray(zipped(good_arrays()))
    for sig, off in ((b"PK\x01\x02", 8), (b"PK\x03\x04", 6)):
        i = raw.find(sig)
        struct.pack_into("<H", raw, i + off, 1)
    return bytes(raw)


CASES["bad crc"] = ("a.npz", _bad_crc(), "file", "readable")
CASES["encrypted member"] = ("a.npz", _encrypted(), "tokens", "unencrypted")


def refuse(name: str, data: bytes):
    """Load under the hosted caps; return (error, seconds, peak MB allocated)."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        aio.load_problem(data, filename=name, limits=HOSTED)
        err = None
    except ValueError as exc:
        err = exc
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return err, dt, peak


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_upload_is_refused_fast_naming_the_field(case):
    name, data, field, rule = CASES[case]
    if len(data) > HOSTED.max_upload_bytes:  # the bomb must fit the upload cap to count
        pytest.fail(f"{case}: test file of {len(data):,} bytes is over the upload cap")
    err, dt, peak = refuse(name, data)
    assert err is not None, f"{case}: accepted"
    msg = str(err)
    assert msg.startswith(f"`{field}`"), msg
    assert rule in msg, msg
    assert dt < 1.0, f"{case}: {dt:.2f} s"
    assert peak < len(data) / 2**20 + PEAK_MB, f"{case}: {peak:.1f} MB allocated"


def test_the_bomb_really_inflates_past_the_cap():
    """The bomb case is a real one: 600 MB of zeros in well under the 2 MB upload cap."""
    data = bomb(600 * 2**20)
    assert len(data) < HOSTED.max_upload_bytes
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.getinfo("X.npy").file_size > 600 * 2**20


def test_a_lying_size_field_is_caught_while_inflating():
    data = lying_size(50 * 2**20)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert z.getinfo("X.npy").file_size == 10  # the header lies
    err, _, peak = refuse("a.npz", data)  # zipfile stops at the declared size: bad CRC
    assert str(err).startswith("`file` must be a readable NPZ archive"), err
    assert peak < PEAK_MB


def test_inflating_stops_at_the_cap_whatever_the_header_says(monkeypatch):
    """The chunked reader refuses a member as soon as the running total passes the cap
    (here a cap below the real, truthfully declared size, so the declared-size check is
    passed and only the running total can stop it)."""
    data = zipped({**good_arrays(), "X.npy": bytes(5 * 2**20)}, zipfile.ZIP_DEFLATED)
    seen = []
    real = aio._inflate
    monkeypatch.setattr(
        aio,
        "_inflate",
        lambda zf, info, key, field, cap, L: (
            seen.append(info.file_size) or real(zf, info, key, field, cap=2**20, L=L)
        ),
    )
    monkeypatch.setattr(aio, "_member_cap", lambda L: 10 * 2**20)
    err, _, peak = refuse("a.npz", data)
    assert "inflates past 1.00 MB" in str(err), err
    assert peak < 1 + PEAK_MB


def test_valid_members_in_every_whitelisted_dtype_load():
    p = attsvm.random_problem(n=2, T=3, d=2, seed=0)
    for dt in ("<f4", ">f8", "<i2", "<u1", "|b1"):
        X = (np.abs(p.X) * 3 + 1).astype(dt) if dt != "|b1" else p.X != 0
        q = aio.load_problem(
            zipped({**good_arrays(), "X.npy": _npy(X)}), filename="a.npz", limits=HOSTED
        )
        np.testing.assert_array_equal(q.X, np.asarray(X, dtype=float))
    F = np.asfortranarray(p.X)
    q = aio.load_problem(
        zipped({**good_arrays(), "X.npy": _npy(F)}), filename="a.npz", limits=HOSTED
    )
    np.testing.assert_array_equal(q.X, p.X)


def test_messages_quote_visitor_text_inertly():
    """Text a visitor typed comes back inside a code span with backticks removed, so the
    page's Markdown shows it literally."""
    data = b"kind,seq,token,label,f0\n`**boom**`[x](y),0,0,1,1\n"
    err, _, _ = refuse("a.csv", data)
    msg = str(err)
    quoted = msg[msg.index("got ") + 4 :]
    assert quoted.startswith("`") and quoted.count("`") == 2, msg


# -- fuzzing -----------------------------------------------------------------------------------
FUZZ = settings(
    max_examples=150,
    deadline=1000,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _only_problem_or_field_error(data: bytes, name: str):
    err, dt, peak = refuse(name, data)
    if err is not None:
        assert str(err).startswith("`"), f"message names no field: {err}"
    assert dt < 1.0
    assert peak < len(data) / 2**20 + PEAK_MB


@FUZZ
@given(st.binary(max_size=4096), st.sampled_from(["a.csv", "a.npz", "a.txt"]))
def test_random_bytes_give_a_problem_or_a_field_error(data, name):
    _only_problem_or_field_error(data, name)


CSV_CELL = st.one_of(
    st.sampled_from(
        [
            "x",
            "z",
            "v",
            "V",
            "",
            "0",
            "1",
            "-1",
            "2",
            "nan",
            "inf",
            "1e400",
            "-0",
            "1_0",
            "٣",
            "0x10",
            "=1+1",
            '"',
            "1e-400",
        ]
    ),
    st.text(max_size=12),
    st.floats(allow_nan=True).map(repr),
)


@FUZZ
@given(st.integers(1, 4), st.lists(st.lists(CSV_CELL, min_size=1, max_size=8), max_size=30))
def test_random_csv_rows_give_a_problem_or_a_field_error(d, rows):
    head = ["kind", "seq", "token", "label"] + [f"f{j}" for j in range(d)]
    text = "\n".join(",".join(r) for r in [head, *rows])
    _only_problem_or_field_error(text.encode("utf-8", "surrogatepass"), "a.csv")


MEMBER_NAMES = st.sampled_from(
    [
        "X.npy",
        "Y.npy",
        "Z.npy",
        "v.npy",
        "V.npy",
        "head.npy",
        "lam.npy",
        "query_index.npy",
        "tokens.npy",
        "junk",
        "X",
    ]
)
NPY_HEADERS = st.builds(
    header,
    st.sampled_from(["<f8", "<f4", "<i8", "|b1", "<U6", "<U100000", "|O", "<c8", "|V8", ">f8"]),
    st.lists(st.integers(-2, 2**65), max_size=4).map(tuple),
    st.booleans(),
)
MEMBER_DATA = st.one_of(
    st.binary(max_size=300),
    st.tuples(NPY_HEADERS, st.binary(max_size=300)).map(lambda t: t[0] + t[1]),
    st.sampled_from(
        [
            _npy(np.ones((2, 3, 2))),
            _npy(np.array([1.0, -1.0])),
            _npy(np.ones(2)),
            _npy(np.array("relu")),
            _npy(np.ones((2, 2))),
        ]
    ),
)


@FUZZ
@given(
    st.dictionaries(MEMBER_NAMES, MEMBER_DATA, max_size=6),
    st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]),
    st.integers(0, 2**16),
)
def test_random_zip_structures_give_a_problem_or_a_field_error(members, method, cut):
    data = zipped(members, method)
    if cut:  # sometimes truncate or corrupt the archive
        data = data[: cut % (len(data) + 1)] if cut % 3 else data.replace(b"PK", b"KP", 1)
    _only_problem_or_field_error(data, "a.npz")


@pytest.mark.parametrize(
    "name",
    [
        "[x](javascript:alert(1)).csv",
        "<img src=x onerror=1>.csv",
        "`a`*b*.csv",
        "\u202etxt.csv",
        "a" * 5000 + ".csv",
    ],
)
def test_a_hostile_file_name_is_quoted_inertly_in_the_problem_name(name):
    p = attsvm.random_problem(n=2, T=3, d=2, seed=0)
    q = aio.load_problem(aio.problem_to_csv(p), filename=name, limits=HOSTED)
    shown = q.name[len("upload: ") :]
    assert "`" not in shown and len(shown) <= 60
    assert all(c.isprintable() for c in shown)
