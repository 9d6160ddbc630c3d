"""The `orm` data layer: SQLAlchemy's ORM over the same SQLite file, the counterpart of the
reference's Sequelize. Mapped classes are made from the schema (agent.workloads.api.schema), a
session per request as the ORM's documentation has it, rows loaded as objects and turned into
dicts, `version` kept by the mapper (its version counter, checked on every UPDATE as Sequelize's
`version: true` does). SQLAlchemy lives in the `api` extra: only a server that runs this layer
imports it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Integer, String, create_engine, select
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Session, mapped_column, sessionmaker
from sqlalchemy.orm.exc import StaleDataError

from agent.workloads.api.schema import (
    CREATED_AT,
    ID,
    RESOURCES,
    UPDATED_AT,
    VERSION,
    Column,
    Resource,
    Row,
    now_timestamp,
)
from agent.workloads.api.store import (
    DataLayerKind,
    StoreConflict,
    StoreError,
    connect,
    store_error,
)

_TYPES = {"int": Integer, "ref": Integer, "str": String, "bool": Boolean}


class _Base(DeclarativeBase):
    pass


def _mapped(column: Column) -> Any:
    if column.references is not None:
        return mapped_column(Integer, ForeignKey(f"{column.references}.{ID}"), nullable=False)
    return mapped_column(_TYPES[column.kind], nullable=False)


def _model(resource: Resource) -> type[Any]:
    version = mapped_column(Integer, nullable=False)
    attributes: dict[str, Any] = {
        "__tablename__": resource.name,
        ID: mapped_column(Integer, primary_key=True),
        **{column.name: _mapped(column) for column in resource.fields},
        VERSION: version,
        CREATED_AT: mapped_column(String, nullable=False),
        UPDATED_AT: mapped_column(String, nullable=False),
        "__mapper_args__": {"version_id_col": version},
    }
    class_name = "".join(part.title() for part in resource.name.split("_"))
    return type(class_name, (_Base,), attributes)


MODELS: Mapping[str, type[Any]] = {resource.name: _model(resource) for resource in RESOURCES}


@contextmanager
def _refusals() -> Iterator[None]:
    """SQLAlchemy's wrapping of the driver's errors, as the API's StoreErrors."""
    try:
        yield
    except DBAPIError as exc:
        if isinstance(exc.orig, sqlite3.Error):
            raise store_error(exc.orig) from None
        raise StoreError(str(exc.orig)) from None
    except StaleDataError as exc:
        raise StoreConflict(f"changed meanwhile: {exc}") from None
    except SQLAlchemyError as exc:
        raise StoreError(str(exc)) from None


class OrmLayer:
    kind: DataLayerKind = "orm"

    def __init__(self, path: Path) -> None:
        self.engine = create_engine("sqlite://", creator=lambda: connect(path))
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def _session(self) -> Session:
        return self._sessions()

    @staticmethod
    def _row(resource: Resource, item: Any) -> Row:
        return {name: getattr(item, name) for name in resource.columns}

    def list(self, resource: Resource, limit: int, offset: int) -> list[Row]:
        model = MODELS[resource.name]
        query = select(model).order_by(model.id).limit(limit).offset(offset)
        with _refusals(), self._session() as session:
            return [self._row(resource, item) for item in session.scalars(query)]

    def get(self, resource: Resource, item_id: int) -> Row | None:
        with _refusals(), self._session() as session:
            item = session.get(MODELS[resource.name], item_id)
            return None if item is None else self._row(resource, item)

    def create(self, resource: Resource, fields: Mapping[str, object]) -> Row:
        stamp = now_timestamp()
        item = MODELS[resource.name](**fields, created_at=stamp, updated_at=stamp)
        with _refusals(), self._session() as session:
            session.add(item)
            session.commit()
            return self._row(resource, item)

    def update(self, resource: Resource, item_id: int, fields: Mapping[str, object]) -> Row | None:
        with _refusals(), self._session() as session:
            item = session.get(MODELS[resource.name], item_id)
            if item is None:
                return None
            for name, value in fields.items():
                setattr(item, name, value)
            item.updated_at = now_timestamp()
            session.commit()
            return self._row(resource, item)

    def delete(self, resource: Resource, item_id: int) -> bool:
        with _refusals(), self._session() as session:
            item = session.get(MODELS[resource.name], item_id)
            if item is None:
                return False
            session.delete(item)
            session.commit()
            return True

    def close(self) -> None:
        self.engine.dispose()
