"""The node side of a deploy: a venv in the node's deploy directory with the agent installed
from shipped wheels, no package index needed on the node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from controller.config.model import NodeConfig
from controller.nodes.agent import agent_version, python_version
from controller.nodes.errors import NodeError
from controller.nodes.node import Node
from controller.nodes.platform import PROBE, PlatformFacts
from controller.nodes.wheel import Wheel

INSTALL_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class DeployReport:
    """What a deploy left on a node."""

    label: str
    python_version: str
    agent_version: str
    venv: str
    venv_reused: bool
    config_uses_venv: bool  # False: the node's configured python is another interpreter


def probe_platform(node: Node, base_python: str) -> PlatformFacts:
    """The platform of the interpreter that will create the node's venv."""
    probed = node.run([node.path(base_python), "-c", PROBE], check=False)
    if probed.exit_status == 127:  # the shell found no such command
        raise NodeError(
            f"{node.label}: {base_python} not found: install the Debian package python3 "
            "(apt install python3), or pass --base-python"
        )
    stdout = probed.stdout
    try:
        return PlatformFacts.parse(stdout)
    except (ValueError, KeyError, TypeError):
        raise NodeError(f"{node.label}: {base_python} printed no platform facts") from None


def _create_venv(node: Node, base_python: str, venv: str) -> None:
    created = node.run([base_python, "-m", "venv", "--clear", venv], timeout_s=300, check=False)
    if created.ok:
        return
    said = f"{created.stdout}\n{created.stderr}"
    # Debian splits venv's pip bootstrap (ensurepip) into a package of its own.
    if "ensurepip" in said:
        raise NodeError(
            f"{node.label}: {base_python} cannot create a venv without ensurepip: install the "
            "Debian package python3-venv (apt install python3-venv)"
        )
    lines = [line.strip() for line in said.splitlines() if line.strip()] or ["no output"]
    raise NodeError(
        f"{node.label}: `{base_python} -m venv` exited {created.exit_status}: {lines[-1]}"
    )


def install(
    node: Node,
    config: NodeConfig,
    *,
    wheel: Wheel,
    requirements: Sequence[str],
    dependencies: Sequence[Path],
    base_python: str,
    platform: PlatformFacts,
    expected_version: str,
) -> DeployReport:
    """Copy the wheels, create (or reuse) `<deploy_dir>/venv`, install requirements (the agent's
    own and its workload extra's) and the agent from the copied wheels only, and check
    `h2iot-agent --version` against expected_version."""
    deploy_dir = node.path(config.deploy_dir)
    venv = f"{deploy_dir}/venv"
    wheels = f"{deploy_dir}/wheels"
    for path in (wheel.path, *dependencies):
        node.put_file(path, f"{wheels}/{path.name}")
    venv_python = f"{venv}/bin/python"
    reused = python_version(node, venv_python, check=False) == platform.python
    if not reused:
        _create_venv(node, node.path(base_python), venv)
    pip = [venv_python, "-m", "pip", "--isolated", "--disable-pip-version-check", "-q"]
    offline = ["install", "--no-index", "--find-links", wheels]
    if requirements:
        node.run([*pip, *offline, *requirements], timeout_s=INSTALL_TIMEOUT_S)
    # Same version number, new code during development: always replace the project itself.
    node.run(
        [*pip, *offline, "--no-deps", "--force-reinstall", f"{wheels}/{wheel.path.name}"],
        timeout_s=INSTALL_TIMEOUT_S,
    )
    version = agent_version(node, [f"{venv}/bin/h2iot-agent"])
    if version != expected_version:
        raise NodeError(
            f"{node.label}: h2iot-agent --version is {version} after deploy, "
            f"the controller is {expected_version}"
        )
    uses_venv = node.path(config.python) == venv_python
    return DeployReport(node.label, platform.python, version, venv, reused, uses_venv)
