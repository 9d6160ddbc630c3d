"""Map a request's `:path` to a file under the served root, or to nothing.

Pure apart from the final filesystem check (`resolve_under_root`). Anything that could leave the
root — `..` segments, percent-encoded traversal, absolute or drive-like paths, NUL bytes,
backslashes, symlinks pointing outside — resolves to None, which the server answers with 404.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

INDEX_NAME = "index.html"


def request_segments(raw_path: str) -> tuple[str, ...] | None:
    """Split a `:path` into safe relative segments, or None when it must not be served.

    The query and fragment are ignored. The path is percent-decoded exactly once; segments are
    checked both before and after decoding, so `%2e%2e` and `..%2f` are refused like `..`.
    """
    path = raw_path.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        return None
    decoded = unquote(path, errors="strict") if "%" in path else path
    if "\x00" in decoded or "\\" in decoded:
        return None
    # `//etc/passwd` decodes to an absolute-looking path once the leading slash is dropped.
    if decoded.startswith("//"):
        return None
    segments: list[str] = []
    for segment in decoded[1:].split("/"):
        if segment in ("..", "."):
            return None
        if segment == "":
            continue
        if ":" in segment and segment[0].isalpha() and segment[1:2] == ":":
            return None
        segments.append(segment)
    if not segments or decoded.endswith("/"):
        segments.append(INDEX_NAME)
    return tuple(segments)


def resolve_under_root(root: Path, raw_path: str) -> Path | None:
    """The regular file `raw_path` names under `root` (symlinks resolved), or None."""
    try:
        segments = request_segments(raw_path)
    except UnicodeDecodeError:
        return None
    if segments is None:
        return None
    real_root = root.resolve()
    candidate = real_root.joinpath(*segments)
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not real.is_relative_to(real_root) or not real.is_file():
        return None
    return real
