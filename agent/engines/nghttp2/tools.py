"""The nghttp2 binaries the engine drives, and the Debian packages that install them.

Debian and Raspberry Pi OS install nghttpd in /usr/sbin, which is not on an ordinary user's
PATH (the agent on a Pi runs as one): the lookup tries PATH first, then the system's sbin
directories. A directory the user may not read is passed over, as a shell does.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from agent.engines.nghttp2.errors import ToolMissingError
from agent.engines.nghttp2.spec import NGHTTP2
from agent.engines.spec import SYSTEM_DIRS

PACKAGES: dict[str, str] = dict(NGHTTP2.debian_packages)


def missing_message(tool: str) -> str:
    return NGHTTP2.missing_message(tool)


def search_dirs(path_variable: str | None, system_dirs: Sequence[str] = SYSTEM_DIRS) -> list[str]:
    """PATH's directories (empty entries dropped), then system_dirs, each once."""
    entries = [entry for entry in (path_variable or "").split(os.pathsep) if entry]
    return list(dict.fromkeys([*entries, *system_dirs]))


def _executable(candidate: Path) -> bool:
    try:
        mode = candidate.stat().st_mode
    except OSError:  # absent, or in a directory this user may not search
        return False
    return stat.S_ISREG(mode) and os.access(candidate, os.X_OK)


def find_tool(
    tool: str, path_variable: str | None = None, system_dirs: Sequence[str] = SYSTEM_DIRS
) -> str:
    """The absolute path of `nghttp` or `nghttpd` (searching `path_variable`, default $PATH, then
    system_dirs); ToolMissingError naming the package if absent."""
    variable = os.environ.get("PATH") if path_variable is None else path_variable
    for directory in search_dirs(variable, system_dirs):
        candidate = Path(directory) / tool
        if _executable(candidate):
            return str(candidate.absolute())
    raise ToolMissingError(missing_message(tool))
