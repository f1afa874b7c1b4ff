"""Problems to and from bytes: the upload format (CSV or NPZ) and its writers.

An uploaded problem is the paper's data (docs/theory.md §1): tokens X (n, T, d), labels
Y ∈ {±1}ⁿ, queries Z (n, d) (omitted: self-attention, z_i = x_i1) and the head vector
v (d,) (or V (d, d) for the relu head). Everything happens in memory — bytes in, a
validated `Problem` out — and every rule is checked before anything large is allocated:
file size, member sizes and array headers (NPZ), row and column counts (CSV), then n, T, d
against the active mode's caps (`attsvm.limits`), finiteness and ±1 labels. A bad file
raises ValueError naming the field, the rule and what came.

NPZ: arrays ``X`` (alias ``tokens``), ``Y`` (``labels``), optional ``Z`` (``queries``),
``v``, ``V``, and optional scalars ``head`` (text: linear/relu/quadratic), ``lam``,
``query_index``. Loaded with ``allow_pickle=False``; object arrays are refused.

CSV (UTF-8, one header row), one row per vector, ``kind`` saying which:

    kind,seq,token,label,f0,f1,...,f{d-1}
    x,0,0,1,0.12,-0.40,...      token t of sequence i (label Y_i, repeated on each token)
    z,0,,,0.31,0.95,...         query z_i of sequence i (no z rows: self-attention)
    v,,,,0.93,0.37,...          the head vector v (linear head)
    V,,0,,...                   row `token` of V (relu head: d rows, no v row)

Every sequence has the same tokens 0 … T−1. `problem_to_csv` writes exactly this format,
so a downloaded problem uploads again unchanged.
"""

from __future__ import annotations

import csv
import io
import math
import zipfile

import numpy as np

from . import limits as _limits
from .problems import HEADS, Problem

NPZ_KEYS = {
    "X": "X",
    "tokens": "X",
    "Y": "Y",
    "labels": "Y",
    "Z": "Z",
    "queries": "Z",
    "v": "v",
    "V": "V",
    "head": "head",
    "lam": "lam",
    "query_index": "query_index",
    "lengths": "lengths",
}
FIELD = {
    "X": "tokens",
    "Y": "labels",
    "Z": "queries",
    "v": "head vector v",
    "V": "relu head V",
    "head": "head",
    "lam": "lam",
    "query_index": "query_index",
    "lengths": "lengths",
}
CSV_KINDS = ("x", "z", "v", "V")
MAX_MEMBERS = 16


def quote_text(text, limit: int = 40) -> str:
    """User text echoed in a message: printable, short, inside a code span (so Markdown
    renders it literally: no links, images or HTML)."""
    s = "".join(c if c.isprintable() and c != "`" else "?" for c in str(text))
    return "`" + (s if len(s) <= limit else s[: limit - 1] + "…") + "`"


def _err(field: str, rule: str, got) -> ValueError:
    return ValueError(f"`{field}` must be {rule}; got {got}")


def _mb(b: int) -> str:
    return f"{b / 2**20:.2f} MB"


def load_problem(
    data: bytes, *, filename: str = "upload.csv", limits: _limits.Limits | None = None
) -> Problem:
    """Parse an uploaded problem (format from the file name: .npz, else CSV).

    Args:
        data: the file's bytes.
        filename: its name (only the extension is used, and echoed in messages).
        limits: caps to enforce (default: the active mode's).

    Returns:
        A validated Problem named "upload: <file name>".

    Raises:
        ValueError naming the field (`file`, `tokens`, `labels`, `queries`, …).
    """
    L = limits or _limits.current()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise _err("file", "bytes", type(data).__name__)
    data = bytes(data)
    if len(data) > L.max_upload_bytes:
        raise _err("file", f"at most {_mb(L.max_upload_bytes)} in {L.mode} mode", _mb(len(data)))
    if not data:
        raise _err("file", "a non-empty CSV or NPZ file", "an empty file")
    name = str(filename or "")
    if name.lower().endswith(".npz"):
        fields = _read_npz(data, L)
    elif name.lower().endswith((".csv", ".txt")) or not name:
        fields = _read_csv(data, L)
    else:
        raise _err("file", "a .csv or .npz file", quote_text(name))
    prob = _assemble(fields, L)
    return prob.with_(name=f"upload: {quote_text(name, 60)[1:-1]}")


# -- NPZ ------------------------------------------------------------------------------------
# Only these dtype kinds reach the parser's arithmetic: bool, signed and unsigned integers,
# real floats (at most 8 bytes an item). No strings (except the one-word `head`), objects,
# complex numbers, structured records or sub-arrays.
NUMERIC_KINDS = "biuf"
MAX_HEAD_CHARS = 32  # `head` is one word (linear / relu / quadratic)
CHUNK = 64 * 1024  # bytes inflated at a time: a bomb is refused as soon as it is seen
ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)  # what numpy.savez(_compressed) writes


def _member_cap(L) -> int:
    """Largest .npy member accepted: the biggest array the mode allows, plus its header."""
    return 8 * L.max_n * L.max_T * L.max_d + 4096


def _read_npz(data: bytes, L) -> dict:
    max_member = _member_cap(L)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except Exception as exc:  # zipfile raises many kinds on hostile central directories
        raise _err("file", "a valid NPZ (zip) archive", "a damaged or non-zip file") from exc
    if len(infos) > MAX_MEMBERS:
        raise _err("file", f"an NPZ with at most {MAX_MEMBERS} arrays", f"{len(infos)} members")
    out, total = {}, 0
    for info in infos:
        key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if key not in NPZ_KEYS:
            raise _err(
                "file",
                f"an NPZ with arrays among {sorted(NPZ_KEYS)}",
                f"an array named {quote_text(key)}",
            )
        field = NPZ_KEYS[key]
        if field in out:
            raise _err("file", "an NPZ naming each array once", f"two arrays for {field}")
        if info.flag_bits & 0x1:
            raise _err(FIELD[field], "an unencrypted array", "an encrypted member")
        if info.compress_type not in ZIP_METHODS:
            raise _err(
                FIELD[field],
                "stored or deflated (as numpy.savez writes)",
                f"compression method {info.compress_type}",
            )
        if info.file_size > max_member:
            raise _err(
                FIELD[field],
                f"at most {_mb(max_member)} uncompressed in {L.mode} mode",
                _mb(info.file_size),
            )
        raw = _inflate(zf, info, key, FIELD[field], cap=max_member, L=L)
        total += len(raw)
        if total > 2 * max_member:  # X plus the small arrays, never more
            raise _err("file", f"at most {_mb(2 * max_member)} of arrays in {L.mode} mode", "more")
        out[field] = _read_npy(
            raw, FIELD[field], text=field == "head", max_items=L.max_n * L.max_T * L.max_d
        )
    return out


def _inflate(zf, info, key: str, field: str, *, cap: int, L) -> bytes:
    """A member's bytes, inflated CHUNK by CHUNK and refused as soon as they pass `cap`:
    the size a zip header declares is the sender's word, a compression bomb lies in it."""
    parts, size = [], 0
    try:
        with zf.open(info) as fh:
            while True:
                chunk = fh.read(CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > cap:
                    raise _err(
                        field,
                        f"at most {_mb(cap)} uncompressed in {L.mode} mode",
                        f"more (it inflates past {_mb(cap)})",
                    )
                parts.append(chunk)
    except ValueError:
        raise
    except Exception as exc:  # bad CRC, truncated stream, broken deflate data, …
        raise _err("file", "a readable NPZ archive", f"a damaged member {quote_text(key)}") from exc
    return b"".join(parts)


def _read_npy(raw: bytes, field: str, *, text: bool, max_items: int) -> np.ndarray:
    """One .npy member: the header is checked (dtype whitelist, shape with Python-int
    arithmetic, declared size = bytes present) before a single element is read."""
    f = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(version)
        read_header = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read_header(f, max_header_size=4096)
    except Exception as exc:  # the header is a Python literal: anything can be wrong in it
        raise _err(field, "a valid .npy array", "an unreadable array header") from exc
    if (
        not isinstance(shape, tuple)
        or len(shape) > 3
        or not all(type(k) is int and k >= 0 for k in shape)
    ):
        raise _err(field, "at most 3-d with non-negative sizes", "a malformed shape")
    items = math.prod(shape)  # Python ints: no overflow
    if items > max_items:
        raise _err(
            field, f"at most 3-d with at most {max_items:,} entries", f"shape {_shape_text(shape)}"
        )
    if text:
        ok = dtype.kind == "U" and dtype.itemsize <= 4 * MAX_HEAD_CHARS and items == 1
        rule = f"one word of at most {MAX_HEAD_CHARS} characters"
    else:
        ok = dtype.kind in NUMERIC_KINDS and dtype.itemsize <= 8
        rule = "a real numeric array (bool, integer or float of at most 64 bits)"
    if not ok or dtype.hasobject or dtype.names is not None or dtype.subdtype is not None:
        raise _err(field, rule, f"dtype {quote_text(dtype.str)}")
    offset = f.tell()
    if len(raw) - offset != items * dtype.itemsize:
        raise _err(
            field,
            "a complete .npy array",
            f"{len(raw) - offset:,} data bytes for shape {_shape_text(shape)}",
        )
    arr = np.frombuffer(raw, dtype=dtype, count=items, offset=offset)
    return arr.reshape(shape, order="F" if fortran else "C")


def _shape_text(shape) -> str:
    return quote_text(shape, 60)


# -- CSV ------------------------------------------------------------------------------------
def _read_csv(data: bytes, L) -> dict:
    """The arrays of an uploaded CSV, every cell checked against the caps `L`: one pass over
    the rows, each kind of row checked where it is read."""
    rows, header = _csv_header(data, L)
    d = len(header) - 4
    max_rows = L.max_n * (L.max_T + 1) + L.max_d + 1
    x, z, v, V = {}, {}, None, {}
    labels = {}
    for line, row in enumerate(_rows(rows, max_rows), start=2):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise _err(
                "file",
                f"rows of {len(header)} fields like the header",
                f"{len(row)} fields on line {line}",
            )
        kind, seq, tok, lab = (c.strip() for c in row[:4])
        vals = _floats(row[4:], line)
        if kind == "x":
            i, t = _index("seq", seq, line, L.max_n), _index("token", tok, line, L.max_T)
            if (i, t) in x:
                raise _err("tokens", "one row per (seq, token)", f"a repeat on line {line}")
            x[i, t] = vals
            y = _label(lab, line)
            if labels.setdefault(i, y) != y:
                raise _err(
                    "labels",
                    "the same on every token of a sequence",
                    f"both {labels[i]:+g} and {y:+g} in sequence {i} (line {line})",
                )
        elif kind == "z":
            i = _index("seq", seq, line, L.max_n)
            if i in z:
                raise _err("queries", "one z row per sequence", f"a repeat on line {line}")
            z[i] = vals
        elif kind == "v":
            if v is not None:
                raise _err("head vector v", "a single v row", f"a second one on line {line}")
            v = vals
        elif kind == "V":
            r = _index("token", tok, line, L.max_d)
            if r in V:
                raise _err("relu head V", "one row per index", f"a repeat on line {line}")
            V[r] = vals
        else:
            raise _err("kind", f"one of {list(CSV_KINDS)}", f"{quote_text(kind)} on line {line}")
    return _csv_arrays(x, labels, z, v, V, d)


def _csv_arrays(x: dict, labels: dict, z: dict, v, V: dict, d: int) -> dict:
    """The CSV's rows as arrays X, Y (and Z, v, V), every sequence and token present."""
    if not x:
        raise _err("tokens", "at least one x row", "none")
    n = max(i for i, _ in x) + 1
    T = max(t for _, t in x) + 1
    if len(x) != n * T:
        missing = next((i, t) for i in range(n) for t in range(T) if (i, t) not in x)
        raise _err(
            "tokens",
            f"rows for every token 0…{T - 1} of every sequence 0…{n - 1}",
            f"no row for seq {missing[0]}, token {missing[1]}",
        )
    out = {
        "X": np.array([[x[i, t] for t in range(T)] for i in range(n)]),
        "Y": np.array([labels[i] for i in range(n)]),
    }
    if z:
        if sorted(z) != list(range(n)):
            raise _err(
                "queries",
                f"one z row for each sequence 0…{n - 1} (or none)",
                f"z rows for {len(z)} sequences",
            )
        out["Z"] = np.array([z[i] for i in range(n)])
    if v is not None:
        out["v"] = np.array(v)
    if V:
        if sorted(V) != list(range(d)):
            raise _err("relu head V", f"rows 0…{d - 1}", f"{len(V)} rows")
        out["V"] = np.array([V[r] for r in range(d)])
    return out


def _csv_header(data: bytes, L):
    """(the row reader past the header, the header) of an uploaded CSV, the header checked."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _err(
            "file", "UTF-8 text (a CSV) or an .npz file", f"undecodable bytes at offset {exc.start}"
        ) from exc
    if "\x00" in text:
        raise _err("file", "text (a CSV) or an .npz file", "binary data")
    max_cols = 4 + L.max_d
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(rows)
    except StopIteration:
        raise _err("file", "a CSV with a header row", "no rows") from None
    except csv.Error as exc:
        raise _err("file", "a well-formed CSV", f"a parse error ({exc})") from None
    header = [h.strip() for h in header]
    if len(header) > max_cols:
        raise _err(
            "file",
            f"a CSV with at most {max_cols} columns (d ≤ {L.max_d}) in {L.mode} mode",
            f"{len(header)} columns",
        )
    d = len(header) - 4
    want = ["kind", "seq", "token", "label"] + [f"f{j}" for j in range(max(d, 0))]
    if d < 1 or [h.lower() for h in header] != want:
        raise _err(
            "file",
            "a CSV whose header is kind,seq,token,label,f0,…,f{d-1} (d ≥ 1)",
            quote_text(",".join(header)),
        )
    return rows, header


def _rows(reader, max_rows: int):
    try:
        for k, row in enumerate(reader):
            if k >= max_rows:
                raise _err("file", f"at most {max_rows:,} rows in this mode", "more")
            yield row
    except csv.Error as exc:
        raise _err("file", "a well-formed CSV", f"a parse error ({exc})") from None


def _floats(cells, line: int) -> list[float]:
    out = []
    for j, c in enumerate(cells):
        try:
            out.append(float(c))
        except ValueError:
            raise _err(f"f{j}", "a number", f"{quote_text(c)} on line {line}") from None
    return out


def _index(name: str, cell: str, line: int, cap: int) -> int:
    try:
        k = int(cell)
    except ValueError:
        raise _err(name, "an integer index", f"{quote_text(cell)} on line {line}") from None
    if not 0 <= k < cap:
        raise _err(name, f"an index in [0, {cap - 1}] in this mode", f"{k} on line {line}")
    return k


def _label(cell: str, line: int) -> float:
    try:
        y = float(cell)
    except ValueError:
        raise _err("labels", "+1 or -1", f"{quote_text(cell)} on line {line}") from None
    if y not in (1.0, -1.0):
        raise _err("labels", "+1 or -1", f"{quote_text(cell)} on line {line}")
    return y


# -- assembly (both formats) ------------------------------------------------------------------
def _head_of(f: dict, arrays: dict) -> str:
    """The file's head (default relu when it has V, else linear), refused when the head's
    parameters are missing."""
    head = "relu" if "V" in arrays else "linear"
    if "head" in f:
        h = np.asarray(f["head"])
        if h.size != 1 or str(h.reshape(-1)[0]) not in HEADS:
            raise _err("head", f"one of {list(HEADS)}", quote_text(h.reshape(-1)[:1]))
        head = str(h.reshape(-1)[0])
    if head in ("linear", "quadratic") and "v" not in arrays:
        raise _err(
            "head vector v",
            f"present for the {head} head (a v row / array of d numbers)",
            "nothing",
        )
    if head == "relu" and "V" not in arrays:
        raise _err("relu head V", "present for the relu head (d × d)", "nothing")
    return head


def _assemble(f: dict, L) -> Problem:
    for need in ("X", "Y"):
        if need not in f:
            raise _err(FIELD[need], "present", "nothing")
    X = np.asarray(f["X"])
    if X.ndim != 3:
        raise _err("tokens", "a 3-d array (n, T, d)", f"shape {X.shape}")
    n, T, d = X.shape
    for name, value, cap in (("n", n, L.max_n), ("T", T, L.max_T), ("d", d, L.max_d)):
        if not 1 <= value <= cap:
            raise _err(
                f"tokens ({name})",
                f"between 1 and {cap} in {L.mode} mode",
                f"{name} = {value} (tokens of shape {X.shape})",
            )
    want = {"Y": (n,), "Z": (n, d), "v": (d,), "V": (d, d)}
    arrays = {}
    for key, shape in want.items():
        if key not in f:
            continue
        a = np.asarray(f[key])
        if a.shape != shape:
            raise _err(
                FIELD[key], f"of shape {shape} to match tokens {X.shape}", f"shape {a.shape}"
            )
        arrays[key] = a
    for key, a in (("X", X), *arrays.items()):
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            raise _err(FIELD[key], "finite (no NaN or inf)", f"{a[bad]} at index {bad}")
        arrays[key] = a
    Y = arrays["Y"]
    if not np.all(np.abs(Y) == 1.0):
        raise _err("labels", "+1 or -1", sorted(set(Y.tolist()))[:6])
    head = _head_of(f, arrays)
    kw = {}
    for key in ("lam", "query_index"):
        if key in f:
            a = np.asarray(f[key])
            if a.size != 1:
                raise _err(key, "a single number", f"shape {a.shape}")
            kw[key] = a.reshape(-1)[0].item()
    if "lengths" in f:  # sentences of different lengths (attsvm.text)
        kw["lengths"] = np.asarray(f["lengths"])
    return Problem(
        X=arrays["X"], Y=Y, Z=arrays.get("Z"), v=arrays.get("v"), V=arrays.get("V"), head=head, **kw
    )


# -- writers ---------------------------------------------------------------------------------
def _check_single(prob: Problem) -> None:
    if not isinstance(prob, Problem):
        raise _err("prob", "an attsvm.Problem", type(prob).__name__)
    if prob.queries != "single":
        raise _err(
            "prob",
            "a single-query problem to write in the upload format",
            f"queries={prob.queries!r}",
        )


def problem_arrays(prob: Problem) -> dict:
    """The problem as the NPZ upload format's arrays (what `problem_to_npz` writes)."""
    _check_single(prob)
    out = {"X": prob.X, "Y": prob.Y, "head": np.array(prob.head)}
    for key in ("Z", "v", "V"):
        if getattr(prob, key) is not None:
            out[key] = getattr(prob, key)
    if prob.head == "quadratic":
        out["lam"] = np.array(prob.lam)
    if prob.Z is None:
        out["query_index"] = np.array(prob.query_index)
    if prob.lengths is not None:
        out["lengths"] = prob.lengths
    return out


def problem_to_npz(prob: Problem) -> bytes:
    """The problem in the NPZ upload format (compressed)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **problem_arrays(prob))
    return buf.getvalue()


def problem_to_csv(prob: Problem) -> bytes:
    """The problem in the CSV upload format (exact: floats written with repr)."""
    _check_single(prob)
    if (
        prob.head == "quadratic"
        or (prob.Z is None and prob.query_index != 0)
        or prob.lengths is not None
    ):
        raise _err(
            "prob",
            "a linear- or relu-head problem with the default query to write as CSV (use NPZ)",
            repr(prob),
        )
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["kind", "seq", "token", "label"] + [f"f{j}" for j in range(prob.d)])
    fmt = lambda a: [repr(float(x)) for x in a]  # noqa: E731
    for i in range(prob.n):
        for t in range(prob.T):
            w.writerow(["x", i, t, int(prob.Y[i])] + fmt(prob.X[i, t]))
    if prob.Z is not None:
        for i in range(prob.n):
            w.writerow(["z", i, "", ""] + fmt(prob.Z[i]))
    if prob.v is not None:
        w.writerow(["v", "", "", ""] + fmt(prob.v))
    if prob.head == "relu":
        for r in range(prob.d):
            w.writerow(["V", "", r, ""] + fmt(prob.V[r]))
    return buf.getvalue().encode()
