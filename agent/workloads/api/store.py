"""The api workload's database: a SQLite file on the server node, built once per `records`
(outside any trial) and opened by the server at start; the data-layer interface both layers
(plain SQL, the ORM) implement; and what can go wrong with either, in the agent's tree.

SQLite runs in the server's process and its calls block the event loop for their duration, as
every handler does here: a list page takes well under a millisecond, and a thread hop per
query would cost more than it frees. A lock held by another process is waited for only
BUSY_TIMEOUT_S, so one stuck writer turns into 503s instead of stalling every stream.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Protocol

from agent.errors import AgentError, UsageError
from agent.workloads.api.schema import RESOURCES, Resource, Row, create_statements, seed_rows

DataLayerKind = Literal["sql", "orm"]
DATA_LAYERS: tuple[DataLayerKind, ...] = ("sql", "orm")
BUSY_TIMEOUT_S = 0.1
SCHEMA_VERSION = 1
_META = "h2iot_meta"


class StoreError(AgentError):
    """The database refused a request; the API answers it with `status`."""

    status = 500


class StoreBusy(StoreError):
    """Another connection holds the database locked (SQLITE_BUSY / LOCKED): 503."""

    status = 503


class StoreConflict(StoreError):
    """A reference to a row that does not exist, or a delete of a row still referenced: 409."""

    status = 409


class DatabaseFileError(UsageError):
    """The database file is missing, read-only or not an api database; names the file."""


def store_error(exc: sqlite3.Error) -> StoreError:
    """What the API makes of a driver error: busy or locked (503), a broken reference (409),
    anything else (500)."""
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreConflict(str(exc))
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreBusy(str(exc))
    return StoreError(str(exc))


def database_path(directory: Path, records: int) -> Path:
    """Where the database of `records` rows per resource lives in a node's state directory."""
    return directory / f"inventory-{records}.sqlite"


def _built_records(path: Path) -> int | None:
    """The records per resource of an existing database of ours, else None."""
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = dict(connection.execute(f"SELECT key, value FROM {_META}").fetchall())
    except sqlite3.Error:
        return None
    finally:
        connection.close()
    if rows.get("schema_version") != str(SCHEMA_VERSION):
        return None
    records = rows.get("records")
    return int(records) if isinstance(records, str) and records.isdigit() else None


def build_database(path: Path, records: int) -> bool:
    """Write the seeded database to `path` unless one of `records` rows is there already;
    True if it was written. Written to a temporary name and renamed, so a build that dies
    half-way never passes for a finished one."""
    if records < 1:
        raise UsageError(f"--records {records} must be at least 1")
    if path.exists() and _built_records(path) == records:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    connection = sqlite3.connect(partial)
    try:
        with connection:
            for statement in create_statements():
                connection.execute(statement)
            connection.execute(f"CREATE TABLE {_META} (key TEXT PRIMARY KEY, value TEXT)")
            connection.executemany(
                f"INSERT INTO {_META} VALUES (?, ?)",
                [("schema_version", str(SCHEMA_VERSION)), ("records", str(records))],
            )
            for resource in RESOURCES:
                marks = ", ".join("?" * len(resource.columns))
                connection.executemany(
                    f"INSERT INTO {resource.name} VALUES ({marks})", seed_rows(resource, records)
                )
    finally:
        connection.close()
    os.replace(partial, path)
    return True


def check_database(path: Path) -> int:
    """The server's check at start: the file exists, can be written, and is an api database.
    Its records per resource; DatabaseFileError naming the file otherwise."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise DatabaseFileError(
            f"api database {path}: no such file (build it with `h2iot-agent api-db {path}`)"
        ) from None
    except OSError as exc:
        raise DatabaseFileError(f"api database {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise DatabaseFileError(f"api database {path}: not a regular file")
    # Root passes os.access whatever the mode bits say: a file nobody may write counts as
    # read-only for everyone, as an operator who chmod'ed it meant.
    if not info.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise DatabaseFileError(f"api database {path}: read-only (the API writes to it)")
    if not os.access(path.parent, os.W_OK):
        raise DatabaseFileError(
            f"api database {path}: its directory is read-only (SQLite writes its journal there)"
        )
    records = _built_records(path)
    if records is None:
        raise DatabaseFileError(f"api database {path}: not an api database of this version")
    return records


def connect(path: Path) -> sqlite3.Connection:
    """A connection to an existing database, references enforced, busy waits bounded."""
    connection = sqlite3.connect(
        f"file:{path}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None
    )
    connection.execute("PRAGMA foreign_keys = ON")
    return connection


class DataLayer(Protocol):
    """The API's view of its database, one implementation per `data_layer`. Rows are dicts in
    `Resource.columns` order with JSON-ready values; StoreError subclasses on refusal."""

    kind: DataLayerKind

    def list(self, resource: Resource, limit: int, offset: int) -> list[Row]: ...

    def get(self, resource: Resource, item_id: int) -> Row | None: ...

    def create(self, resource: Resource, fields: Mapping[str, object]) -> Row: ...

    def update(self, resource: Resource, item_id: int, fields: Mapping[str, object]) -> Row | None:
        """The row after the change (version one higher), None if there is no such row."""
        ...

    def delete(self, resource: Resource, item_id: int) -> bool: ...

    def close(self) -> None: ...
