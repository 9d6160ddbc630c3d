"""The nghttp2 binaries the engine drives, and the Debian packages that install them."""

from __future__ import annotations

import shutil

from agent.nghttp2.errors import ToolMissingError

PACKAGES: dict[str, str] = {"nghttp": "nghttp2-client", "nghttpd": "nghttp2-server"}


def missing_message(tool: str) -> str:
    package = PACKAGES[tool]
    return f"{tool} not found on PATH: install the Debian package {package} (apt install {package})"


def find_tool(tool: str) -> str:
    """The absolute path of `nghttp` or `nghttpd`; ToolMissingError naming the package if absent."""
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(missing_message(tool))
    return path
