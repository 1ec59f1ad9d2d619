"""The package layout is the architecture (docs/design.md §2): which part may import which, and no
import cycles. Read from the source with :mod:`ast`, so a violation fails here before it confuses a
reader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "batchcrawl"

# part -> the parts it may import (itself always allowed). Top-level modules are parts of their own.
SHARED = {"errors", "config", "urls", "records", "politeness"}
ALLOWED = {
    # records: the outcome and status values status counts (a leaf: errors, httpdate)
    "store": {"errors", "config", "records"},
    "scope": {"errors", "config", "urls"},
    "frontier": SHARED | {"store", "scope", "ring"},
    "fetch": SHARED | {"store", "scope", "cdxj", "httpdate"},
    "export": {"errors", "config", "urls", "store", "cdxj"},
    "report": {"errors", "config", "store"},
    "graph": {"errors", "config", "urls", "store"},
    # the stages every driver shares: never a driver (round, pipeline, stream) or the CLI
    "engine": SHARED
    | {
        "store",
        "scope",
        "frontier",
        "fetch",
        "extract",
        "ring",
        "procmem",
        "workersetup",
        "console",
    },
    # fetch: its bounded content decoder and the WARC location a text sink gets (extract.at_fetch)
    "extract": {"errors", "config", "store", "fetch", "records"},
    "errors": set(),
    "urls": {"errors"},
    "cdxj": {"errors", "urls"},
    "ring": {"errors", "urls"},
    "records": {"errors", "httpdate"},
    "httpdate": set(),
    # per-host politeness rules and groups: parsed by config, applied by selection and fetch
    "politeness": {"errors", "urls"},
    "config": {"errors", "politeness"},
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _part(module: str) -> str:
    """``batchcrawl.fetch.worker`` -> ``fetch``; ``batchcrawl.urls`` -> ``urls``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def _imports(path: Path) -> set[str]:
    """Modules of batchcrawl imported by ``path``, those under ``if TYPE_CHECKING:`` and inside
    functions included (a cycle through a type annotation is still a cycle of the design). ``from
    batchcrawl.store import views`` is an import of ``batchcrawl.store.views`` when that module
    exists, else of ``batchcrawl.store``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "batchcrawl" or node.module.startswith("batchcrawl."):
                for alias in node.names:
                    found.add(_target(node.module, alias.name))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("batchcrawl."))
    found.discard("batchcrawl")
    return found


def _target(module: str, name: str) -> str:
    """What ``from module import name`` imports: the submodule ``module.name`` if it exists."""
    sub = PACKAGE.parent.joinpath(*module.split("."), name)
    if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
        return f"{module}.{name}"
    return module


def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_package_has_the_parts() -> None:
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert {"store", "frontier", "scope", "fetch", "export", "testing"} <= subpackages


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_part_imports_only_what_it_may(part: str) -> None:
    bad = []
    for module, imports in _graph().items():
        if _part(module) != part:
            continue
        for target in imports:
            other = _part(target)
            if other != part and other not in ALLOWED[part]:
                bad.append(f"{module} imports {target}")
    assert not bad, "layering broken (docs/design.md §2):\n" + "\n".join(sorted(bad))


def test_nothing_in_the_crawler_imports_testing() -> None:
    users = [
        m
        for m, imports in _graph().items()
        if _part(m) not in ("testing", "demo", "cli")
        and any(_part(t) == "testing" for t in imports)
    ]
    assert users == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def test_no_import_cycles() -> None:
    assert _cycles(_graph()) == []


def test_type_checking_imports_count(tmp_path: Path) -> None:
    """Control: an import under ``if TYPE_CHECKING:`` is an edge of the graph."""
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from batchcrawl.store.crawldir import CrawlDir\n"
    )
    assert _imports(module) == {"batchcrawl.store.crawldir"}


def test_cycle_finder_can_fail() -> None:
    """Control: the cycle finder does report a cycle."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


# Issue 30 ("Done when"): small modules with one job among the fetch and driver modules, and a
# small FetchWorker facade over the fetch stages.
MAX_MODULE_LINES = 600
MAX_FETCH_WORKER_LINES = 300


def _sized_modules() -> list[Path]:
    """The fetch and driver modules issue 30 bounds: fetch/, engine/, round, stream, pipeline*."""
    found = [*PACKAGE.joinpath("fetch").rglob("*.py"), *PACKAGE.joinpath("engine").rglob("*.py")]
    found += [PACKAGE / "round.py", PACKAGE / "stream.py", *PACKAGE.glob("pipeline*.py")]
    return sorted(found)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_fetch_and_driver_modules_are_small() -> None:
    modules = _sized_modules()
    assert PACKAGE / "fetch" / "workbench.py" in modules and PACKAGE / "round.py" in modules
    big = {str(p.relative_to(PACKAGE)): n for p in modules if (n := _lines(p)) > MAX_MODULE_LINES}
    assert big == {}, f"split these by job (at most {MAX_MODULE_LINES} lines each): {big}"


def test_fetch_worker_is_a_small_facade() -> None:
    tree = ast.parse((PACKAGE / "fetch" / "worker.py").read_text(encoding="utf-8"))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FetchWorker"]
    assert cls.end_lineno is not None
    assert cls.end_lineno - cls.lineno + 1 <= MAX_FETCH_WORKER_LINES
