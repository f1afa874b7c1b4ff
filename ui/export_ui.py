"""The Export button: one zip with settings, data, trajectory, SVMs, charts and a script.

The bundle is built only when the button is clicked (Streamlit's deferred download), so
showing the button costs nothing on a rerun and holds no second copy of the data.
"""

from __future__ import annotations

import dataclasses
import re
from urllib.parse import urlencode

import streamlit as st

import attsvm
from attsvm import export


def share_url() -> str:
    """The link that restores this view: the page URL plus its query parameters."""
    try:
        base = st.context.url or ""
    except Exception:
        base = ""
    params = urlencode(st.query_params.to_dict())
    return base + (f"?{params}" if params else "")


def _settings(specs) -> dict:
    out = {}
    for spec in specs:
        if dataclasses.is_dataclass(spec):
            d = dataclasses.asdict(spec)
            d.pop("data", None)  # custom arrays are in data/ already
            out[type(spec).__name__] = d
    return out


def make_bundle(
    *, problem: attsvm.Problem, page: str, url: str, query_params: dict, specs=(), charts=None, **kw
) -> bytes:
    """The bundle's bytes (see attsvm.export.build_bundle); `charts` maps names to Altair
    charts, written as Vega-Lite JSON and as standalone HTML. Calls no Streamlit command
    (it runs when the download is requested, outside the script run)."""
    texts = {}
    for name, chart in (charts or {}).items():
        texts[f"{name}.json"] = chart.to_json()
        texts[f"{name}.html"] = chart.to_html()
    return export.build_bundle(
        problem=problem,
        page=page,
        charts=texts,
        settings={"query_params": query_params, **_settings(specs)},
        url=url,
        **kw,
    )


def export_button(
    *, key: str, problem: attsvm.Problem, page: str, specs=(), charts=None, **kw
) -> None:
    """Draw the Export button for a result; keyword arguments as `make_bundle` (run,
    solutions, train, init, tables)."""
    slug = re.sub(r"[^a-z0-9]+", "-", page.lower()).strip("-") or "result"
    where = dict(url=share_url(), query_params=st.query_params.to_dict())
    st.download_button(
        "Export (zip)",
        key=key,
        icon=":material/download:",
        on_click="ignore",
        data=lambda: make_bundle(
            problem=problem, page=page, specs=specs, charts=charts, **where, **kw
        ),
        file_name=f"attsvm-{slug}.zip",
        mime="application/zip",
        help="Settings (JSON), data, trajectory and SVM solutions (NPZ/CSV), the charts, and "
        "reproduce.py, which reruns this result with the attsvm library and checks the "
        "numbers.",
    )
