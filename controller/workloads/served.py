"""What a prepared server node serves a workload from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Served:
    root: str | None = None  # `serve --root`: the page workload's site
    manifest: str | None = None  # the client's `--manifest`, when it can read the server's file
