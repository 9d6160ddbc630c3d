"""What a node's interpreter runs on, and the wheel tags that fit it (pure, but for the probe).

The controller downloads the agent's dependencies for the node's platform and ships them, so a
node needs no package index (nodes on a testbed switch often have no Internet).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

PROBE = (
    "import json, platform, struct, sys\n"
    "print(json.dumps({'python': platform.python_version(),"
    " 'implementation': sys.implementation.name, 'machine': platform.machine(),"
    " 'libc': list(platform.libc_ver()), 'bits': struct.calcsize('P') * 8}))\n"
)
"""Run by the node's interpreter; prints the facts `PlatformFacts.parse` reads."""

# (glibc minor, tag) for the manylinux names of PEP 513, 571 and 599.
_LEGACY_MANYLINUX = ((17, "manylinux2014"), (12, "manylinux2010"), (5, "manylinux1"))
_IMPLEMENTATION_TAGS = {"cpython": "cp", "pypy": "pp"}
# A 32-bit userland on a 64-bit kernel (Raspberry Pi OS 32-bit on a Pi 4) reports the kernel's
# machine; wheels must match the interpreter's word size.
_USERLAND_32 = {"aarch64": "armv7l", "x86_64": "i686"}


@dataclass(frozen=True)
class PlatformFacts:
    python: str  # e.g. "3.11.2"
    implementation: str  # sys.implementation.name
    machine: str
    libc: tuple[str, str]  # ("glibc", "2.36"); empty strings when unknown (e.g. musl)
    bits: int

    @classmethod
    def parse(cls, text: str) -> PlatformFacts:
        facts = json.loads(text)
        libc_name, libc_version = facts["libc"]
        return cls(
            python=str(facts["python"]),
            implementation=str(facts["implementation"]),
            machine=str(facts["machine"]),
            libc=(str(libc_name), str(libc_version)),
            bits=int(facts["bits"]),
        )

    @property
    def python_major_minor(self) -> str:
        return ".".join(self.python.split(".")[:2])

    @property
    def arch(self) -> str:
        return _USERLAND_32.get(self.machine, self.machine) if self.bits == 32 else self.machine

    def pip_target_args(self) -> list[str]:
        """`pip download` options selecting wheels for this platform.

        pip matches platform tags exactly, so every manylinux tag the node's glibc accepts is
        listed (newest first), with the legacy aliases older wheels carry. Raises ValueError for
        platforms without glibc or with an unknown interpreter.
        """
        libc_name, libc_version = self.libc
        if libc_name != "glibc" or not libc_version:
            raise ValueError(f"no glibc found (libc {libc_name or 'unknown'}): no manylinux wheels")
        implementation = _IMPLEMENTATION_TAGS.get(self.implementation)
        if implementation is None:
            raise ValueError(f"interpreter {self.implementation} has no known wheel tag")
        major, minor = (int(part) for part in libc_version.split(".")[:2])
        if major != 2:
            raise ValueError(f"glibc {libc_version} has no manylinux tags")
        platforms = [f"manylinux_2_{glibc}_{self.arch}" for glibc in range(minor, 4, -1)]
        platforms += [
            f"{alias}_{self.arch}" for glibc, alias in _LEGACY_MANYLINUX if glibc <= minor
        ]
        platforms.append(f"linux_{self.arch}")
        target = [
            "--only-binary=:all:",
            "--implementation",
            implementation,
            "--python-version",
            self.python_major_minor,
        ]
        for platform in platforms:
            target += ["--platform", platform]
        return target

    @property
    def key(self) -> str:
        """A name for this platform's wheelhouse, e.g. `cpython3.11-glibc2.36-x86_64`."""
        return f"{self.implementation}{self.python_major_minor}-{''.join(self.libc)}-{self.arch}"


def cpu_model(cpuinfo: str) -> str:
    """A one-line CPU description from /proc/cpuinfo: the board (Raspberry Pi `Model`) if
    named, the core model and the core count."""
    fields: dict[str, str] = {}
    cores = 0
    for line in cpuinfo.splitlines():
        name, colon, value = line.partition(":")
        if not colon:
            continue
        name = name.strip()
        if name == "processor":
            cores += 1
        fields.setdefault(name, value.strip())
    core = fields.get("model name") or fields.get("Processor") or fields.get("cpu model") or "?"
    described = f"{core} x{cores}" if cores else core
    board = fields.get("Model")
    return f"{board}: {described}" if board else described
