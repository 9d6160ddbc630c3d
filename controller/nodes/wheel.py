"""The controller side of a deploy: the project's wheel and its runtime dependencies' wheels.

The wheel is built from a copy of the source tree (setuptools writes `build/` and
`*.egg-info` next to the sources it builds) with `pip wheel --no-deps`; the dependencies (the
agent's own, and those of the pip extra of the config's workload) are downloaded with
`pip download` for the node's platform into a wheelhouse that later deploys reuse. Both use
this interpreter's pip and its configuration (index, proxy, cache).
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

import controller
from controller.errors import ConfigError
from controller.nodes.errors import DeployError
from controller.nodes.platform import PlatformFacts

PIP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Wheel:
    """A built wheel and what its metadata says."""

    path: Path
    name: str
    version: str
    requires: tuple[str, ...]  # runtime requirements, no extras
    extras: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # extra -> requirements

    def requirements(self, extras: tuple[str, ...] = ()) -> tuple[str, ...]:
        """The agent's runtime requirements, with those of each of `extras`."""
        for extra in extras:
            if extra not in self.extras:
                raise DeployError(f"{self.path.name}: no pip extra {extra!r} in its metadata")
        return (*self.requires, *(r for extra in extras for r in self.extras[extra]))

    @classmethod
    def read(cls, path: Path) -> Wheel:
        try:
            with zipfile.ZipFile(path) as archive:
                (metadata_name,) = [
                    n for n in archive.namelist() if n.endswith(".dist-info/METADATA")
                ]
                text = archive.read(metadata_name).decode()
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise ConfigError(f"{path}: not a readable wheel: {exc}") from None
        metadata = HeaderParser().parsestr(text)
        requires_dist = metadata.get_all("Requires-Dist") or []
        return cls(
            path=path,
            name=str(metadata["Name"]),
            version=str(metadata["Version"]),
            requires=runtime_requirements(requires_dist),
            extras={
                str(extra): extra_requirements(requires_dist, str(extra))
                for extra in metadata.get_all("Provides-Extra") or []
            },
        )


_EXTRA_MARKER = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")


def runtime_requirements(requires_dist: Sequence[str]) -> tuple[str, ...]:
    """The Requires-Dist entries that apply without extras (the agent's own dependencies)."""
    return tuple(
        entry.strip()
        for entry in requires_dist
        if not re.search(r"\bextra\s*==", entry.partition(";")[2])
    )


def extra_requirements(requires_dist: Sequence[str], extra: str) -> tuple[str, ...]:
    """The Requires-Dist entries of one extra, its `extra == "..."` condition dropped (and any
    other condition kept, for pip to evaluate against the node's platform)."""
    found = []
    for entry in requires_dist:
        requirement, _, marker = entry.partition(";")
        named = _EXTRA_MARKER.search(marker)
        if named is None or named[1] != extra:
            continue
        rest = _EXTRA_MARKER.sub("", marker).strip()
        rest = re.sub(r"^(and\s+)|(\s+and)$", "", rest).strip()
        found.append(f"{requirement.strip()}; {rest}" if rest else requirement.strip())
    return tuple(found)


def project_root() -> Path | None:
    """The source tree this controller runs from, if it runs from one (an editable install)."""
    root = Path(controller.__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() else None


def _source_entries(root: Path) -> list[Path]:
    """pyproject.toml, the readme and the package directories the build includes."""
    project = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [
        path
        for path in sorted(root.iterdir())
        if (path / "__init__.py").is_file()
        and any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns)
    ]
    readme = project["project"].get("readme")
    extras = [root / readme] if isinstance(readme, str) else []
    return [root / "pyproject.toml", *extras, *packages]


def build_wheel(root: Path, out_dir: Path) -> Wheel:
    """Build the project's wheel from a copy of root into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="h2iot-build-") as scratch:
        source = Path(scratch) / "source"
        source.mkdir()
        try:
            for entry in _source_entries(root):
                if entry.is_dir():
                    shutil.copytree(
                        entry, source / entry.name, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy2(entry, source / entry.name)
        except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
            raise DeployError(f"{root}: cannot collect the project's sources: {exc}") from None
        before = set(out_dir.glob("*.whl"))
        _pip(
            ["wheel", "--no-deps", "-w", str(out_dir), str(source)], f"building the wheel of {root}"
        )
    built = sorted(set(out_dir.glob("*.whl")) - before) or sorted(out_dir.glob("h2iot-*.whl"))
    if not built:
        raise DeployError(f"building the wheel of {root}: pip wrote no wheel to {out_dir}")
    return Wheel.read(built[-1])


def download_dependencies(
    wheel: Wheel, platform: PlatformFacts, wheelhouse: Path, extras: tuple[str, ...] = ()
) -> list[Path]:
    """Wheels of wheel.requirements(extras) (and theirs) for platform, in
    wheelhouse/<platform key>/. A requirement without a wheel for the platform is a DeployError
    naming both, in one line."""
    directory = wheelhouse / platform.key
    directory.mkdir(parents=True, exist_ok=True)
    try:
        target = platform.pip_target_args()
    except ValueError as exc:
        raise DeployError(f"{platform.key}: {exc}") from None
    requirements = wheel.requirements(extras)
    if requirements:
        named = " or ".join(repr(extra) for extra in extras)
        needed_by = f" (the pip extra {named} the config needs)" if extras else ""
        _pip(
            ["download", *target, "-d", str(directory), *requirements],
            f"downloading {', '.join(requirements)} for {platform.key}",
            no_wheel=lambda name: (
                f"{name}{needed_by if name not in wheel.requires else ''} has no wheel for "
                f"the node's platform {platform.key} on the package index"
            ),
        )
    return sorted(directory.glob("*.whl"))


_NO_DISTRIBUTION = re.compile(r"No matching distribution found for (\S+)")


def _pip(args: list[str], doing: str, no_wheel: Callable[[str], str] | None = None) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise DeployError(f"{doing}: pip still running after {PIP_TIMEOUT_S:g} s") from None
    if result.returncode != 0:
        missing = _NO_DISTRIBUTION.search(result.stderr)
        if missing is not None and no_wheel is not None:
            raise DeployError(no_wheel(missing[1]))
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "ERROR" in line] or lines or ["no output"]
        raise DeployError(f"{doing}: pip exited {result.returncode}: {errors[-1].strip()}")
