"""A fresh hosted server's first page, timed in headless Chromium:

seconds from starting the server (an empty results store, its background filler on, as the
Dockerfile starts it) until a first visitor, who opens /paper-figures as soon as the health
check answers, sees the page's title. Split into "server up" (the health check answers) and
"title after opening". Both start commands, alternating, `--runs` times each:

    python benchmarks/first_page.py [--runs 3]

`python -m ui.serve` imports the pages' modules in a thread while the server starts and the
browser loads Streamlit's frontend; `streamlit run app.py` imports them in the first script
run. A benchmark, not a test: run it by hand on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
COMMANDS = {
    "ui.serve": ["-m", "ui.serve"],
    "streamlit run": ["-m", "streamlit", "run", "app.py"],
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(base: str, proc: subprocess.Popen) -> None:
    while proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("the server exited before it answered")


def first_title(pw, start: list[str]) -> tuple[float, float]:
    """(server up, title after opening) in seconds for one fresh server and browser."""
    port = _port()
    with tempfile.TemporaryDirectory() as store:
        env = {**os.environ, "ATTSVM_MODE": "hosted", "ATTSVM_RESULTS": store}
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [
                sys.executable,
                *start,
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_healthy(base, proc)
            up = time.perf_counter() - t0
            page.goto(f"{base}/paper-figures", timeout=120_000)
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=120_000)
            return up, time.perf_counter() - t0 - up
        finally:
            browser.close()
            proc.terminate()
            proc.wait(timeout=30)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh servers per start command")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    totals: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with sync_playwright() as pw:
        for i in range(args.runs):
            for name, start in COMMANDS.items():
                up, title = first_title(pw, start)
                totals[name].append(up + title)
                print(
                    f"run {i}  {name:14s} server up {up:5.2f} s, title {title:5.2f} s "
                    f"after opening: {up + title:5.2f} s after start",
                    flush=True,
                )
    med = {name: statistics.median(t) for name, t in totals.items()}
    for name, m in med.items():
        print(
            f"{name:14s} median {m:5.2f} s (min {min(totals[name]):.2f}, "
            f"max {max(totals[name]):.2f})"
        )
    print(f"streamlit run / ui.serve: {med['streamlit run'] / med['ui.serve']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
