"""Build a kio response entity of any version from plain values.

kio has one frozen dataclass per API version, each with its own nested classes, and
fields come and go between versions. Handlers describe a response once, as mappings
and sequences holding plain ``int``/``str`` values, and ``build_entity`` turns it into
the class of the version the client asked for: keys the version does not have are
dropped, missing keys take the schema's default, nested mappings become the
version's nested classes, and Kafka's typed fields are coerced (``int`` error codes
to ``ErrorCode``, millisecond counts to ``timedelta``, millisecond timestamps to
aware ``datetime``).

The field plan of each class is computed once and cached; building is pure, so it is
safe from any thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

E = TypeVar("E", bound=Entity)
_Coerce = Callable[[Any], Any]


def _error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(value)


def _millis(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


def _timestamp(value: Any) -> Any:
    if isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    return value


_PRIMITIVE_COERCIONS: dict[str, _Coerce] = {
    "error_code": _error_code,
    "timedelta_i32": _millis,
    "timedelta_i64": _millis,
    "datetime_i64": _timestamp,
}


def _identity(value: Any) -> Any:
    return value


def _unwrap_optional(tp: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0]
    return tp


def _coercion(field: dataclasses.Field[Any]) -> _Coerce:
    tp = _unwrap_optional(field.type)
    if typing.get_origin(tp) is tuple:
        item = typing.get_args(tp)[0]
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            return functools.partial(_build_tuple, item)
        return _tuple_of_values
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return functools.partial(_build_nested, tp)
    return _PRIMITIVE_COERCIONS.get(field.metadata.get("kafka_type", ""), _identity)


def _tuple_of_values(values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


def _build_tuple(cls: type[Any], values: Sequence[Any] | None) -> tuple[Any, ...] | None:
    if values is None:
        return None
    return tuple(_build_nested(cls, value) for value in values)


def _build_nested(cls: type[Any], value: Any) -> Any:
    if value is None or isinstance(value, cls):
        return value
    return build_entity(cls, value)


@functools.cache
def _plan(cls: type[Entity]) -> tuple[tuple[str, _Coerce], ...]:
    return tuple((f.name, _coercion(f)) for f in dataclasses.fields(cls))


def build_entity(cls: type[E], values: Mapping[str, Any]) -> E:
    """An instance of ``cls`` from ``values``; keys that ``cls`` lacks are ignored."""
    kwargs = {name: coerce(values[name]) for name, coerce in _plan(cls) if name in values}
    return cls(**kwargs)
