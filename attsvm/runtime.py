"""Process tuning, in one place and only when asked: `configure(...)`.

Importing attsvm enables float64 and nothing else. A program that wants the tuned process
(the command line, the app, the tests, a benchmark, a notebook) calls `configure()` once,
before its first JAX computation:

    from attsvm import runtime
    runtime.configure()           # every core, fast compiles, the compile cache, malloc kept

Each setting is a function of its own below, and each leaves a choice the user already
made alone (XLA_FLAGS, `jax_num_cpu_devices`, ATTSVM_MALLOC, ATTSVM_XLA_CACHE). Numbers do
not depend on any of them: a sweep's chunks are dealt to devices round-robin, and both
XLA code generators give the engine's runs to rounding (tests/test_cores.py).

The one process attsvm supervises, the server's background filler of the results store, has
its own module (`attsvm.filler`: a niced process pinned to one core, paused while a visitor's
page runs), started by the app (`ui/results.py`).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import jax


class Configured(NamedTuple):
    """What `configure` changed (False / None: left as it was)."""

    fast_compile: bool  # FAST_COMPILE_FLAG added to XLA_FLAGS
    cores: bool  # CPU devices exposed
    allocator: bool  # glibc's malloc keeps freed blocks
    compile_cache: str | None  # the compile cache's folder
    helpers: int  # helper processes for Python-bound work


def configure(
    *,
    cores: int | None = None,
    fast_compile: bool = True,
    compile_cache: bool = True,
    allocator: str | None = None,
    helpers: int | None = 0,
) -> Configured:
    """Tune this process for attsvm; call before the first JAX computation.

    Args:
        cores: CPU devices for JAX (None: one per core, unless the user chose already:
            XLA_FLAGS names a host device count, `jax_num_cpu_devices` is set, or this is a
            pytest-xdist worker, whose sibling workers hold the other cores).
        fast_compile: use XLA's older CPU fusion emitters (`use_fast_compile`).
        compile_cache: keep compiled programs on disk for the next process
            (`use_compile_cache`; ATTSVM_XLA_CACHE picks the folder or "off").
        allocator: "kept" (glibc keeps freed blocks, `keep_freed_memory`) or "system"
            (its default: a long-running server); None: ATTSVM_MALLOC, else "kept".
        helpers: helper processes for Python-bound SVM work (`experiments.core.
            use_helper_processes`): 0 none, None one per core but this one.
    """
    if allocator is None:
        allocator = os.environ.get("ATTSVM_MALLOC", "").strip().lower() or "kept"
    if allocator not in ("kept", "system"):
        raise ValueError(f"`allocator` must be 'kept' or 'system'; got {allocator!r}")
    if cores is not None and int(cores) < 1:
        raise ValueError(f"`cores` must be a positive integer or None; got {cores!r}")
    added = use_fast_compile() if fast_compile else False
    if cores is not None:
        exposed = use_cpu_cores(cores)
    elif not _cores_chosen():
        exposed = use_cpu_cores()
    else:
        exposed = False
    kept = keep_freed_memory() if allocator == "kept" else False
    cache = use_compile_cache() if compile_cache else None
    from .experiments.core import use_helper_processes

    n_helpers = use_helper_processes(helpers, setup=configure_helper)
    return Configured(added, exposed, kept, cache, n_helpers)


def configure_helper() -> None:
    """A helper process's tuning (`experiments.core.ordered_map`'s workers): as its caller,
    on one core, no helpers of its own."""
    configure(cores=1, compile_cache=False)


def _cores_chosen() -> bool:
    return (
        "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
        or jax.config.values["jax_num_cpu_devices"] >= 1
        or "PYTEST_XDIST_WORKER" in os.environ
    )


def use_cpu_cores(n: int | None = None) -> bool:
    """Expose `n` CPU devices to JAX (default: one per core), so that a sweep's chunks run on
    every core (`experiments.core.sweep`, chunks dealt round-robin; its numbers do not depend
    on the device count); JAX's CPU backend otherwise runs one program on one core. Only
    possible before JAX starts its backends (False then, and nothing changes)."""
    try:
        jax.config.update("jax_num_cpu_devices", int(n or os.cpu_count() or 1))
    except RuntimeError:  # a backend is already running: keep it
        return False
    return True


COMPILE_CACHE_MB = 512


def compile_cache_dir() -> str | None:
    """Where `use_compile_cache` keeps compiled programs: `ATTSVM_XLA_CACHE` ("off" for
    none), else $XDG_CACHE_HOME/attsvm/xla/<cpu> (else ~/.cache/…), <cpu> a fingerprint of
    this CPU's model and instruction-set flags: XLA compiles for the host's instructions
    and JAX's cache key does not name them, so a home folder shared by different machines
    must not hand one machine's programs to another."""
    chosen = os.environ.get("ATTSVM_XLA_CACHE", "").strip()
    if chosen.lower() in ("off", "0", "none", "false"):
        return None
    if chosen:
        return chosen
    home = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(
        os.path.expanduser("~"), ".cache"
    )
    return os.path.join(home, "attsvm", "xla", _cpu_fingerprint())


def _cpu_fingerprint() -> str:
    import hashlib
    import platform

    desc = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo") as f:
            desc += sorted(
                {line.strip() for line in f if line.startswith(("model name", "flags", "Features"))}
            )
    except OSError:
        pass
    return hashlib.sha256("\n".join(desc).encode()).hexdigest()[:16]


def use_compile_cache(path: str | None = None) -> str | None:
    """Keep every compiled XLA program on disk (JAX's persistent compilation cache, at most
    `COMPILE_CACHE_MB`, least recently used evicted, file-locked across processes), so a new
    process reuses the programs an earlier one compiled (docs/performance.md). A program's
    numbers do not depend on where it was compiled. path: the folder (default
    `compile_cache_dir()`; None there: off). Returns the folder used, or None."""
    path = path or compile_cache_dir()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:  # a read-only home: compile as before
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.config.update("jax_compilation_cache_max_size", COMPILE_CACHE_MB * 2**20)
    return path


# XLA's CPU compiler has two code generators for loop fusions: the MLIR emitters (jaxlib
# 0.10's default) and the older LLVM-IR emitters. For the engine's programs the older ones
# compile in about half the time and run as fast; the GD benchmark's records come out bit for
# bit the same, other programs' the same to rounding (tests/test_cores.py;
# docs/performance.md). An unknown flag in XLA_FLAGS aborts the process, so it is set only
# for the jaxlib releases it is known to.
FAST_COMPILE_FLAG = "--xla_cpu_use_fusion_emitters=false"
FAST_COMPILE_JAXLIB = ("0.10.",)


def use_fast_compile() -> bool:
    """Choose XLA's older CPU fusion emitters (`FAST_COMPILE_FLAG`), unless the user's
    XLA_FLAGS already names that setting, jaxlib is not one of `FAST_COMPILE_JAXLIB`, or
    JAX's backends are already running (XLA reads its flags when they start). True when the
    flag was added."""
    import jaxlib

    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" in flags or not jaxlib.__version__.startswith(
        FAST_COMPILE_JAXLIB
    ):
        return False
    from jax._src import xla_bridge  # private: imported only for the jaxlib measured on

    if xla_bridge.backends_are_initialized():
        return False
    os.environ["XLA_FLAGS"] = f"{flags} {FAST_COMPILE_FLAG}".strip()
    return True


MALLOC_KEEP_BYTES = 1 << 30


def keep_freed_memory(limit: int = MALLOC_KEEP_BYTES) -> bool:
    """Ask glibc's malloc to serve blocks under `limit` bytes from its heap and to keep up
    to `limit` bytes of freed memory there (mallopt's M_MMAP_THRESHOLD and
    M_TRIM_THRESHOLD; the GLIBC_TUNABLES route caps the first at 32 MB). A batch's history
    is large (the GD benchmark's: 240 MB of XLA's records, then 240 MB of numpy copy), and
    by default each such block is a fresh mapping whose every page the kernel faults in and
    zeroes on first write, again on every call; kept in the heap, the next call reuses
    pages already touched (docs/performance.md). The price: a process may hold up to
    `limit` of freed memory, which is why a long-running server keeps the system's default
    (`configure(allocator="system")`). Not glibc: nothing. True when both settings were
    taken."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (macOS, Windows)
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
    mapped = mallopt(M_MMAP_THRESHOLD, int(limit))
    trimmed = mallopt(M_TRIM_THRESHOLD, int(limit))
    return bool(mapped and trimmed)
