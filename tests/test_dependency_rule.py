"""The dependency rule of DESIGN.md, read from the code's own imports with `ast`, at module
level and inside functions alike (a deferred import is still a dependency):

- `agent` imports nothing of `controller`, `analysis` or `tests`: it is deployed alone to a node;
- `analysis` imports nothing of `controller` or `tests`: it reads only the files of a run;
- nothing outside `tests` imports `tests`;
- the controller's parts (its sub-packages and top-level modules: `controller.config`,
  `controller.sweep`, `controller.errors`, ...) import one another without a cycle, so each
  sits below every part that uses it.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from itertools import pairwise
from pathlib import Path

import pytest

from agent.workloads import SPECS

REPO = Path(__file__).resolve().parents[1]
# Top-level folders that hold no code of the project: build output, recorded runs.
_NOT_CODE = {"build", "dist", "data"}
_FORBIDDEN = {
    "agent": {"controller", "analysis", "tests"},
    "analysis": {"controller", "tests"},
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (a name imported from a module counts as that module)
    where: str  # path:line of the import statement

    def __str__(self) -> str:
        return f"{self.where}: {self.source} imports {self.target}"


def _python_files(root: Path) -> Iterator[Path]:
    for folder, subfolders, names in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(
            name
            for name in subfolders
            if not name.startswith(".")
            and name != "__pycache__"
            and not (here == root and name in _NOT_CODE)
            # A virtual environment under any name holds other projects' code.
            and not (here / name / "pyvenv.cfg").exists()
        )
        yield from (here / name for name in sorted(names) if name.endswith(".py"))


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_imports(root: Path) -> list[Import]:
    """Every import statement of every Python file under `root`, wherever it sits in the file."""
    files = {_module_name(root, path): path for path in _python_files(root)}
    imports = []
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per extra dot
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` mod.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            where = f"{path.relative_to(root)}:{node.lineno}"
            imports.extend(Import(module, target, where) for target in dict.fromkeys(targets))
    return imports


def forbidden_imports(imports: list[Import]) -> list[Import]:
    """Imports that break the rule between the top-level packages."""
    broken = []
    for found in imports:
        source, target = found.source.split(".")[0], found.target.split(".")[0]
        if target in _FORBIDDEN.get(source, set()) or (target == "tests" and source != "tests"):
            broken.append(found)
    return broken


def _part(module: str) -> str | None:
    """The controller part a module belongs to (`controller.sweep.engine` -> `controller.sweep`)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "controller" else None


def controller_cycle(imports: list[Import]) -> list[Import] | None:
    """One cycle between the controller's parts, as the imports that close it, or None."""
    edges: dict[str, dict[str, Import]] = {}
    for found in imports:
        source, target = _part(found.source), _part(found.target)
        if source is not None and target is not None and source != target:
            edges.setdefault(source, {}).setdefault(target, found)
    finished: set[str] = set()
    path: list[str] = []  # the parts being visited, each importing the next

    def visit(part: str) -> list[Import] | None:
        if part in path:
            loop = [*path[path.index(part) :], part]
            return [edges[a][b] for a, b in pairwise(loop)]
        if part in finished:
            return None
        path.append(part)
        for target in sorted(edges.get(part, {})):
            cycle = visit(target)
            if cycle is not None:
                return cycle
        path.pop()
        finished.add(part)
        return None

    for part in sorted(edges):
        cycle = visit(part)
        if cycle is not None:
            return cycle
    return None


def _describe(cycle: list[Import]) -> str:
    parts = " -> ".join(
        [*(_part(found.source) or "" for found in cycle), _part(cycle[0].source) or ""]
    )
    return f"import cycle {parts}:\n" + "\n".join(f"  {found}" for found in cycle)


def test_the_project_keeps_the_dependency_rule() -> None:
    imports = read_imports(REPO)
    # A walk that found nothing would pass vacuously.
    assert {found.source.split(".")[0] for found in imports} >= {"agent", "controller", "analysis"}
    broken = forbidden_imports(imports)
    if broken:
        pytest.fail("imports across the dependency rule:\n" + "\n".join(map(str, broken)))
    cycle = controller_cycle(imports)
    if cycle is not None:
        pytest.fail(_describe(cycle))


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_closed_by_a_function_level_import_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "controller/__init__.py": "",
            "controller/errors.py": "",
            "controller/meter/__init__.py": "",
            "controller/meter/sim.py": "from controller.firmware import paths\n",
            "controller/firmware/__init__.py": "from . import paths\n",
            "controller/firmware/paths.py": "from controller import errors\n",
            "controller/firmware/check.py": (
                "def check():\n    from ..meter.sim import run\n    return run\n"
            ),
        },
    )
    cycle = controller_cycle(read_imports(root))
    assert cycle is not None
    assert [str(found) for found in cycle] == [
        "controller/firmware/check.py:2: controller.firmware.check imports controller.meter.sim",
        "controller/meter/sim.py:1: controller.meter.sim imports controller.firmware.paths",
    ]
    assert _describe(cycle).splitlines()[0] == (
        "import cycle controller.firmware -> controller.meter -> controller.firmware:"
    )


def test_imports_across_the_top_level_packages_are_named(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "agent/__init__.py": "",
            "agent/cli.py": "import controller.errors\n",
            "analysis/__init__.py": "",
            "analysis/load.py": "def f():\n    from controller import errors\n",
            "controller/__init__.py": "from analysis import load\n",
            "controller/errors.py": "",
            "benchmarks/run.py": "from tests.helpers import x\n",
            "tests/__init__.py": "",
            "tests/helpers.py": "import agent.cli\nimport controller\n",
            ".venv/lib/site.py": "import tests\n",
            "venv/pyvenv.cfg": "",
            "venv/lib/other.py": "import tests\n",
        },
    )
    assert [str(found) for found in forbidden_imports(read_imports(root))] == [
        "agent/cli.py:1: agent.cli imports controller.errors",
        "analysis/load.py:2: analysis.load imports controller.errors",
        "benchmarks/run.py:1: benchmarks.run imports tests.helpers",
    ]


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower()


def test_the_agent_imports_only_its_core_dependencies_and_the_extras_it_declares() -> None:
    """A node gets the agent's core dependencies and the extra of its workload (WorkloadSpec),
    downloaded for its platform: anything else the agent imports would be missing there."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    core = {_requirement_name(r) for r in project["dependencies"]}
    # psutil publishes no armv7l wheel: a 32-bit Raspberry Pi OS node could not install it.
    assert "psutil" not in core
    optional = project["optional-dependencies"]
    # A node gets its workload's extra, gpio for a GPIO marker, h3 when it runs HTTP/3, and
    # uvloop when its run's client asks for that event loop.
    node_extras = {spec.extra for spec in SPECS.values() if spec.extra} | {"gpio", "h3", "uvloop"}
    allowed = core | {_requirement_name(r) for extra in node_extras for r in optional[extra]}
    distributions = packages_distributions()
    third_party = {
        found.target.split(".")[0]: found
        for found in read_imports(REPO)
        if found.source.split(".")[0] == "agent"
        and found.target.split(".")[0] not in {"agent", *sys.stdlib_module_names}
    }
    assert {"h2", "hyperframe"} <= set(third_party)  # the walk saw the agent's imports
    undeclared = [
        str(found)
        for name, found in sorted(third_party.items())
        if not {d.lower() for d in distributions.get(name, [name])} & allowed
    ]
    assert not undeclared, "the agent imports what a node does not get:\n" + "\n".join(undeclared)
