"""The dependency rule of DESIGN.md, read from the code's own imports with `ast`, at module
level and inside functions alike (a deferred import is still a dependency, and so is one made
for type checking only):

- `agent` imports nothing of `controller`, `analysis` or `tests`: it is deployed alone to a node;
- `analysis` imports nothing of `controller` or `tests`: it reads only the files of a run;
- nothing outside `tests` imports `tests`;
- the controller's parts (its sub-packages and top-level modules: `controller.config`,
  `controller.sweep`, `controller.errors`, ...) import one another without a cycle, so each
  sits below every part that uses it;
- in `agent` and `analysis` no module (a file; a package is its `__init__.py`) imports itself
  through others: that is where Python meets a circle, when the second import finds the first
  module half-initialised, and a deferred import only moves the meeting to a later call;
- the agent's parts sit in layers (`AGENT_LAYERS`, bottom to top) and no import runs from a
  part to one in a higher layer (an arrow back up), named with its file and line. A part is
  a sub-package or a top-level module, except in a registry's folder (an entry `agent.X.*`):
  there the registry and its vocabulary (`agent.workloads`, `agent.workloads.spec`) are parts
  of their own, as is each member's package (`agent.workloads.page`), since a registry names
  its members' declarations by module and loads them on first use, so it sits below them and
  everyone may read it. Parts of one layer may import each other (without a circle).
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
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

# The agent's layers, bottom to top (module doc). A new part goes where its imports put it.
Layers = tuple[tuple[str, ...], ...]
AGENT_LAYERS: Layers = (
    # What every layer stands on: errors, limits, the node's probes, marker, lines and logs.
    (
        "agent",
        "agent._version",
        "agent.conditions",
        "agent.cpu_peak",
        "agent.errors",
        "agent.event_loop",
        "agent.html_links",
        "agent.kernel_counters",
        "agent.limits",
        "agent.marker",
        "agent.paths",
        "agent.probe",
        "agent.proc_files",
        "agent.qlog",
        "agent.registry",
        "agent.site",
        "agent.traffic",
        "agent.transport_counts",
        "agent.transitions",
        "agent.trial_control",
        "agent.trial_header",
        "agent.trial_log",
    ),
    # The kinds as data, light, for the controller reads them at config load: a registry and
    # its vocabulary, which name each member's declaration by module and import none (those
    # live in the members' folders, above).
    (
        "agent.protocols",
        "agent.workloads",
        "agent.workloads.bodies",
        "agent.workloads.params",
        "agent.workloads.spec",
    ),
    # The protocols' own parts, sans-IO but for HTTP/3's socket; a protocol's declaration too.
    ("agent.h2", "agent.h3"),
    # The endpoints: the asyncio client and server that run exchanges over a protocol.
    # The event traces' writer, beside them (both write theirs through it).
    ("agent.client", "agent.event_trace", "agent.exchange_queues", "agent.server"),
    # Each workload's server and client sides (agent/workloads/<kind>/), and their loader.
    ("agent.workloads.*",),
    # The engines, registry and folders whole (an engine's spec names its entry points' types,
    # its entry points run the endpoints and the workloads), and the trial request that names
    # an engine.
    ("agent.engines", "agent.engines.*", "agent.trial_request"),
    # The command line: the CLI lists the commands, and `warm` runs its trials through the CLI.
    ("agent.cli", "agent.commands", "agent.warm"),
)


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


def modules_under(root: Path) -> list[str]:
    return [_module_name(root, path) for path in _python_files(root)]


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


def forbidden_imports(imports: Sequence[Import]) -> list[Import]:
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


def _cycle(imports: Sequence[Import], part: Callable[[str], str | None]) -> list[Import] | None:
    """One cycle between the parts `part` puts modules in (None: a module of no part), as the
    imports that close it, or None."""
    edges: dict[str, dict[str, Import]] = {}
    for found in imports:
        source, target = part(found.source), part(found.target)
        if source is not None and target is not None and source != target:
            edges.setdefault(source, {}).setdefault(target, found)
    finished: set[str] = set()
    path: list[str] = []  # the parts being visited, each importing the next

    def visit(here: str) -> list[Import] | None:
        if here in path:
            loop = [*path[path.index(here) :], here]
            return [edges[a][b] for a, b in pairwise(loop)]
        if here in finished:
            return None
        path.append(here)
        for target in sorted(edges.get(here, {})):
            cycle = visit(target)
            if cycle is not None:
                return cycle
        path.pop()
        finished.add(here)
        return None

    for start in sorted(edges):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def controller_cycle(imports: Sequence[Import]) -> list[Import] | None:
    """One cycle between the controller's parts, as the imports that close it, or None."""
    return _cycle(imports, _part)


def module_cycle(
    imports: Sequence[Import], packages: tuple[str, ...] = ("agent", "analysis")
) -> list[Import] | None:
    """One circle between the modules of `packages`, as the imports that close it, or None."""
    return _cycle(imports, lambda module: module if module.split(".")[0] in packages else None)


def _describe(cycle: Sequence[Import], part: Callable[[str], str | None] = _part) -> str:
    parts = " -> ".join(
        [*(part(found.source) or "" for found in cycle), part(cycle[0].source) or ""]
    )
    return f"import cycle {parts}:\n" + "\n".join(f"  {found}" for found in cycle)


def agent_part(module: str, layers: Layers) -> str | None:
    """The agent part `module` belongs to (module doc), None outside the agent."""
    names = module.split(".")
    if names[0] != "agent":
        return None
    folders = [entry[:-2] for layer in layers for entry in layer if entry.endswith(".*")]
    depth = next((f.count(".") + 2 for f in folders if module.startswith(f + ".")), 2)
    return ".".join(names[:depth])


def _holds(entry: str, part: str) -> bool:
    """Whether a layer's entry is `part` or, written `folder.*`, holds that folder's members."""
    return part.startswith(entry[:-1]) if entry.endswith(".*") else part == entry


def layer_of(part: str, layers: Layers) -> int | None:
    """The index of the layer holding `part`, None if none does."""
    # A part named outright (agent.workloads.spec) wins over its folder's `.*`.
    held = [
        (entry.endswith(".*"), index)
        for index, layer in enumerate(layers)
        for entry in layer
        if _holds(entry, part)
    ]
    return min(held)[1] if held else None


def misplaced_parts(modules: Iterable[str], layers: Layers) -> list[str]:
    """The agent's parts (of `modules`) no layer holds, and the layers' entries holding none."""
    parts = {part for module in modules if (part := agent_part(module, layers)) is not None}
    unplaced = [
        f"{part} is in no layer" for part in sorted(parts) if layer_of(part, layers) is None
    ]
    stale = [
        f"{entry} holds no part of the agent"
        for layer in layers
        for entry in layer
        if not any(_holds(entry, part) for part in parts)
    ]
    return unplaced + stale


def back_up_arrows(imports: Sequence[Import], layers: Layers) -> list[Import]:
    """The agent's imports from a part to one in a higher layer."""

    def layer(module: str) -> int:
        part = agent_part(module, layers)
        index = None if part is None else layer_of(part, layers)
        return -1 if index is None else index  # outside the agent or unplaced: told elsewhere

    return [found for found in imports if 0 <= layer(found.source) < layer(found.target)]


@cache
def _project_imports() -> tuple[Import, ...]:
    return tuple(read_imports(REPO))


def test_the_project_keeps_the_dependency_rule() -> None:
    imports = _project_imports()
    # A walk that found nothing would pass vacuously.
    assert {found.source.split(".")[0] for found in imports} >= {"agent", "controller", "analysis"}
    broken = forbidden_imports(imports)
    if broken:
        pytest.fail("imports across the dependency rule:\n" + "\n".join(map(str, broken)))
    cycle = controller_cycle(imports)
    if cycle is not None:
        pytest.fail(_describe(cycle))


def test_the_agent_and_the_analysis_have_no_circle_and_no_arrow_runs_back_up() -> None:
    imports = _project_imports()
    cycle = module_cycle(imports)
    if cycle is not None:
        pytest.fail(_describe(cycle, str))
    misplaced = misplaced_parts(modules_under(REPO), AGENT_LAYERS)
    assert not misplaced, "AGENT_LAYERS does not fit the agent:\n" + "\n".join(misplaced)
    arrows = back_up_arrows(imports, AGENT_LAYERS)
    assert not arrows, "imports to a higher layer (AGENT_LAYERS):\n" + "\n".join(map(str, arrows))


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


def test_a_circle_between_modules_is_found_though_a_deferred_import_closes_it(
    tmp_path: Path,
) -> None:
    # analysis' as it was: the registry's deferred import of base, which imports load.
    root = _tree(
        tmp_path,
        {
            "analysis/__init__.py": "",
            "analysis/load.py": "from analysis.workloads import DEFAULT_KIND\n",
            "analysis/workloads/__init__.py": (
                "DEFAULT_KIND = 'x'\ndef report_of():\n    from .base import DEFAULT_REPORT\n"
            ),
            "analysis/workloads/base.py": "from analysis.load import Run\n",
            "analysis/workloads/x.py": "from analysis.workloads.base import Report\n",
        },
    )
    cycle = module_cycle(read_imports(root))
    assert cycle is not None
    assert [found.where for found in cycle] == [
        "analysis/load.py:1",
        "analysis/workloads/__init__.py:3",
        "analysis/workloads/base.py:1",
    ]
    assert _describe(cycle, str).splitlines()[0] == (
        "import cycle analysis.load -> analysis.workloads -> analysis.workloads.base"
        " -> analysis.load:"
    )


def test_an_arrow_back_up_is_named_and_a_registry_sits_below_its_members(tmp_path: Path) -> None:
    layers = (
        ("agent", "agent.errors"),
        ("agent.workloads", "agent.workloads.spec"),
        ("agent.client",),
        ("agent.workloads.*",),
        ("agent.cli", "agent.commands"),
    )
    root = _tree(
        tmp_path,
        {
            "agent/__init__.py": "",
            "agent/errors.py": "def main():\n    from agent.cli import run\n",
            "agent/cli.py": "from agent.commands import COMMANDS\n",
            "agent/commands/__init__.py": "",
            "agent/commands/warm.py": "from agent.cli import main\n",
            "agent/client/__init__.py": "",
            "agent/client/run.py": (
                "from agent.workloads import DEFAULT_KIND\n"
                "from agent.workloads.spec import Spec\n"
                "from agent.workloads.toy.client import prepare\n"
            ),
            "agent/workloads/__init__.py": "from agent.workloads.spec import Spec\n",
            "agent/workloads/spec.py": "from agent.errors import UsageError\n",
            "agent/workloads/toy/__init__.py": "",
            "agent/workloads/toy/client.py": "from agent.client.connect import Target\n",
            "agent/stray.py": "",
        },
    )
    imports = read_imports(root)
    assert agent_part("agent.workloads.toy.client", layers) == "agent.workloads.toy"
    assert agent_part("agent.workloads.spec", layers) == "agent.workloads.spec"
    assert agent_part("agent.client.run", layers) == "agent.client"
    assert [str(found) for found in back_up_arrows(imports, layers)] == [
        "agent/errors.py:2: agent.errors imports agent.cli",
        "agent/client/run.py:3: agent.client.run imports agent.workloads.toy.client",
    ]
    # agent.cli and agent.commands import each other, as parts of one layer may; no module
    # imports itself back (cli -> commands, commands.warm -> cli), so there is no circle.
    assert module_cycle(imports, ("agent",)) is None
    assert misplaced_parts(modules_under(root), (*layers, ("agent.engines",))) == [
        "agent.stray is in no layer",
        "agent.engines holds no part of the agent",
    ]
    # A module importing itself back through others is a circle, whatever the layers.
    (root / "agent/client/connect.py").write_text("import os\nfrom agent.client.run import Plan\n")
    cycle = module_cycle(read_imports(root), ("agent",))
    assert cycle is not None
    assert [found.where for found in cycle] == [
        "agent/client/connect.py:2",
        "agent/client/run.py:3",
        "agent/workloads/toy/client.py:1",
    ]


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
