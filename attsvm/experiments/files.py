"""An experiment's result as files: one CSV per table, settings.json (`metadata`: settings,
attsvm version, backend, time, summary) and its chart (chart.html, and chart.png when
vl-convert-python is installed). What `python -m attsvm reproduce` writes into DIR/NAME/,
and what an entry of the results store holds (`attsvm.store.save`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import metadata
from .core import jsonable


def chart_module():
    """`attsvm_charts.experiments` (Altair lives outside the library), or None when the
    charts package or Altair is not installed (then only the data files are written)."""
    try:
        from attsvm_charts import experiments as charts
    except ImportError:
        return None
    return charts


def write_result(res, out: Path, *, charts: bool = True, png: bool = True) -> list[Path]:
    """Write a result's CSVs, settings.json and chart; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, df in res.frames.items():
        path = out / f"{name}.csv"
        df.to_csv(path, index=False)
        files.append(path)
    path = out / "settings.json"
    path.write_text(json.dumps(jsonable(metadata(res)), indent=2, ensure_ascii=False))
    files.append(path)
    mod = chart_module() if charts else None
    if mod is not None:
        ch = mod.chart(res)
        path = out / "chart.html"
        ch.save(str(path))
        files.append(path)
        if png:
            try:
                import vl_convert  # noqa: F401  (optional: PNG export)
            except ImportError:
                pass
            else:
                path = out / "chart.png"
                ch.save(str(path), scale_factor=1.5)
                files.append(path)
    elif charts:
        print("note: attsvm_charts (or altair) is not installed; charts skipped", file=sys.stderr)
    return files
