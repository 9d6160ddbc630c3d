"""A run's manifest.json: the one reader of it, and the config values it records.

Free of pandas, unlike `analysis.load`: the controller resumes a run through `read_manifest`
(`controller.run.recorder`), and the controller's install has no pandas. A manifest that does
not fit the documented format (data/README.md) raises `RunFormatError` naming the file and key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.protocols import DEFAULT_PROTOCOL
from analysis.columns import FORMAT_VERSION, MANIFEST
from analysis.errors import RunFormatError
from analysis.stats import DEFAULT_CONFIDENCE


def config_value(manifest: Mapping[str, Any], dotted: str) -> Any:
    """The manifest's `config.<dotted>` value, or None when any part is absent."""
    node: Any = manifest.get("config")
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def protocols_of(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The protocols the run's trials used, as the controller decides them: the swept
    `sweep.protocol`, else `workload.protocol`, else h2c (runs from before TLS and HTTP/3)."""
    swept = config_value(manifest, "sweep.protocol")
    if isinstance(swept, list) and swept:
        return tuple(str(p) for p in swept)
    single = config_value(manifest, "workload.protocol")
    return (single,) if isinstance(single, str) else (DEFAULT_PROTOCOL,)


def confidence_of(manifest: Mapping[str, Any], path: Path) -> float:
    value = config_value(manifest, "run.confidence")
    if value is None:
        return DEFAULT_CONFIDENCE
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise RunFormatError(f"{path}: config.run.confidence: {value!r} is not in (0, 1)")
    return float(value)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / MANIFEST
    if not run_dir.is_dir():
        raise RunFormatError(f"{run_dir}: not a directory (expected a run folder)")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFormatError(f"{path}: no such file (not a run folder)") from None
    except UnicodeDecodeError:
        raise RunFormatError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RunFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict):
        raise RunFormatError(f"{path}: expected a JSON object, got {type(document).__name__}")
    version = document.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise RunFormatError(f"{path}: format_version: missing or not an integer ({version!r})")
    if not 1 <= version <= FORMAT_VERSION:
        raise RunFormatError(
            f"{path}: format_version: {version} is not supported "
            f"(this reader knows 1..{FORMAT_VERSION})"
        )
    confidence_of(document, path)
    return document
