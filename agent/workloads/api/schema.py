"""The api workload's inventory: seven resources (orders and six related ones) with the kinds of
fields the reference's service had (ids, tenant, version, timestamps, strings, booleans, and
references between resources) and their deterministic seed rows. Pure: the data layers
(agent.workloads.api.sql, .orm), the parsers of what clients send (agent.workloads.api.parse)
and both server stacks read this one declaration, so the two layers store and answer exactly
the same rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

ColumnKind = Literal["int", "str", "bool", "ref"]
JsonValue = int | str | bool
Row = dict[str, object]

# Columns every resource has, set by the server: the client never writes them.
ID, TENANT, VERSION, CREATED_AT, UPDATED_AT = "id", "tenant", "version", "created_at", "updated_at"
SERVER_COLUMNS = (ID, VERSION, CREATED_AT, UPDATED_AT)
MAX_STRING_CHARS = 200
MAX_INT = 2**53  # exact in every JSON parser (an IEEE double)
TENANTS = ("acme", "globex", "initech", "umbrella")
# Seed rows' timestamps: a fixed base plus the row number in seconds, so a rebuild is identical.
SEED_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Column:
    name: str
    kind: ColumnKind
    references: str | None = None  # a `ref` column's resource

    @property
    def sql_type(self) -> str:
        return "TEXT" if self.kind == "str" else "INTEGER"


@dataclass(frozen=True)
class Resource:
    """One table and its endpoints, `/api/<name>` and `/api/<name>/<id>`."""

    name: str
    fields: tuple[Column, ...]  # what a client writes (tenant among them), in order

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.fields)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column in the order rows are stored and answered."""
        return (ID, *self.field_names, VERSION, CREATED_AT, UPDATED_AT)

    @property
    def bool_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.fields if c.kind == "bool")

    def column(self, name: str) -> Column:
        for column in self.fields:
            if column.name == name:
                return column
        raise KeyError(name)


def _resource(name: str, *fields: Column) -> Resource:
    return Resource(name, (Column(TENANT, "str"), *fields))


RESOURCES: tuple[Resource, ...] = (
    _resource(
        "customers",
        Column("name", "str"),
        Column("email", "str"),
        Column("city", "str"),
        Column("active", "bool"),
    ),
    _resource(
        "suppliers",
        Column("name", "str"),
        Column("country", "str"),
        Column("phone", "str"),
        Column("preferred", "bool"),
    ),
    _resource(
        "warehouses",
        Column("code", "str"),
        Column("city", "str"),
        Column("capacity", "int"),
        Column("refrigerated", "bool"),
    ),
    _resource(
        "products",
        Column("sku", "str"),
        Column("name", "str"),
        Column("supplier_id", "ref", "suppliers"),
        Column("price_cents", "int"),
        Column("discontinued", "bool"),
    ),
    _resource(
        "stock_items",
        Column("product_id", "ref", "products"),
        Column("warehouse_id", "ref", "warehouses"),
        Column("quantity", "int"),
        Column("reserved", "bool"),
    ),
    _resource(
        "orders",
        Column("customer_id", "ref", "customers"),
        Column("status", "str"),
        Column("total_cents", "int"),
        Column("paid", "bool"),
        Column("note", "str"),
    ),
    _resource(
        "shipments",
        Column("order_id", "ref", "orders"),
        Column("warehouse_id", "ref", "warehouses"),
        Column("carrier", "str"),
        Column("tracking", "str"),
        Column("delivered", "bool"),
    ),
)
# (RESOURCES lists every resource after the ones it references: the order tables are filled.)
BY_NAME: Mapping[str, Resource] = {resource.name: resource for resource in RESOURCES}
ORDER_STATUSES = ("new", "picked", "packed", "shipped", "delivered", "returned")
CITIES = ("Lisbon", "Oslo", "Porto", "Tartu", "Turku", "Ghent", "Lyon", "Graz", "Brno")
CARRIERS = ("DHL", "UPS", "PostNord", "GLS", "DPD")


def create_statements() -> list[str]:
    """CREATE TABLE for every resource, references enforced (PRAGMA foreign_keys)."""
    statements = []
    for resource in RESOURCES:
        lines = [f"{ID} INTEGER PRIMARY KEY"]
        for column in resource.fields:
            line = f"{column.name} {column.sql_type} NOT NULL"
            if column.references is not None:
                line += f" REFERENCES {column.references}({ID})"
            lines.append(line)
        lines += [f"{VERSION} INTEGER NOT NULL", f"{CREATED_AT} TEXT NOT NULL"]
        lines.append(f"{UPDATED_AT} TEXT NOT NULL")
        statements.append(f"CREATE TABLE {resource.name} ({', '.join(lines)})")
    return statements


def timestamp(moment: datetime) -> str:
    """ISO 8601 in UTC to the millisecond, as the rows store and answer it."""
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def now_timestamp() -> str:
    return timestamp(datetime.now(UTC))


# String columns drawn from a short list (the rest are unique per row).
_CHOICES: Mapping[str, tuple[str, ...]] = {
    TENANT: TENANTS,
    "city": CITIES,
    "status": ORDER_STATUSES,
    "carrier": CARRIERS,
}


def _seed_value(resource: Resource, column: Column, row: int, records: int) -> JsonValue:
    """Column `column` of seed row `row` (1-based): a function of the two alone."""
    salt = sum(map(ord, resource.name + column.name))
    mixed = (row * 2654435761 + salt * 40503) % 2**32
    if column.kind == "ref":
        # Spread over the referenced table's rows, every one of which exists (1..records).
        return 1 + (row * 7919 + salt) % records
    if column.kind == "bool":
        return mixed % 3 == 0
    if column.kind == "int":
        return mixed % 100_000
    choices = _CHOICES.get(column.name)
    if choices is not None:
        return choices[mixed % len(choices)]
    return f"{resource.name[:-1]}-{column.name}-{row:07d}-{mixed:08x}"


def seed_rows(resource: Resource, records: int) -> Iterator[tuple[JsonValue, ...]]:
    """The `records` seed rows of `resource`, in `columns` order, deterministic."""
    for row in range(1, records + 1):
        stamp = timestamp(SEED_EPOCH + timedelta(seconds=row))
        values = tuple(_seed_value(resource, column, row, records) for column in resource.fields)
        yield (row, *values, 1, stamp, stamp)
