"""Protocols and engines are declared once, as workloads are (tests/test_workload_kinds.py): a
protocol's name appears as a string literal only in its own folder (agent/h2/ for HTTP/2's two
forms, agent/h3/ for HTTP/3) and the protocol registry; an engine's only in its folder
(agent/engines/<name>/) and the engine registry. Everything else asks `protocol_spec(name)` /
`engine_spec(name)` or uses the registries' constants. Read from the code with `ast`."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from agent.engines import BUILT_IN_ENGINES
from agent.protocols import PROTOCOLS
from tests.test_workload_kinds import PACKAGES, REPO

PROTOCOL_FOLDERS = {"h2c": "agent/h2/", "h2": "agent/h2/", "h3": "agent/h3/"}
PROTOCOL_REGISTRY = "agent/protocols/__init__.py"
ENGINE_REGISTRY = "agent/engines/__init__.py"
# (file, name): why a literal there only looks like the kind.
NOT_PROTOCOLS = {
    (ENGINE_REGISTRY, "h2"): "the builtin engine's former name, refused naming the new one",
    ("controller/cli/sweep.py", "h2"): "the h2 library, whose version the manifest records",
}
NOT_ENGINES: Mapping[tuple[str, str], str] = {}


def _engine_owner(path: str) -> str | None:
    parts = path.split("/")
    return parts[2] if parts[:2] == ["agent", "engines"] and len(parts) > 3 else None


def _protocol_owner(path: str) -> tuple[str, ...]:
    return tuple(name for name, folder in PROTOCOL_FOLDERS.items() if path.startswith(folder))


def literals(path: Path, names: tuple[str, ...]) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]


def _strays(
    names: tuple[str, ...],
    registry: str,
    owns: Callable[[str, str], bool],
    exempt: Mapping[tuple[str, str], str],
) -> list[str]:
    stray = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name == registry:
                continue
            stray += [
                f"{name}:{line}: {kind!r}"
                for line, kind in literals(path, names)
                if not owns(name, kind) and (name, kind) not in exempt
            ]
    return stray


def test_a_protocol_is_named_only_in_its_own_folder_and_the_registry() -> None:
    stray = _strays(
        PROTOCOLS,
        PROTOCOL_REGISTRY,
        lambda path, kind: kind in _protocol_owner(path),
        NOT_PROTOCOLS,
    )
    assert not stray, "protocols named outside their own places:\n" + "\n".join(stray)


def test_an_engine_is_named_only_in_its_own_folder_and_the_registry() -> None:
    stray = _strays(
        BUILT_IN_ENGINES,
        ENGINE_REGISTRY,
        lambda path, kind: _engine_owner(path) == kind,
        NOT_ENGINES,
    )
    assert not stray, "engines named outside their own places:\n" + "\n".join(stray)


def test_the_rules_see_a_kind_named_in_a_core_file(tmp_path: Path) -> None:
    core = tmp_path / "report.py"
    core.write_text('if node.engine == "nghttp2" or protocol == "h3":\n    pass\n')
    assert literals(core, (*PROTOCOLS, *BUILT_IN_ENGINES)) == [(1, "nghttp2"), (1, "h3")]
    assert _engine_owner("agent/engines/nghttp2/server.py") == "nghttp2"
    assert _engine_owner("agent/engines/spec.py") is None
    assert _protocol_owner("agent/h3/protocol.py") == ("h3",)
    assert _protocol_owner("agent/client/h3.py") == ()


@pytest.mark.parametrize("exempt", [*NOT_PROTOCOLS, *NOT_ENGINES])
def test_every_exemption_is_still_needed(exempt: tuple[str, str]) -> None:
    path, name = exempt
    assert literals(REPO / path, (name,)), f"{path} names no {name!r} any more: drop it"
