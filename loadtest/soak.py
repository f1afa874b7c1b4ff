"""Memory soak: many repeated actions in one process, resident memory sampled as they go.

    python loadtest/soak.py --actions 200            # about 5 minutes here

Drives the app in-process with Streamlit's AppTest (the same scripts, caches and session
state as the server), in hosted mode. Every action changes the data seed, so each one is
new work that lands in the bounded caches: the playground (GD + both SVMs), and every
fifth action the over-parameterization sweep. A fresh session (a new AppTest) starts every
`--session-every` actions, the old one dropped, as visitors come and go. Prints RSS every
`--every` actions; bounded caches and session state show up as a plateau.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actions", type=int, default=200)
    ap.add_argument("--every", type=int, default=20, help="print RSS every this many actions")
    ap.add_argument("--session-every", type=int, default=25)
    a = ap.parse_args(argv)
    if not 1 <= a.actions <= 10_000:
        sys.exit("--actions must be between 1 and 10000")
    os.environ["ATTSVM_MODE"] = "hosted"
    sys.path.insert(0, str(ROOT))
    from streamlit.testing.v1 import AppTest

    def session():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.run()
        return at

    t0 = time.time()
    at = session()
    at.switch_page("app_pages/playground.py").run()
    print(f"{'actions':>8} {'RSS MB':>8} {'s':>7}  (hosted mode, AppTest in-process)")
    print(f"{0:>8} {rss_mb():>8.0f} {time.time() - t0:>7.1f}", flush=True)
    failures = 0
    for k in range(1, a.actions + 1):
        if k % a.session_every == 0:  # a visitor leaves, another arrives
            del at
            gc.collect()
            at = session()
        page = "app_pages/overparam.py" if k % 5 == 0 else "app_pages/playground.py"
        at.switch_page(page).run()
        at.number_input(key="seed").set_value(10_000 + k).run()
        if at.exception or at.error:
            failures += 1
        if k % a.every == 0:
            print(f"{k:>8} {rss_mb():>8.0f} {time.time() - t0:>7.1f}", flush=True)
    print(f"done: {a.actions} actions, {failures} with an error or exception")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
