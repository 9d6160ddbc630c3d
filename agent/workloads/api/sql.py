"""The `sql` data layer: plain parameterised SQL through the standard library's sqlite3, the
counterpart of the reference's node-mysql. Every statement is built once per resource at start
from the schema's own names; values only ever travel as parameters, so nothing a client sends
becomes SQL text."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.workloads.api.schema import (
    CREATED_AT,
    ID,
    RESOURCES,
    UPDATED_AT,
    VERSION,
    Resource,
    Row,
    now_timestamp,
)
from agent.workloads.api.store import (
    DataLayerKind,
    connect,
    store_error,
)


class _Statements:
    def __init__(self, resource: Resource) -> None:
        columns = ", ".join(resource.columns)
        table = resource.name
        self.list = f"SELECT {columns} FROM {table} ORDER BY {ID} LIMIT ? OFFSET ?"
        self.get = f"SELECT {columns} FROM {table} WHERE {ID} = ?"
        inserted = (*resource.field_names, VERSION, CREATED_AT, UPDATED_AT)
        self.create = (
            f"INSERT INTO {table} ({', '.join(inserted)}) "
            f"VALUES ({', '.join('?' * len(inserted))}) RETURNING {columns}"
        )
        self.delete = f"DELETE FROM {table} WHERE {ID} = ?"
        self.returning = columns
        self.names = resource.columns
        self.bools = tuple(
            i for i, name in enumerate(resource.columns) if name in resource.bool_columns
        )


class SqlLayer:
    kind: DataLayerKind = "sql"

    def __init__(self, path: Path) -> None:
        self.connection = connect(path)
        self._statements = {resource.name: _Statements(resource) for resource in RESOURCES}

    def _row(self, statements: _Statements, values: Sequence[object]) -> Row:
        row = dict(zip(statements.names, values, strict=True))
        for index in statements.bools:
            name = statements.names[index]
            row[name] = bool(row[name])
        return row

    def _execute(self, sql: str, parameters: Sequence[object]) -> tuple[list[Any], int]:
        """The statement run to its end: its rows (SQLite may report busy while stepping
        through them) and how many rows it changed."""
        try:
            cursor = self.connection.execute(sql, parameters)
            return cursor.fetchall(), cursor.rowcount
        except sqlite3.Error as exc:
            raise store_error(exc) from None

    def list(self, resource: Resource, limit: int, offset: int) -> list[Row]:
        statements = self._statements[resource.name]
        return [
            self._row(statements, r) for r in self._execute(statements.list, (limit, offset))[0]
        ]

    def get(self, resource: Resource, item_id: int) -> Row | None:
        statements = self._statements[resource.name]
        rows, _ = self._execute(statements.get, (item_id,))
        return self._row(statements, rows[0]) if rows else None

    def create(self, resource: Resource, fields: Mapping[str, object]) -> Row:
        statements = self._statements[resource.name]
        stamp = now_timestamp()
        values = [fields[name] for name in resource.field_names]
        rows, _ = self._execute(statements.create, (*values, 1, stamp, stamp))
        return self._row(statements, rows[0])

    def update(self, resource: Resource, item_id: int, fields: Mapping[str, object]) -> Row | None:
        statements = self._statements[resource.name]
        # Column names come from the schema (parse_body refuses any other), values are bound.
        names = [name for name in resource.field_names if name in fields]
        assignments = ", ".join(f"{name} = ?" for name in names)
        sql = (
            f"UPDATE {resource.name} SET {assignments}, {VERSION} = {VERSION} + 1, "
            f"{UPDATED_AT} = ? WHERE {ID} = ? RETURNING {statements.returning}"
        )
        rows, _ = self._execute(sql, (*(fields[n] for n in names), now_timestamp(), item_id))
        return self._row(statements, rows[0]) if rows else None

    def delete(self, resource: Resource, item_id: int) -> bool:
        statements = self._statements[resource.name]
        _, changed = self._execute(statements.delete, (item_id,))
        return changed > 0

    def close(self) -> None:
        self.connection.close()
