"""The results store: every experiment's output at its default settings, computed once and
shared by every server, session and command line that points at one folder.

An entry is what `python -m attsvm reproduce NAME` writes (one CSV per table, settings.json
with the attsvm version, backend, time and summary, chart.html), plus manifest.json: the
entry's key and each file's size and SHA-256. The folder is `ATTSVM_RESULTS`, by default
the per-user cache folder ($XDG_CACHE_HOME/attsvm/results, else ~/.cache/attsvm/results):

    ROOT/NAME--VERSION--KEY/       one complete entry (KEY: settings and library sources)
    ROOT/NAME--VERSION--KEY.lock   held (fcntl.flock) by whoever computes that entry
    ROOT/NAME--VERSION--KEY.status what it is doing (progress), while it holds the lock
    ROOT/NAME--VERSION--KEY.failed why the last try failed

Robustness (docs/hosting.md, "Results store"):
- an entry is written into a temporary folder next to it and renamed into place, so a reader
  sees a complete entry or none, and a crash leaves only a temporary folder (removed by the
  next writer of that entry);
- an exclusive `flock` on the entry's lock file decides who computes it, across processes
  and servers sharing the folder; the kernel drops it when its holder dies;
- a reader checks every size against the manifest before reading (at most `MAX_FILE` bytes
  a file, `MAX_ENTRY` an entry) and every hash after, so a truncated, foreign or junk file
  is ignored (and logged), and the entry counts as missing, to be computed again.

The key covers the attsvm version, the settings and a fingerprint of the library's sources,
so an upgrade (or a changed experiment) computes its results afresh.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import io
import json
import logging
import os
import re
import shutil
import stat
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from . import __version__, experiments
from .experiments.core import Result, jsonable
from .experiments.files import write_result

log = logging.getLogger("attsvm.store")

FORMAT = 1
MAX_META = 1 << 20  # manifest.json, settings.json, .status, .failed: 1 MiB
MAX_FILE = 64 << 20  # one table or chart (the paper's largest is under 1 MiB)
MAX_ENTRY = 256 << 20  # one entry in all
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")
SETTINGS_ENV = "ATTSVM_STORE_SETTINGS"


class StoreError(ValueError):
    """An entry that is not a complete, current entry of this store (why, as text)."""


# -- where -------------------------------------------------------------------------------------
def folder() -> Path:
    """The store's folder: `ATTSVM_RESULTS`, else the per-user cache folder."""
    env = os.environ.get("ATTSVM_RESULTS", "").strip()
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(cache) / "attsvm" / "results"


def names() -> tuple:
    """Every registered experiment, in the order the store is filled: the paper's, then
    the follow-ups'."""
    return tuple(experiments.EXPERIMENTS) + tuple(experiments.FOLLOWUPS)


def _tuples(x):
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def default_settings(name: str):
    """The settings the store keeps for `name`: the experiment's defaults, or those of
    `ATTSVM_STORE_SETTINGS` (JSON, {name: {setting: value}}: shrunken entries for tests and
    small demo machines)."""
    text = os.environ.get(SETTINGS_ENV, "").strip()
    over = {}
    if text:
        try:
            table = json.loads(text)
            over = table.get(name, {}) if isinstance(table, dict) else None
        except ValueError:
            over = None
        if not isinstance(over, dict):
            raise ValueError(f"`{SETTINGS_ENV}` must be a JSON object of objects; got {text!r}")
    return experiments.settings(name, **{k: _tuples(v) for k, v in over.items()})


_SOURCES: str | None = None


def sources_fingerprint() -> str:
    """SHA-256 of the library's Python sources (the same code gives the same results)."""
    global _SOURCES
    if _SOURCES is None:
        h = hashlib.sha256()
        pkg = Path(__file__).resolve().parent
        for path in sorted(pkg.rglob("*.py")):
            h.update(str(path.relative_to(pkg)).encode() + b"\0" + path.read_bytes() + b"\0")
        _SOURCES = h.hexdigest()
    return _SOURCES


def _settings_record(s) -> dict:
    return jsonable(dataclasses.asdict(s))


def key(name: str, settings=None) -> str:
    """The entry's key: a hash of the experiment, its settings, the attsvm version and
    the library's sources."""
    s = settings if settings is not None else default_settings(name)
    text = json.dumps(
        dict(
            experiment=name,
            settings=_settings_record(s),
            version=__version__,
            sources=sources_fingerprint(),
            format=FORMAT,
        ),
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def entry_path(name: str, settings=None, root: Path | None = None) -> Path:
    """The folder of `name`'s entry (its lock and status files share its name)."""
    version = re.sub(r"[^A-Za-z0-9.]", "_", __version__)
    return Path(root or folder()) / f"{name}--{version}--{key(name, settings)}"


def _side(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


# -- reading -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """A complete entry: the result, its settings.json (`meta`), its manifest and files."""

    path: Path
    result: Result
    meta: dict
    manifest: dict
    files: dict  # file name -> bytes

    @property
    def created(self) -> str:
        """When the entry was written (ISO 8601, UTC)."""
        return self.manifest.get("created", "")


def _read(path: Path, limit: int, size: int | None = None) -> bytes:
    """A regular file's bytes (never a link), refused unread when over `limit` bytes or
    when its size is not `size`."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path.name} is not a regular file")
        if info.st_size > limit:
            raise StoreError(f"{path.name} has {info.st_size:,} bytes (at most {limit:,})")
        if size is not None and info.st_size != size:
            raise StoreError(f"{path.name} has {info.st_size:,} bytes, the manifest {size:,}")
        data = f.read(limit + 1)
    if len(data) > limit or (size is not None and len(data) != size):
        raise StoreError(f"{path.name} changed while it was read")
    return data


def _json(data: bytes, what: str) -> dict:
    try:
        out = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StoreError(f"{what} is not JSON ({exc.__class__.__name__})") from None
    if not isinstance(out, dict):
        raise StoreError(f"{what} is not a JSON object")
    return out


def stamp(name: str, settings=None, root: Path | None = None):
    """What changes when `name`'s entry is replaced (the manifest's inode, time and size),
    or None when there is no entry: a cheap cache key for `read`."""
    try:
        st = os.lstat(entry_path(name, settings, root) / "manifest.json")
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read(name: str, settings=None, root: Path | None = None) -> Entry:
    """`name`'s entry, checked file by file; StoreError (saying why) when it is missing,
    incomplete, foreign (another version, settings or experiment) or not an entry."""
    s = settings if settings is not None else default_settings(name)
    path = entry_path(name, s, root)
    try:
        if not path.is_dir() or path.is_symlink():
            raise StoreError("no entry" if not os.path.lexists(path) else "not a folder")
        manifest = _json(_read(path / "manifest.json", MAX_META), "manifest.json")
        want = dict(format=FORMAT, experiment=name, attsvm_version=__version__, key=key(name, s))
        for k, v in want.items():
            if manifest.get(k) != v:
                raise StoreError(f"manifest.json has {k}={manifest.get(k)!r}, not {v!r}")
        files = _listed_files(path, manifest)
        meta = _json(files["settings.json"], "settings.json")
        res = _result(name, meta, files)
        return Entry(path=path, result=res, meta=meta, manifest=manifest, files=files)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise StoreError("incomplete (a file went missing)") from None
        raise StoreError(f"unreadable ({exc.strerror or exc})") from None


def _listed_files(path: Path, manifest: dict) -> dict:
    """The bytes of every file the manifest lists, each checked against its size (before
    reading, within `MAX_FILE`, the entry within `MAX_ENTRY`) and its SHA-256."""
    listed = manifest.get("files")
    if not isinstance(listed, dict) or "settings.json" not in listed:
        raise StoreError("manifest.json lists no files")
    total, files = 0, {}
    for fname, info in listed.items():
        if not (
            isinstance(fname, str)
            and FILE_NAME.fullmatch(fname)
            and fname != "manifest.json"
            and isinstance(info, dict)
        ):
            raise StoreError(f"manifest.json lists {fname!r}")
        size, digest = info.get("bytes"), info.get("sha256")
        if not isinstance(size, int) or size < 0 or not isinstance(digest, str):
            raise StoreError(f"manifest.json's record of {fname} is not size and hash")
        total += size
        if total > MAX_ENTRY:
            raise StoreError(f"the entry is over {MAX_ENTRY:,} bytes")
        data = _read(path / fname, MAX_META if fname.endswith(".json") else MAX_FILE, size)
        if hashlib.sha256(data).hexdigest() != digest:
            raise StoreError(f"{fname} does not match its hash in manifest.json")
        files[fname] = data
    return files


def _result(name: str, meta: dict, files: dict) -> Result:
    """The Result an entry's settings.json (`meta`) and CSV files hold."""
    if meta.get("attsvm_version") != __version__ or meta.get("experiment") != name:
        raise StoreError(
            f"settings.json is of attsvm {meta.get('attsvm_version')!r}, "
            f"experiment {meta.get('experiment')!r}"
        )
    summary = meta.get("summary")
    if not isinstance(summary, dict) or not isinstance(summary.get("text"), str):
        raise StoreError("settings.json has no summary")
    frames = {}
    for fname, data in files.items():
        if fname.endswith(".csv"):
            try:
                frames[fname[:-4]] = pd.read_csv(io.BytesIO(data))
            except (ValueError, UnicodeDecodeError) as exc:
                raise StoreError(f"{fname} is not a table ({exc})") from None
    return Result(
        name=name,
        frames=frames,
        summary=summary,
        settings=meta["settings"],
        notes=tuple(meta.get("notes") or ()),
        seconds=float(meta.get("seconds") or 0.0),
        backend=meta.get("backend") if isinstance(meta.get("backend"), dict) else {},
    )


def load(name: str, settings=None, root: Path | None = None) -> Entry | None:
    """`read`, or None when there is no usable entry (a damaged one is logged)."""
    try:
        return read(name, settings, root)
    except StoreError as exc:
        if str(exc) != "no entry":
            log.warning("results store: ignoring %s's entry in %s: %s", name, root or folder(), exc)
        return None


# -- writing -----------------------------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: Path) -> None:
    """Remove a file or folder tree (renamed aside first, so no reader sees it half gone)."""
    if not os.path.lexists(path):
        return
    trash = path.with_name(f".trash-{path.name}-{uuid.uuid4().hex[:8]}")
    os.replace(path, trash)
    if trash.is_dir() and not trash.is_symlink():
        shutil.rmtree(trash, ignore_errors=True)
    else:
        trash.unlink(missing_ok=True)


def save(res: Result, settings, root: Path | None = None) -> Path:
    """Write `res` (computed with `settings`) as its entry: into a temporary folder beside
    it, then renamed into place (replacing any older or damaged entry). Hold the entry's
    `lock` around it when other writers may be at work."""
    path = entry_path(res.name, settings, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        written = write_result(res, tmp, png=False)
        listed = {}
        for f in written:
            data = f.read_bytes()
            listed[f.name] = dict(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        manifest = dict(
            format=FORMAT,
            experiment=res.name,
            attsvm_version=__version__,
            key=key(res.name, settings),
            settings=_settings_record(settings),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            files=listed,
        )
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        for f in [*written, tmp / "manifest.json"]:
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        _remove(path)  # a damaged or older entry of this key
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _side(path, ".failed").unlink(missing_ok=True)
    return path


@contextlib.contextmanager
def lock(name: str, settings=None, root: Path | None = None, *, tries: int = 5):
    """Hold `name`'s entry's lock for the block; yields True, or False when another process
    holds it (it is computing that entry). Leftovers of a writer that died (its temporary
    folder) are removed once the lock is held."""
    path = entry_path(name, settings, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(_side(path, ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        for i in range(tries):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # a writer, or a reader's brief look (`state`)
                if i == tries - 1:
                    yield False
                    return
                time.sleep(0.05)
        for old in path.parent.glob(f".tmp-{path.name}-*"):
            shutil.rmtree(old, ignore_errors=True)
        try:
            yield True
        finally:
            _side(path, ".status").unlink(missing_ok=True)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _write_small(path: Path, record: dict) -> None:
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(jsonable(record)))
    os.replace(tmp, path)


# -- state, for a page that shows what the server is doing --------------------------------------
@dataclass(frozen=True)
class State:
    """Where `name`'s entry stands: kind "ready", "computing" (frac, text: its progress),
    "failed" (text: why) or "missing"."""

    kind: str
    frac: float = 0.0
    text: str = ""


def _held(path: Path) -> bool:
    """Whether someone holds the lock file `path` (a shared lock fails only then)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (closing drops the shared lock)
    return False


def state(name: str, root: Path | None = None) -> State:
    """A cheap look (a few stat calls) at `name`'s entry: ready, computing, failed, missing.
    "ready" means its manifest exists; `load` still checks every file."""
    path = entry_path(name, None, root)
    if os.path.lexists(path / "manifest.json"):
        return State("ready")
    if _held(_side(path, ".lock")):
        try:
            st = _json(_read(_side(path, ".status"), 4096), "status")
            frac = float(st.get("frac", 0.0))
            return State("computing", min(max(frac, 0.0), 1.0), str(st.get("text", ""))[:200])
        except (StoreError, OSError, TypeError, ValueError):
            return State("computing")
    try:
        why = _json(_read(_side(path, ".failed"), 4096), "failed").get("error", "")
        return State("failed", text=str(why)[:300])
    except (StoreError, OSError):
        return State("missing")


# -- filling -----------------------------------------------------------------------------------
def _fill_one(name: str, root: Path | None, say) -> str:
    """Compute `name`'s entry unless it is there or another process computes it; returns
    "present", "busy", "done" or "failed"."""
    s = default_settings(name)
    if load(name, s, root) is not None:
        return "present"
    with lock(name, s, root) as mine:
        if not mine:
            return "busy"
        if load(name, s, root) is not None:  # finished by another meanwhile
            return "present"
        path = entry_path(name, s, root)
        status, last = _side(path, ".status"), [0.0]

        def progress(frac, text):
            now = time.monotonic()
            if now - last[0] >= 0.5 or frac >= 1.0:
                last[0] = now
                _write_small(status, dict(frac=frac, text=text, pid=os.getpid()))

        progress(0.0, "starting")
        try:
            res = experiments.run(name, s, progress=progress)
            save(res, s, root)
        except Exception as exc:  # noqa: BLE001  (one bad entry: say why, go on)
            log.exception("results store: %s failed", name)
            _write_small(_side(path, ".failed"), dict(error=f"{exc.__class__.__name__}: {exc}"))
            say(f"{name}: failed ({exc.__class__.__name__}: {exc})")
            return "failed"
        say(f"{name} ({res.seconds:.1f} s): {res.summary['text']}")
        return "done"


def fill(todo=None, root: Path | None = None, *, say=print, wait_s: float = 5.0) -> list:
    """Compute every missing entry of `todo` (default: `names()`), one at a time, each
    under its lock; entries another process is computing are waited for, then checked
    again. Returns the names computed here."""
    pending, done = list(todo or names()), []
    while pending:
        busy = []
        for name in pending:
            try:
                what = _fill_one(name, root, say)
            except OSError as exc:  # e.g. a read-only folder: nothing can be stored
                say(f"results store {root or folder()}: cannot write ({exc}); stopping")
                return done
            if what == "busy":
                busy.append(name)
            elif what == "done":
                done.append(name)
        if busy and busy == pending:
            time.sleep(wait_s)  # only others' work is left: wait for it
        pending = busy
    return done


__all__ = [
    "Entry",
    "State",
    "StoreError",
    "default_settings",
    "entry_path",
    "fill",
    "folder",
    "key",
    "load",
    "lock",
    "names",
    "read",
    "save",
    "stamp",
    "state",
]
