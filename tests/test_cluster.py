"""Sweeps on a Dask cluster (attsvm.cluster): the same bits as in this process, through a
dead worker too, and a worker with other sources refused by name. Every process here binds
127.0.0.1 only and is stopped by the test that started it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from attsvm import cluster, experiments  # noqa: E402
from attsvm.__main__ import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# small chunks: a tiny sweep still makes several tasks (the driver sets the chunk size and
# the tasks carry it, so the workers need not see this)
CHUNK = "8"
TINY = dict(ds=(4,), runs=6, steps=300, record_every=100, max_seeds=400)


def _same(a, b) -> None:
    assert set(a.frames) == set(b.frames)
    for name in a.frames:
        assert a.frames[name].to_csv() == b.frames[name].to_csv(), name


@pytest.fixture(scope="module")
def local_result():
    """multi-token, tiny, in this process (no cluster in use: today's code path)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTSVM_CHUNK", CHUNK)
        assert cluster.active() is None
        return experiments.run("multi-token", **TINY)


@pytest.fixture(scope="module")
def dask_client():
    """A LocalCluster of two one-thread workers on 127.0.0.1, with the preload."""
    lc = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # a free local port: clusters may overlap
        preload=["attsvm.cluster"],
        silence_logs=40,
    )
    client = distributed.Client(lc)
    try:
        yield client
    finally:
        client.close()
        lc.close()


def test_a_mismatch_names_the_worker_and_what_differs():
    ours = dict(cluster.identity())
    assert cluster.mismatch("tcp://w:1", ours) is None
    theirs = dict(ours, sources="0" * 64, isa=ours["isa"] + " avx512_fake")
    why = cluster.mismatch("tcp://w:1", theirs, ours)
    assert "tcp://w:1" in why and "sources" in why and "+avx512_fake" in why


def test_use_a_dask_client_gives_the_local_bits(dask_client, local_result, monkeypatch):
    monkeypatch.setenv("ATTSVM_CHUNK", CHUNK)
    with cluster.use(dask_client) as remote:
        res = experiments.run("multi-token", **TINY)
        # the workers were set up by the preload: one JAX device, one BLAS thread
        devices = dask_client.run(lambda: __import__("jax").device_count())
        assert set(devices.values()) == {1}
    _same(res, local_result)
    # the scheduler, the workers and their nannies listen on loopback only
    import psutil

    pids = dask_client.run(os.getpid).values()
    procs = [psutil.Process(p) for p in pids] + [psutil.Process(p).parent() for p in pids]
    bound = {
        c.laddr.ip
        for p in procs
        for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert bound == {"127.0.0.1"}
    assert dask_client.scheduler.address.startswith("tcp://127.0.0.1:")
    where = res.backend["cluster"]
    assert where["tasks"] >= 2 and set(where["workers"]) <= set(remote.checked)
    assert not dask_client.futures  # the tasks past the early stop were cancelled
    assert not dask_client.status == "closed"  # a client given is left open


def test_a_worker_killed_mid_sweep_does_not_change_the_result(
    dask_client, local_result, monkeypatch
):
    monkeypatch.setenv("ATTSVM_CHUNK", CHUNK)
    pids = dask_client.run(os.getpid)
    killed = []

    def kill_one(frac, text):
        """After the first chunk came back: SIGKILL a worker that is computing a task."""
        busy = {w: keys for w, keys in dask_client.processing().items() if keys and w in pids}
        if not killed and busy:
            addr = max(busy, key=lambda w: len(busy[w]))
            os.kill(pids[addr], signal.SIGKILL)  # its nanny starts a new one
            killed.append(addr)

    with cluster.use(dask_client):
        res = experiments.run("multi-token", progress=kill_one, **TINY)
    assert killed  # with tasks under way there, rerun elsewhere
    _same(res, local_result)
    assert killed[0] not in dask_client.scheduler_info(n_workers=-1)["workers"]


def test_an_executor_runs_the_gd_chunks_and_svm_blocks(monkeypatch):
    """svm-rank's cells (`ordered_map`) and over-parameterization's GD chunks, rebuilt from
    their seeds (`sweep`'s `rebuild`), then its SVM blocks, on a thread pool."""
    monkeypatch.setenv("ATTSVM_CHUNK", "3")
    todo = {
        "svm-rank": dict(pairs=((3, 3),), ds=(2, 3), runs=3, max_draws=30),
        "overparameterization": dict(n=3, T=3, ds=(2, 3), runs=5, steps=50),
    }
    for name, s in todo.items():
        here = experiments.run(name, **s)
        with ThreadPoolExecutor(2) as pool, cluster.use(pool) as remote:
            there = experiments.run(name, **s)
        _same(there, here)
        tasks = {"svm-rank": 2, "overparameterization": 2 * (2 + 1)}[name]
        assert there.backend["cluster"]["tasks"] == tasks == sum(remote.workers.values())


def test_cli_cluster_local_writes_the_same_csvs(tmp_path, local_result, monkeypatch):
    monkeypatch.setenv("ATTSVM_CHUNK", CHUNK)
    sets = [f"--set={k}={v!r}" for k, v in TINY.items() if k != "runs"]
    argv = [
        "reproduce",
        "multi-token",
        "--runs",
        str(TINY["runs"]),
        *sets,
        "--no-chart",
        "--quiet",
        "--no-store",
        "--cluster",
        "local:2",
    ]
    assert main(argv + ["--out", str(tmp_path)]) == 0
    for name, frame in local_result.frames.items():
        assert (tmp_path / "multi-token" / f"{name}.csv").read_text() == frame.to_csv(
            index=False
        ), name
    assert main(argv[:-1] + ["nowhere:1", "--out", str(tmp_path)]) == 2
    monkeypatch.setenv("ATTSVM_CLUSTER", "nowhere:1")  # the variable, when no --cluster
    assert main(argv[:-2] + ["--out", str(tmp_path)]) == 2


def test_a_worker_with_other_sources_is_refused_by_name(dask_client, tmp_path):
    """Last: it adds a third worker to the shared cluster (removed at the end)."""
    shutil.copytree(
        ROOT / "attsvm", tmp_path / "attsvm", ignore=shutil.ignore_patterns("__pycache__")
    )
    with open(tmp_path / "attsvm" / "cluster.py", "a") as f:
        f.write("# another version of the library\n")
    before = set(dask_client.scheduler_info(n_workers=-1)["workers"])
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            dask_client.scheduler.address,
            "--nthreads",
            "1",
            "--no-nanny",
            "--host",
            "127.0.0.1",
            "--no-dashboard",
            "--preload",
            "attsvm.cluster",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        dask_client.wait_for_workers(len(before) + 1, timeout=60)
        new = set(dask_client.scheduler_info(n_workers=-1)["workers"]) - before
        assert len(new) == 1
        with pytest.raises(cluster.ClusterError) as err:
            with cluster.use(dask_client):
                pass
        assert new.pop() in str(err.value) and "sources" in str(err.value)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 20
    while (
        len(dask_client.scheduler_info(n_workers=-1)["workers"]) > len(before)
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
