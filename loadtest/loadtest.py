"""Load test: N simultaneous visitors against a hosted-mode server on loopback.

Run by hand (from the repository root, with requirements-dev.txt installed and Debian's
chromium at /usr/bin/chromium):

    python loadtest/loadtest.py                      # N = 1, 5, 20 (about 3 minutes here)
    python loadtest/loadtest.py --sessions 2 --json out.json

It starts `streamlit run app.py` on 127.0.0.1 with ATTSVM_MODE=hosted, warms it up with
one visitor (JAX compiles its programs once per process), then for each N opens N browser
contexts — N independent Streamlit sessions — in ONE headless chromium, all at once. Each
visitor opens the playground with the default settings and then the over-parameterization
sweep with its defaults, each with its own data seed (so every visitor's GD runs and SVMs
are really computed, not served from another visitor's cache), and times each page from
navigation to its first drawn chart. Error boxes and timeouts are counted. The server's
resident memory (VmRSS from /proc) is sampled every 0.25 s: before the round, its peak,
and `--settle` seconds after the visitors left (75 s: past the 60 s after which the server
frees a disconnected session, as in the Dockerfile).

Note that the browser renders all N pages on the same machine as the server, so on a
2-core box the times include the client's rendering work too; the table also gives the
CPU seconds the server and the browser each used per round, and the machine's load
average when the round began.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CHART = ".vega-embed canvas, .vega-embed svg"
BAD = '[data-testid="stException"], [data-testid="stAlertContentError"]'
PAGES = (("playground", "token-selection"), ("sweep", "over-parameterization"))
MAX_SESSIONS = 50


# -- the server --------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MB (Linux /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int, exclude: int) -> float:
    """CPU seconds (own + reaped children's) of every live descendant of `root`, except the
    subtree of `exclude`: here, the browser and its renderers, not the server."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [c for c in children.get(root, []) if c != exclude]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo += [c for c in children.get(pid, []) if c != exclude]
    return total / os.sysconf("SC_CLK_TCK")


class Server:
    """`streamlit run app.py` in hosted mode on loopback, with an RSS sampler."""

    def __init__(self, port: int = 0, mode: str = "hosted", log: Path | None = None):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "ATTSVM_MODE": mode, "PYTHONPATH": str(ROOT)}
        self._log = open(log, "w") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(self.port),
                "--browser.gatherUsageStats",
                "false",
                # As the Dockerfile: a closed visitor's session is freed after 60 s, not 120 s.
                "--server.disconnectedSessionTTL",
                "60",
            ],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"{self.base}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                time.sleep(0.3)
        else:
            raise RuntimeError("streamlit did not answer /_stcore/health in time")
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self):
        while not self._stop.is_set() and self.proc.poll() is None:
            try:
                self.samples.append((time.time(), rss_mb(self.proc.pid)))
            except OSError:
                break
            time.sleep(0.25)

    def rss(self) -> float:
        return rss_mb(self.proc.pid)

    def cpu(self) -> float:
        return cpu_s(self.proc.pid)

    def peak_since(self, t0: float) -> float:
        return max((m for t, m in self.samples if t >= t0), default=float("nan"))

    def stop(self):
        self._stop.set()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if self._log is not subprocess.DEVNULL:
            self._log.close()


# -- the visitors ------------------------------------------------------------------------------
async def visit(browser, base: str, seed: int, timeout_s: float, pages=PAGES) -> dict:
    """One visitor (own browser context = own session): each page, time to first chart."""
    out = {"seed": seed, "errors": []}
    ctx = await browser.new_context(viewport={"width": 1280, "height": 1600})
    try:
        page = await ctx.new_page()
        for name, path in pages:
            t0 = time.perf_counter()
            try:
                await page.goto(f"{base}/{path}?seed={seed}", timeout=timeout_s * 1000)
                out[f"{name}_load"] = time.perf_counter() - t0  # HTML + JS loaded
                await page.wait_for_selector(CHART, timeout=timeout_s * 1000)
                out[name] = time.perf_counter() - t0
                # Let the script finish, then look for error boxes.
                await page.wait_for_function(
                    "!document.querySelector('[data-testid=\"stStatusWidget\"]')",
                    timeout=timeout_s * 1000,
                )
                bad = page.locator(BAD)
                if await bad.count():
                    out["errors"].append(f"{name}: {(await bad.first.inner_text())[:200]}")
            except Exception as exc:  # a timeout or a crash is a failed visit
                out[name] = None
                out["errors"].append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        await ctx.close()
    return out


async def round_(
    browser, server: Server, n: int, seed0: int, timeout_s: float, settle: float, pages=PAGES
) -> dict:
    before, cpu0, load0 = server.rss(), server.cpu(), os.getloadavg()[0]
    client0 = tree_cpu_s(os.getpid(), server.proc.pid)
    t0 = time.time()
    visits = await asyncio.gather(
        *(visit(browser, server.base, seed0 + k, timeout_s, pages) for k in range(n))
    )
    wall = time.time() - t0
    peak, cpu = server.peak_since(t0), server.cpu() - cpu0
    client = tree_cpu_s(os.getpid(), server.proc.pid) - client0
    await asyncio.sleep(settle)
    row = {
        "N": n,
        "wall_s": wall,
        "server_cpu_s": cpu,
        "browser_cpu_s": client,
        "load_avg_1min": load0,
        "rss_before_mb": before,
        "rss_peak_mb": peak,
        "rss_after_mb": server.rss(),
        "errors": [e for v in visits for e in v["errors"]],
    }
    for name, _ in pages:
        times = [v[name] for v in visits if v.get(name) is not None]
        row[f"{name}_ok"] = len(times)
        row[f"{name}_p50_s"] = statistics.median(times) if times else None
        row[f"{name}_p95_s"] = percentile(times, 95) if times else None
        loads = [v[f"{name}_load"] for v in visits if v.get(f"{name}_load") is not None]
        row[f"{name}_load_p50_s"] = statistics.median(loads) if loads else None
    return row


def percentile(xs, q: float) -> float:
    """Nearest-rank percentile (the p95 of 20 samples is the 19th smallest)."""
    xs = sorted(xs)
    k = max(1, -(-len(xs) * q // 100))
    return xs[int(k) - 1]


async def run(
    sessions,
    *,
    port: int = 0,
    timeout_s: float = 240,
    settle: float = 75,
    pages=PAGES,
    log: Path | None = None,
) -> dict:
    """Start a server, warm it up, run one round per N in `sessions`; return the results."""
    from playwright.async_api import async_playwright

    if any(not 1 <= n <= MAX_SESSIONS for n in sessions):
        raise ValueError(f"`sessions` must be between 1 and {MAX_SESSIONS}; got {sessions}")
    server = Server(port, log=log)
    try:
        t = time.time()
        server.wait_ready()
        started = time.time() - t
        idle = server.rss()
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                warm = await round_(browser, server, 1, 0, timeout_s, settle=2, pages=pages)
                rows = []
                for j, n in enumerate(sessions):
                    rows.append(
                        await round_(browser, server, n, 1000 * (j + 1), timeout_s, settle, pages)
                    )
            finally:
                await browser.close()
        return {
            "start_s": started,
            "rss_idle_mb": idle,
            "warmup": warm,
            "rounds": rows,
            "rss_end_mb": server.rss(),
        }
    finally:
        server.stop()


def table(result: dict, pages=PAGES) -> str:
    f = lambda x: "—" if x is None else f"{x:.2f}"  # noqa: E731
    head = (
        ["N", "ok"]
        + [f"{p} p50/p95 s" for p, _ in pages]
        + ["RSS before/peak/after MB", "errors", "wall s", "CPU s server/browser", "load avg"]
    )
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in [dict(result["warmup"], N="1 (warm-up)")] + result["rounds"]:
        ok = min(r[f"{p}_ok"] for p, _ in pages)
        cells = [str(r["N"]), str(ok)]
        cells += [f"{f(r[f'{p}_p50_s'])} / {f(r[f'{p}_p95_s'])}" for p, _ in pages]
        cells += [
            f"{r['rss_before_mb']:.0f} / {r['rss_peak_mb']:.0f} / {r['rss_after_mb']:.0f}",
            str(len(r["errors"])),
            f"{r['wall_s']:.1f}",
            f"{r['server_cpu_s']:.0f} / {r['browser_cpu_s']:.0f}",
            f"{r['load_avg_1min']:.1f}",
        ]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", default="1,5,20", help="comma-separated N values (≤ 50)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=240, help="seconds per page per visitor")
    ap.add_argument(
        "--settle",
        type=float,
        default=75,
        help="seconds after a round before the 'after' memory reading",
    )
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--log", type=Path, help="write the server's output here")
    a = ap.parse_args(argv)
    if not Path(CHROMIUM).exists():
        sys.exit(f"{CHROMIUM} not found (apt-get install chromium)")
    sessions = [int(x) for x in a.sessions.split(",") if x.strip()]
    result = asyncio.run(
        run(sessions, port=a.port, timeout_s=a.timeout, settle=a.settle, log=a.log)
    )
    print(
        f"server up in {result['start_s']:.1f} s, idle RSS {result['rss_idle_mb']:.0f} MB; "
        f"hosted mode; one chromium, one context per visitor"
    )
    print(table(result))
    for r in result["rounds"]:
        for e in r["errors"][:5]:
            print(f"  N={r['N']}: {e}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=2))
    bad = sum(len(r["errors"]) for r in result["rounds"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
