"""The data layer a `data_layer` value names, over a checked database file. Apart from
agent.workloads.api.store (which both layers build on) so the store never imports a layer, and
the ORM's SQLAlchemy (the api extra) is imported only when the ORM is chosen."""

from __future__ import annotations

from pathlib import Path

from agent.workloads.api.sql import SqlLayer
from agent.workloads.api.store import DataLayer, DataLayerKind, check_database


def open_layer(kind: DataLayerKind, path: Path) -> DataLayer:
    """The data layer `kind` over the database at `path` (checked first: check_database)."""
    check_database(path)
    if kind == "sql":
        return SqlLayer(path)
    from agent.workloads.api.orm import OrmLayer  # noqa: PLC0415

    return OrmLayer(path)
