"""The repository's layout rules: the library never reaches into the app, and no module
imports itself back through others."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attsvm", "attsvm_charts", "ui", "benchmarks")
PAGES = "app_pages"  # the page scripts (app.py lists them for st.navigation)


def test_the_library_and_the_cli_import_neither_streamlit_nor_altair_nor_ui():
    code = (
        "import sys, attsvm, attsvm.__main__, attsvm.experiments, attsvm.studies, "
        "attsvm.live, attsvm.config, attsvm.export, attsvm.io\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('streamlit', 'altair', 'ui', 'attsvm_charts'))\n"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set) -> set:
    """Project modules `path` imports (anywhere in the file, local imports included)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")
                up = up[: len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        out |= {t for t in targets if t in modules and t != name}
    return out


def test_no_import_circle_among_the_projects_modules():
    files = {p: _module_name(p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    files.update(
        {
            p: p.stem if p.parent == ROOT else f"{PAGES}.{p.stem}"
            for p in [ROOT / "app.py", *(ROOT / PAGES).glob("*.py")]
        }
    )
    modules = set(files.values())
    graph = {name: _imports(p, name, modules) for p, name in files.items()}
    # A package's __init__ re-exporting its submodules is not a circle: drop package ->
    # own-submodule edges.
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not d.startswith(name + ".")}
    state, cycles = {}, []

    def visit(m, stack):
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                cycles.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d, stack + [d])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles


def test_streamlit_does_not_read_the_pages_as_its_legacy_layout():
    # A folder named pages/ beside the entry script makes Streamlit run every script run
    # through its legacy router until some run reaches st.navigation: a fresh server's
    # first visitor to a deep link got "Page not found" (the legacy router knows the file
    # stems, not app.py's URLs). Page scripts go in app_pages/.
    from streamlit.runtime.pages_manager import PagesManager

    saved = PagesManager.uses_pages_directory
    PagesManager.uses_pages_directory = None
    try:
        PagesManager(str(ROOT / "app.py"))
        assert PagesManager.uses_pages_directory is False
    finally:
        PagesManager.uses_pages_directory = saved
    assert sorted(p.name for p in (ROOT / PAGES).glob("*.py"))


def test_pages_are_short_and_long_functions_say_why():
    pages = {p.name: len(p.read_text().splitlines()) for p in (ROOT / PAGES).glob("*.py")}
    assert all(n <= 100 for n in pages.values()), pages
    unexplained = []
    for pkg in (*PACKAGES, PAGES):
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.FunctionDef):
                    continue
                doc = " ".join((ast.get_docstring(node) or "").lower().split())
                if node.end_lineno - node.lineno >= 60 and "long because" not in doc:
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert not unexplained, unexplained


def test_the_library_counts_compiles_without_jax_private_api():
    private = [
        str(p.relative_to(ROOT))
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if "._cache_size(" in p.read_text()
    ]
    assert not private, private


def _function_lengths(root: Path):
    """(path:name, lines) of every function under `root`, counted from its `def` line to its
    last line (docstring included, decorators not)."""
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.relative_to(ROOT)}:{node.name}", node.end_lineno - node.lineno + 1


def test_no_function_in_the_library_or_the_charts_exceeds_80_lines():
    long = {
        name: n
        for pkg in ("attsvm", "attsvm_charts")
        for name, n in _function_lengths(ROOT / pkg)
        if n > 80
    }
    assert not long, long


def test_only_the_experiments_the_command_line_and_the_store_import_the_experiments():
    # experiments/ is the library's top floor: it composes the rest. Below it nothing may
    # reach up into it; the command line (attsvm/__main__.py), the results store
    # (attsvm/store.py: it runs experiments and keeps their outputs), the process tuning
    # (attsvm/runtime.py: it starts the experiments' helper processes) and attsvm/cluster.py
    # (it runs the experiments' sweeps on a cluster's workers) are the entries above it.
    # The charts, ui/ and app_pages/ sit above the library and may import it.
    files = {p: _module_name(p) for p in (ROOT / "attsvm").rglob("*.py")}
    modules = set(files.values())
    up = {}
    for p, name in files.items():
        if name.startswith("attsvm.experiments") or name in (
            "attsvm.__main__",
            "attsvm.store",
            "attsvm.runtime",
            "attsvm.cluster",
        ):
            continue
        bad = sorted(
            d
            for d in _imports(p, name, modules)
            if d == "attsvm.experiments" or d.startswith("attsvm.experiments.")
        )
        if bad:
            up[name] = bad
    assert not up, up
