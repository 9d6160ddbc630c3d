"""The api workload's database and data layers over real SQLite files: the seed is
deterministic, both layers answer the same rows, values never become SQL, a locked database
is StoreBusy, a bad file is refused at start naming it."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from agent.workloads.api.layers import open_layer
from agent.workloads.api.parse import RequestError, parse_body
from agent.workloads.api.schema import BY_NAME, RESOURCES, seed_rows
from agent.workloads.api.store import (
    DATA_LAYERS,
    DatabaseFileError,
    StoreBusy,
    StoreConflict,
    build_database,
    check_database,
)

pytest.importorskip("sqlalchemy", reason="the api extra (sqlalchemy) is not installed")

RECORDS = 40
ORDERS = BY_NAME["orders"]
CUSTOMERS = BY_NAME["customers"]


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "api-inventory.sqlite"
    assert build_database(path, RECORDS)
    return path


@pytest.fixture(params=DATA_LAYERS)
def layer(request: pytest.FixtureRequest, database: Path):
    opened = open_layer(request.param, database)
    yield opened
    opened.close()


def _dump(path: Path) -> list[str]:
    connection = sqlite3.connect(path)
    try:
        return list(connection.iterdump())
    finally:
        connection.close()


def test_the_seed_is_deterministic_and_a_rebuild_is_skipped(tmp_path: Path, database: Path) -> None:
    other = tmp_path / "again.sqlite"
    build_database(other, RECORDS)
    assert _dump(other) == _dump(database)
    assert not build_database(database, RECORDS)  # already there: not written again
    assert build_database(database, RECORDS + 1)  # another size: rebuilt in place
    assert check_database(database) == RECORDS + 1


def test_every_resource_has_records_rows_whose_references_exist(database: Path) -> None:
    connection = sqlite3.connect(database)
    connection.execute("PRAGMA foreign_keys = ON")
    for resource in RESOURCES:
        (count,) = connection.execute(f"SELECT count(*) FROM {resource.name}").fetchone()
        assert count == RECORDS
    assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
    connection.close()


def test_both_layers_answer_the_same_rows(database: Path) -> None:
    answers = []
    for kind in DATA_LAYERS:
        layer = open_layer(kind, database)
        answers.append({r.name: (layer.list(r, 7, 3), layer.get(r, 5)) for r in RESOURCES})
        layer.close()
    assert answers[0] == answers[1]
    rows, one = answers[0]["orders"]
    assert [row["id"] for row in rows] == list(range(4, 11))
    assert isinstance(one["paid"], bool) and one["version"] == 1
    seed = list(seed_rows(ORDERS, RECORDS))
    assert tuple(rows[0].values()) == seed[3]  # as stored, field for field


def _order(**changes: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "tenant": "acme",
        "customer_id": 3,
        "status": "new",
        "total_cents": 1999,
        "paid": False,
        "note": "first",
    }
    return {**fields, **changes}


def test_create_update_delete(layer) -> None:
    created = layer.create(ORDERS, _order())
    assert created["id"] == RECORDS + 1 and created["version"] == 1
    assert created["created_at"] == created["updated_at"]
    updated = layer.update(ORDERS, created["id"], {"paid": True, "note": "second"})
    assert updated["paid"] is True and updated["note"] == "second"
    assert updated["version"] == 2 and updated["tenant"] == "acme"
    assert layer.get(ORDERS, created["id"]) == updated
    assert layer.delete(ORDERS, created["id"])
    assert layer.get(ORDERS, created["id"]) is None
    assert not layer.delete(ORDERS, created["id"])
    assert layer.update(ORDERS, created["id"], {"paid": True}) is None


HOSTILE = (
    "1 OR 1=1",
    "1; DROP TABLE orders; --",
    "0 UNION SELECT * FROM customers",
    "'); DELETE FROM orders; --",
)


@pytest.mark.parametrize("text", HOSTILE)
def test_sql_in_an_id_or_a_value_has_no_effect(layer, database: Path, text: str) -> None:
    before = _dump(database)
    assert layer.get(ORDERS, text) is None  # bound as a value, matched against integer ids
    assert not layer.delete(ORDERS, text)
    assert layer.update(ORDERS, text, {"note": "x"}) is None
    assert _dump(database) == before
    created = layer.create(ORDERS, _order(note=text, status=text))
    assert layer.get(ORDERS, created["id"])["note"] == text  # stored verbatim
    assert len(layer.list(ORDERS, 1000, 0)) == RECORDS + 1


def test_a_missing_reference_and_a_referenced_delete_are_conflicts(layer) -> None:
    with pytest.raises(StoreConflict):
        layer.create(ORDERS, _order(customer_id=RECORDS + 100))
    with pytest.raises(StoreConflict):
        # the customer of the first seed order is referenced
        layer.delete(CUSTOMERS, next(seed_rows(ORDERS, RECORDS))[2])


def test_a_locked_database_is_busy_not_a_stall(layer, database: Path) -> None:
    locker = sqlite3.connect(database, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreBusy):
            layer.list(ORDERS, 10, 0)
        with pytest.raises(StoreBusy):
            layer.create(ORDERS, _order())
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert len(layer.list(ORDERS, 10, 0)) == 10  # and it serves again once the lock is gone


def test_a_missing_file_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "absent.sqlite"
    with pytest.raises(DatabaseFileError, match=f"api database {path}: no such file"):
        check_database(path)


def test_a_read_only_file_is_refused_naming_it(database: Path) -> None:
    os.chmod(database, 0o444)
    with pytest.raises(DatabaseFileError, match=f"api database {database}: read-only"):
        open_layer("sql", database)


def test_a_file_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(DatabaseFileError, match="not an api database"):
        check_database(path)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "malformed JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "expected a JSON object"),
        (json.dumps(_order(paid="yes")).encode(), "paid: expected true or false"),
        (json.dumps(_order(total_cents=True)).encode(), "total_cents: expected an integer"),
        (json.dumps(_order(customer_id=0)).encode(), "customer_id: 0 is outside 1.."),
        (json.dumps(_order(note="x" * 201)).encode(), "note: longer than 200"),
        (json.dumps(_order(id=5)).encode(), '"id" is set by the server'),
        (json.dumps(_order(colour="red")).encode(), '"colour" is not a field of orders'),
        (json.dumps({"paid": True}).encode(), "missing field"),
    ],
)
def test_a_bad_create_body_is_refused_saying_why(body: bytes, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        parse_body(ORDERS, body, partial=False)


def test_an_update_needs_one_field_and_takes_any() -> None:
    with pytest.raises(RequestError, match="no field to update"):
        parse_body(ORDERS, b"{}", partial=True)
    assert parse_body(ORDERS, b'{"paid": true}', partial=True) == {"paid": True}
