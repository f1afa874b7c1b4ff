"""Command line: reproduce the paper's experiments.

    python -m attsvm list
    python -m attsvm reproduce NAME [--runs N] [--seed S] [--out DIR] [--set key=value ...]
    python -m attsvm reproduce all  [--out DIR]          (the paper's experiments)
    python -m attsvm reproduce followups [--out DIR]    (the follow-up papers' experiments)
    python -m attsvm fill [NAME ...] [--store DIR]      (the results store's missing entries)
    … [--cluster tcp://host:8786 | local:N]             (sweeps on a Dask cluster)
    python -m attsvm audit [--layer L --head H] [--sentences N | --file F] [--out DIR]
                                          (a pretrained transformer's heads vs their Att-SVMs)

Each experiment writes DIR/NAME/: one CSV per table, settings.json (settings, attsvm
version, backend, time, the summary with the paper's statistic next to ours) and chart.html
(plus chart.png when vl-convert-python is installed). A progress bar goes to stderr, one
summary line per experiment to stdout. Results at the default settings also go into the
results store (attsvm.store: ATTSVM_RESULTS, which the app shows) unless --no-store; `fill`
computes what the store lacks. With --cluster (or ATTSVM_CLUSTER) every sweep's chunks run
on a Dask cluster's workers and this process writes the files (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from pathlib import Path

from . import cluster, experiments, store
from .experiments.files import chart_module, write_result  # noqa: F401  (the CLI's files)


def _parse_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return text  # not a literal (or nested past the parser): the settings say why


def _overrides(args, name: str) -> dict:
    fields = experiments.settings(name).__dataclass_fields__
    out = {}
    for key in ("runs", "seed", "steps"):
        value = getattr(args, key)
        if value is not None and key in fields:
            out[key] = value
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"`--set` must be key=value; got {item!r}")
        if key.strip() in fields:
            out[key.strip()] = _parse_value(value.strip())
        elif args.name not in GROUPS:
            raise ValueError(
                f"`--set {key}` must name a setting of {name!r} {sorted(fields)}; got {key!r}"
            )
    return out


class Bar:
    """A one-line text progress bar on stderr."""

    def __init__(self, name: str, stream=sys.stderr, width: int = 28):
        self.name, self.stream, self.width, self.t0 = name, stream, width, time.perf_counter()
        self.last = -1.0

    def __call__(self, frac: float, text: str) -> None:
        frac = min(max(frac, 0.0), 1.0)
        now = time.perf_counter()
        if frac < 1.0 and now - self.last < 0.1:
            return
        self.last = now
        full = int(round(frac * self.width))
        line = (
            f"\r{self.name:<22} [{'#' * full}{'.' * (self.width - full)}] {100 * frac:5.1f}% "
            f"{now - self.t0:6.1f}s  {text[:60]:<60}"
        )
        self.stream.write(line)
        if frac >= 1.0:
            self.stream.write("\n")
        self.stream.flush()


# Names that run a group of experiments (a `--set` key then applies where it is a setting).
GROUPS = {"all": experiments.EXPERIMENTS, "followups": experiments.FOLLOWUPS}


def reproduce(args) -> int:
    names = list(GROUPS.get(args.name, [args.name]))
    known = list(experiments.EXPERIMENTS) + list(experiments.FOLLOWUPS)
    if args.name not in GROUPS and args.name not in known:
        raise ValueError(f"`NAME` must be one of {known + list(GROUPS)}; got {args.name!r}")
    plans = [(name, experiments.settings(name, **_overrides(args, name))) for name in names]
    t0 = time.perf_counter()
    for name, s in plans:
        bar = Bar(name) if not args.quiet else (lambda f, t: None)
        res = experiments.run(name, s, progress=bar)
        write_result(res, Path(args.out) / name, charts=not args.no_chart, png=not args.no_png)
        if not args.no_store and s == store.default_settings(name):
            try:
                with store.lock(name, s) as mine:  # the app shows it (docs/hosting.md)
                    if mine:
                        store.save(res, s)
            except OSError as exc:
                print(
                    f"note: not kept in the results store {store.folder()}: {exc}", file=sys.stderr
                )
        print(f"{name} ({res.seconds:.1f} s): {res.summary['text']}")
        print(f"  paper: {experiments.paper_statistic(name)}")
        for note in res.notes:
            print(f"  note: {note}")
    if len(plans) > 1:
        total = time.perf_counter() - t0
        print(f"all {len(plans)} experiments in {total:.1f} s; files in {args.out}/")
    return 0


def fill(args) -> int:
    """Compute the results store's missing entries (the paper's, then the follow-ups')."""
    todo = []
    for name in args.names or ["all", "followups"]:
        if name not in GROUPS and name not in store.names():
            raise ValueError(
                f"`NAME` must be one of {list(store.names()) + list(GROUPS)}; got {name!r}"
            )
        todo += [n for n in GROUPS.get(name, [name]) if n not in todo]
    if args.store_dir:
        os.environ["ATTSVM_RESULTS"] = args.store_dir
    t0 = time.perf_counter()
    done = store.fill(todo, say=lambda line: print(line, flush=True))
    print(
        f"results store {store.folder()}: {len(done)} of {len(todo)} entries computed "
        f"here in {time.perf_counter() - t0:.1f} s, the others were there",
        flush=True,
    )
    return 0


def audit(args) -> int:
    """Audit heads of the pretrained model (docs/pretrained.md): heads.csv and chart.html."""
    from . import pretrained

    model = pretrained.load()
    if args.file:
        lines = Path(args.file).read_text(encoding="utf-8").splitlines()
        sentences = [x.strip() for x in lines if x.strip()]
    else:
        sentences = pretrained.corpus(args.sentences)
    if not sentences:
        raise ValueError("no sentences to audit")
    c = model.config
    layers = range(c.layers) if args.layer is None else [args.layer]
    heads = range(c.heads) if args.head is None else [args.head]
    if any(not 0 <= l < c.layers for l in layers) or any(not 0 <= h < c.heads for h in heads):
        raise ValueError(f"--layer must be in 0..{c.layers - 1}, --head in 0..{c.heads - 1}")
    bar = Bar("audit") if not args.quiet else None
    from .experiments.core import ordered_map, use_helper_processes

    grid = [(l, h) for l in layers for h in heads]
    if len(grid) > 1:  # the heads are Python-bound: one helper process per other core
        use_helper_processes(None)
    df = pretrained.audit_table(
        model,
        sentences,
        heads=grid,
        tau=args.tau,
        baselines=not args.no_baselines,
        progress=None if bar is None else lambda k, n: bar(k / n, f"{k} of {n} heads"),
        map_heads=ordered_map,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "heads.csv", index=False)
    try:
        from attsvm_charts.pretrained import heads_grid
    except ImportError:
        pass
    else:
        heads_grid(df).save(str(out / "chart.html"))
    for r in df.itertuples():
        print(
            f"L{r.layer}H{r.head}: coverage {r.coverage:.2f}, {r.n_constraints} constraints, "
            f"cos_span {r.cos_span:.3f} (baselines {r.baseline_min:.3f} to "
            f"{r.baseline_max:.3f}), {r.seconds:.1f} s"
        )
    print(f"{len(df)} heads on {len(sentences)} sentences; files in {out}/")
    return 0


def use_cpu_cores(n: int | None, *, helpers: bool = True) -> None:
    """Tune this process for a command (`runtime.configure`): `n` CPU devices for JAX
    (default: one per core), n − 1 helper processes beside this one for Python-bound work
    when `helpers`, and compiled programs kept on disk for the next command."""
    from . import runtime

    runtime.configure(
        cores=n or (os.cpu_count() or 1), helpers=0 if not helpers else None if n is None else n - 1
    )


def _helped(args) -> bool:
    """Whether the command runs an experiment that pays for helper processes (≈ 3 s of
    import each, `experiments.uses_helpers`): `fill` computes them all; `reproduce` only
    if one of its experiments does."""
    if args.command == "fill":
        return True
    names = GROUPS.get(args.name, [args.name])
    known = set(experiments.EXPERIMENTS) | set(experiments.FOLLOWUPS)
    return any(experiments.uses_helpers(name) for name in names if name in known)


def add_cpu_devices_option(parser: argparse.ArgumentParser) -> None:
    """The --cpu-devices option, for `use_cpu_cores`, and --cluster (`attsvm.cluster`)."""
    parser.add_argument(
        "--cpu-devices",
        type=int,
        default=None,
        help="CPU devices for JAX sweeps, and processes for the experiments' "
        "Python-bound SVM work (default: one per core)",
    )
    parser.add_argument(
        "--cluster",
        default=None,
        metavar="ADDRESS",
        help="run the sweeps on a Dask cluster: tcp://host:8786, "
        "tls://host:8786 or local:N (default: ATTSVM_CLUSTER, else "
        "this machine; docs/cluster.md)",
    )


def _add_audit_parser(sub) -> None:
    """The `audit` command's options."""
    ap = sub.add_parser(
        "audit",
        help="audit a pretrained transformer's heads against their Att-SVMs (docs/pretrained.md)",
    )
    ap.add_argument("--layer", type=int, default=None, help="one layer (default: all)")
    ap.add_argument("--head", type=int, default=None, help="one head (default: all)")
    ap.add_argument(
        "--sentences",
        type=int,
        default=100,
        help="the first N sentences of the built-in corpus (default 100)",
    )
    ap.add_argument("--file", default=None, help="a UTF-8 file of sentences, one a line")
    ap.add_argument("--tau", type=float, default=0.5, help="selection threshold (default 0.5)")
    ap.add_argument("--no-baselines", action="store_true", help="skip the baselines")
    ap.add_argument("--out", default="audit-out", help="output folder (default audit-out)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")


def _parser() -> argparse.ArgumentParser:
    """The command line: list, reproduce, fill and audit, with their options."""
    parser = argparse.ArgumentParser(
        prog="python -m attsvm", description="Reproduce 'Transformers as Support Vector Machines'."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the experiments")
    rp = sub.add_parser("reproduce", help="run an experiment (or all) and write its files")
    rp.add_argument("name", help="experiment name, 'all' (the paper's) or 'followups'")
    rp.add_argument(
        "--runs", type=int, help="runs (per cell / per d) where the experiment has them"
    )
    rp.add_argument("--seed", type=int, help="the initialization / data seed")
    rp.add_argument("--steps", type=int, help="GD steps where the experiment has them")
    rp.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="any other setting, e.g. --set ds='(4, 6)' --set style=published",
    )
    rp.add_argument("--out", default="reproduce-out", help="output folder (default reproduce-out)")
    rp.add_argument("--no-chart", action="store_true", help="skip the chart files")
    rp.add_argument(
        "--no-png", action="store_true", help="skip chart.png even if vl-convert is installed"
    )
    rp.add_argument("--quiet", action="store_true", help="no progress bar")
    rp.add_argument(
        "--no-store",
        action="store_true",
        help="do not also keep default-settings results in the results store",
    )
    add_cpu_devices_option(rp)
    fp = sub.add_parser(
        "fill",
        help="compute the results store's missing entries "
        "(ATTSVM_RESULTS; the paper's, then the follow-ups')",
    )
    fp.add_argument("names", nargs="*", help="experiments or groups (default: all, followups)")
    fp.add_argument(
        "--store",
        dest="store_dir",
        default=None,
        help="the store's folder (default: ATTSVM_RESULTS or the user cache)",
    )
    fp.add_argument("--quiet", action="store_true", help="(no progress bar: always quiet)")
    add_cpu_devices_option(fp)
    _add_audit_parser(sub)
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "audit":
            return audit(args)
        if args.command == "list":
            for name in experiments.EXPERIMENTS + experiments.FOLLOWUPS:
                print(f"{name:<22} {experiments.title(name)}")
            return 0
        target = args.cluster or cluster.from_env()
        use_cpu_cores(args.cpu_devices, helpers=_helped(args) and target is None)
        with cluster.use(target):  # nothing set: this process, as without a cluster
            return fill(args) if args.command == "fill" else reproduce(args)
    except (ValueError, cluster.ClusterError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        from .experiments.core import stop_helper_processes

        stop_helper_processes()  # now, rather than each winding down at exit


if __name__ == "__main__":
    sys.exit(main())
