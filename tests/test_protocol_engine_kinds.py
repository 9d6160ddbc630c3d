"""Protocols and engines are declared once, as workloads and meter sources are
(tests/_kinds.py): a protocol's name appears as a string literal only in its own folder
(agent/h2/ for HTTP/2's two forms, agent/h3/ for HTTP/3) and the protocol registry; an
engine's only in its folder (agent/engines/<name>/) and the engine registry. Everything else
asks `protocol_spec(name)` / `engine_spec(name)` or uses the registries' constants."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from agent.engines import BUILT_IN_ENGINES
from agent.protocols import PROTOCOLS
from tests._kinds import REPO, kind_literals, stray_literals

PROTOCOL_FOLDERS = {"agent/h2/": ("h2c", "h2"), "agent/h3/": ("h3",)}
PROTOCOL_REGISTRY = "agent/protocols/__init__.py"
ENGINE_REGISTRY = "agent/engines/__init__.py"
# file: the names whose literals there only look like the kind, with the reason.
NOT_PROTOCOLS: Mapping[str, tuple[tuple[str, ...], str]] = {
    ENGINE_REGISTRY: (("h2",), "the builtin engine's former name, refused naming the new one"),
    "controller/cli/sweep.py": (("h2",), "the h2 library, whose version the manifest records"),
}


def _protocol_owner(path: str) -> tuple[str, ...]:
    folders = [names for folder, names in PROTOCOL_FOLDERS.items() if path.startswith(folder)]
    return (*(name for names in folders for name in names), *NOT_PROTOCOLS.get(path, ((),))[0])


def _engine_owner(path: str) -> str | None:
    parts = path.split("/")
    return parts[2] if parts[:2] == ["agent", "engines"] and len(parts) > 3 else None


def test_a_protocol_is_named_only_in_its_own_folder_and_the_registry() -> None:
    stray = stray_literals(PROTOCOLS, _protocol_owner, {PROTOCOL_REGISTRY})
    assert not stray, "protocols named outside their own places:\n" + "\n".join(stray)


def test_an_engine_is_named_only_in_its_own_folder_and_the_registry() -> None:
    stray = stray_literals(BUILT_IN_ENGINES, _engine_owner, {ENGINE_REGISTRY})
    assert not stray, "engines named outside their own places:\n" + "\n".join(stray)


def test_the_rules_see_a_kind_named_in_a_core_file(tmp_path: Path) -> None:
    core = tmp_path / "report.py"
    core.write_text('if node.engine == "nghttp2" or protocol == "h3":\n    pass\n')
    assert kind_literals(core, (*PROTOCOLS, *BUILT_IN_ENGINES)) == [(1, "nghttp2"), (1, "h3")]
    assert _engine_owner("agent/engines/nghttp2/server.py") == "nghttp2"
    assert _engine_owner("agent/engines/spec.py") is None
    assert _protocol_owner("agent/h3/protocol.py") == ("h3",)
    assert _protocol_owner("agent/h2/protocol.py") == ("h2c", "h2")
    assert _protocol_owner("agent/client/h3.py") == ()


@pytest.mark.parametrize("path", sorted(NOT_PROTOCOLS))
def test_every_exemption_is_still_needed(path: str) -> None:
    names, _reason = NOT_PROTOCOLS[path]
    assert kind_literals(REPO / path, names), f"{path} names none of {names} any more: drop it"
