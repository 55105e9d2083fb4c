"""One API's kio entity at another version: how typed handlers meet every version.

kio has one frozen dataclass per API version, each with its own nested classes, and no
common base for a request's fields. A handler is written against one version's classes,
the newest it handles, so ``mypy --strict`` checks every field it reads and writes.
``convert`` carries an entity to that version and back, as Kafka's generated messages
do when they read an old version or write one:

- a field both versions have is copied (nested entities and arrays of them converted
  in turn; other values are shared, never copied);
- a field the target has and the source lacks takes Kafka's default for it: the
  schema's default where it gives one, else null for a nullable field, an empty array,
  an all-default struct, or the type's zero (0, "", b"", false, ``none`` for an error
  code, a zero duration, the epoch; kio makes every UUID nullable, so null);
- a field the source has and the target lacks is dropped.

An entity already of the target class is returned as it is, so the common case (a
client speaking the newest version a handler knows) costs one type check.

The field plan of each class is computed once and cached; converting is pure, so it is
safe from any thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

from tickwheel.protocol._validate import without_none

E = TypeVar("E", bound=Entity)
_Convert = Callable[[Any], Any]
_Default = Callable[[], Any]
_ABSENT = object()
_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
_ZERO_BY_KAFKA_TYPE: dict[str, object] = {
    "string": "",
    "bytes": b"",
    "bool": False,
    "float64": 0.0,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": _EPOCH,
}


def convert(cls: type[E], entity: Entity) -> E:
    """``entity`` (a kio entity of ``cls``'s API, any version) as an instance of ``cls``."""
    if type(entity) is cls:
        return entity
    kwargs = {}
    for name, convert_value, default in _plan(cls):
        value = getattr(entity, name, _ABSENT)
        kwargs[name] = default() if value is _ABSENT else convert_value(value)
    return cls(**kwargs)


def default_entity(cls: type[E]) -> E:
    """An instance of ``cls`` with every field at Kafka's default for it."""
    return cls(**{name: default() for name, _, default in _plan(cls)})


def _identity(value: Any) -> Any:
    return value


def _is_entity(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _nested(cls: type[Entity], value: Any) -> Any:
    return None if value is None else convert(cls, value)


def _nested_tuple(cls: type[Entity], values: Any) -> Any:
    return None if values is None else tuple(convert(cls, value) for value in values)


def _converter(tp: Any) -> _Convert:
    if typing.get_origin(tp) is tuple:
        item = typing.get_args(tp)[0]
        return functools.partial(_nested_tuple, item) if _is_entity(item) else _identity
    if _is_entity(tp):
        return functools.partial(_nested, tp)
    return _identity


def _constant(value: object) -> _Default:
    return lambda: value


def _default(field: dataclasses.Field[Any]) -> _Default:
    if field.default is not dataclasses.MISSING:
        return _constant(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory
    tp, nullable = without_none(field.type)
    if nullable:
        return _constant(None)
    if typing.get_origin(tp) is tuple:
        return _constant(())
    if _is_entity(tp):
        return functools.partial(default_entity, tp)
    return _constant(_ZERO_BY_KAFKA_TYPE.get(field.metadata.get("kafka_type", ""), 0))


@functools.cache
def _plan(cls: type[Entity]) -> tuple[tuple[str, _Convert, _Default], ...]:
    return tuple(
        (field.name, _converter(without_none(field.type)[0]), _default(field))
        for field in dataclasses.fields(cls)
    )
