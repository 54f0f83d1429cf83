"""The package's facade and import graph: a lazy ``import qkgeometry`` whose every public name resolves, one
direction of dependencies (no cycle) and no private name used across modules.

Every ``import`` in ``src/qkgeometry`` counts, at module level or inside a function: a lazy import is still a
dependency, and a cycle through one (a catalogue building models from a loader that reads the catalogue) is still a
tangle for the reader and for the next refactoring.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "qkgeometry"

#: Private names still imported across modules, each owned by a module that another branch is reworking; the
#: owner publishes a public name and this list shrinks. Keep it short and explain every entry.
ALLOWED_PRIVATE_IMPORTS: set[tuple[str, str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str) -> list[tuple[str, str | None]]:
    """``(imported module, imported name or None)`` for every import of ``module`` that targets the package."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "qkgeometry"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "qkgeometry":
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.append((submodule, None) if submodule in MODULES else (target, alias.name))
    return found


def _graph() -> dict[str, set[str]]:
    graph = {}
    for module in MODULES:
        edges = set()
        for target, _ in _imports(module):
            while target not in MODULES:  # `qkgeometry.training.metrics.x` -> the module that holds it
                target = target.rpartition(".")[0]
            if target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_walker_sees_the_package():
    graph = _graph()
    assert {"qkgeometry", "qkgeometry.model", "qkgeometry.readers.gguf", "qkgeometry.training.metrics"} <= set(graph)
    assert "qkgeometry.model" in graph["qkgeometry.readers.gguf"]
    assert "qkgeometry.stats" in graph["qkgeometry.training.metrics"]  # `from .. import stats`


def test_the_cycle_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles (every import counts, lazy ones too): {cycles}"


#: what the model and the format readers may import: the core below them, nothing above (analyses, catalogue)
ARCHITECTURES = {"qkgeometry.architectures", "qkgeometry.architectures.registry", "qkgeometry.architectures.layouts",
                 "qkgeometry.architectures.norms"}
CORE = {"qkgeometry.errors", "qkgeometry.limits", "qkgeometry.source_names", "qkgeometry.model",
        "qkgeometry._arrays", "qkgeometry._files"} | ARCHITECTURES


def test_the_model_knows_no_format_and_the_readers_sit_below_it():
    graph = _graph()
    assert graph["qkgeometry.model"] <= {"qkgeometry.errors", "qkgeometry.source_names", "qkgeometry._arrays"} | ARCHITECTURES
    assert graph["qkgeometry.errors"] == set()
    assert graph["qkgeometry._arrays"] == set()  # numpy-or-torch helpers of the registry and the model: a leaf
    assert graph["qkgeometry._files"] <= {"qkgeometry.errors"}  # atomic writes and the lock: above the errors only
    assert graph["qkgeometry.limits"] <= {"qkgeometry.errors"}  # the bounds every reader checks: above the errors only
    readers = {m for m in graph if m.startswith("qkgeometry.readers.")}
    assert {"qkgeometry.readers.safetensors", "qkgeometry.readers.gguf", "qkgeometry.readers.onnx"} <= readers
    for reader in readers:
        # the Hub cache keeps its fetched tensors under the one cache folder, catalogue.offline.cache_dir(); read_tensors
        # dispatches like load_qk (a folder, an 'offline:' alias, a Hub id)
        above = {"qkgeometry.readers.hub.cache", "qkgeometry.readers.tensors"}
        allowed = CORE | readers | ({"qkgeometry.catalogue.offline"} if reader in above else set())
        assert graph[reader] <= allowed, f"{reader} imports {sorted(graph[reader] - allowed)}"
    # the dispatch: every reader, the device check, and the catalogue only for 'offline:' aliases
    assert graph["qkgeometry.readers"] - readers <= CORE | {"qkgeometry.devices", "qkgeometry.catalogue.offline"}


def test_the_catalogue_is_a_leaf():
    """The catalogue imports only itself, the error family and the architecture registry (never the core that
    reads models)."""
    graph = _graph()
    allowed = {"qkgeometry.errors", "qkgeometry.source_names", "qkgeometry._arrays", "qkgeometry._files"} | ARCHITECTURES
    catalogue = {m for m in graph if m == "qkgeometry.catalogue" or m.startswith("qkgeometry.catalogue.")}
    assert {"qkgeometry.catalogue.offline", "qkgeometry.catalogue.presets", "qkgeometry.catalogue.paper"} <= catalogue
    for module in catalogue:
        assert graph[module] <= catalogue | allowed, f"{module} imports {sorted(graph[module] - catalogue - allowed)}"
    for leaf in allowed:
        assert not {m for m in graph[leaf] if m.startswith("qkgeometry.")} - allowed, leaf


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_private_name_is_imported_across_modules(module):
    private = {(module, target, name) for target, name in _imports(module)
               if name is not None and name.startswith("_") and not name.startswith("__")}
    unexpected = private - ALLOWED_PRIVATE_IMPORTS
    assert not unexpected, f"{module} imports private names of other modules: {sorted(unexpected)}"


def test_the_allowed_private_imports_still_exist():
    """An entry that no longer occurs must leave the list (so the list only ever shrinks to empty)."""
    used = {(m, t, n) for m in MODULES for t, n in _imports(m) if n is not None}
    assert used >= ALLOWED_PRIVATE_IMPORTS, f"stale entries: {sorted(ALLOWED_PRIVATE_IMPORTS - used)}"


def test_import_is_lazy_and_every_public_name_resolves():
    """``import qkgeometry`` loads neither torch nor pandas; each name of ``__all__`` then resolves to its home, and
    ``qkgeometry.survey`` stays the function after its module (``qkgeometry.surveying.scoring``) is imported."""
    code = ("import sys, qkgeometry as qg; assert 'torch' not in sys.modules and 'pandas' not in sys.modules; "
            "import qkgeometry.surveying.scoring; assert callable(qg.survey) and qg.survey.__module__ == 'qkgeometry.surveying.scoring'; "
            "assert qg.layer_scores.__module__ == 'qkgeometry.scores'; "
            "assert all(getattr(qg, n) is not None for n in qg.__all__); "
            "assert (qg.QKModel.__module__, qg.load_qk.__module__) == ('qkgeometry.model', 'qkgeometry.readers'); "
            "assert sorted(dir(qg)) == sorted(qg.__all__); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.stdout.strip() == "ok", out.stderr


def test_submodules_are_attributes_and_unknown_names_are_refused():
    import qkgeometry as qg

    assert qg.catalogue.__name__ == "qkgeometry.catalogue"
    for retired in ("loading", "zoo", "notebooks", "slides"):  # homes that moved (see the API page)
        with pytest.raises(AttributeError):
            getattr(qg, retired)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        qg.nope  # noqa: B018


def _exported(init: Path) -> set[str]:
    """The names of a package's ``__all__`` (a literal list or tuple in its ``__init__.py``)."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_shares_a_name_with_what_it_holds_or_its_package_exports(module):
    """``from qkgeometry.x import x`` and ``qkgeometry.x`` meaning two things are both traps: a package attribute is
    rebound to the submodule when the submodule is imported."""
    path = MODULES[module]
    stem = module.rpartition(".")[2]
    held = {n.name for n in ast.parse(path.read_text()).body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    assert stem not in held, f"{module} defines {stem!r}"
    if module != "qkgeometry":
        package_init = path.parent.parent / "__init__.py" if path.name == "__init__.py" else path.parent / "__init__.py"
        assert stem not in _exported(package_init), f"{package_init} exports {stem!r}, the name of {module}"
