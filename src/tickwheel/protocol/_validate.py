"""The schema rules kio's decoder leaves to its caller, checked around it.

1. **Lengths before kio reads.** kio's native reader reserves memory for an array's
   count before it reads the items: a compact array announcing 2^32 - 2 items, in a
   30-byte frame, asks for 32 GiB and aborts the process (legacy counts up to
   2^31 - 1 ask for 16 GiB, which only a machine with that much memory survives).
   Kafka's generated readers refuse such a count ("Tried to allocate a collection of
   size N, but there are only M bytes remaining"); ``check_lengths`` does the same
   before kio sees the body: it walks the bytes by the schema (lengths, counts and
   tagged-field sizes; fixed-width fields are skipped in runs) and raises
   ``LengthError`` for any count or length beyond the bytes left, or a body that
   ends early. Every item takes at least one byte (no struct that is an array item
   in a request schema is empty), so a count that passes cannot make kio reserve
   more than eight bytes per byte of the frame.
2. **Nulls after kio reads.** kio reads an array length of -1 (compact: 0) as None
   whether or not the field is nullable in that version, so a request whose
   ``topics`` is null would reach its handler as ``None`` (Kafka's readers throw
   "non-nullable field topics was serialized as null"). ``null_field`` walks the
   decoded entity against its class's field types (kio writes nullability into the
   annotation: ``tuple[X, ...] | None``) and names the first field, at any depth,
   that holds None without being nullable: ``topics[0].partitions``. Only arrays
   need looking at: kio refuses a null string, byte string or struct that is not
   nullable itself, and reads numbers as numbers; so only the entities that have
   such an array somewhere inside are walked (a Fetch's partitions are not).

Each class's plan (its scan steps, its fields to check) is built once and cached.

Pure, with ``functools.cache`` plans; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

from kio.static.protocol import Entity

# -- 1. lengths --------------------------------------------------------------------

_FIXED_BYTES: dict[str, int] = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_LEGACY_NULL = -1
_VARINT_CONTINUATION = 0x80
_VARINT_PAYLOAD = 0x7F
_VARINT_SHIFT = 7
_VARINT_MAX_BYTES = 5

# A scan step: (frame, position) -> position after the field; raises LengthError.
_Step = Callable[[bytes, int], int]


class LengthError(ValueError):
    """A count or length past the end of the body, or a body that ends inside a field."""


def _need(frame: bytes, position: int, size: int, what: str) -> int:
    end = position + size
    if end > len(frame):
        raise LengthError(
            f"{what} needs {size} bytes at offset {position}, "
            f"but the frame has {len(frame) - position} left"
        )
    return end


def _uvarint(frame: bytes, position: int, what: str) -> tuple[int, int]:
    value = shift = 0
    for index in range(_VARINT_MAX_BYTES):
        _need(frame, position + index, 1, what)
        byte = frame[position + index]
        value |= (byte & _VARINT_PAYLOAD) << shift
        if not byte & _VARINT_CONTINUATION:
            return value, position + index + 1
        shift += _VARINT_SHIFT
    raise LengthError(f"{what}: a varint longer than {_VARINT_MAX_BYTES} bytes")


def _legacy_length(frame: bytes, position: int, form: struct.Struct, what: str) -> tuple[int, int]:
    """A legacy length (-1: null, read as 0) and the position after it."""
    _need(frame, position, form.size, what)
    (length,) = form.unpack_from(frame, position)
    if length < _LEGACY_NULL:
        raise LengthError(f"{what} has a negative length {length}")
    return max(length, 0), position + form.size


def _count(frame: bytes, position: int, *, flexible: bool, what: str) -> tuple[int, int]:
    """An array's item count (null: 0), checked against the bytes left."""
    if flexible:
        encoded, position = _uvarint(frame, position, what)
        count = max(encoded - 1, 0)
    else:
        count, position = _legacy_length(frame, position, _INT32, what)
    if count > len(frame) - position:
        raise LengthError(f"{what} announces {count} items with {len(frame) - position} bytes left")
    return count, position


def _skip_fixed(size: int, what: str) -> _Step:
    return lambda frame, position: _need(frame, position, size, what)


def _skip_sized(kafka_type: str, *, flexible: bool, what: str) -> _Step:
    """A string or byte string: its length, then that many bytes."""
    if flexible:

        def compact(frame: bytes, position: int) -> int:
            encoded, position = _uvarint(frame, position, what)
            return _need(frame, position, max(encoded - 1, 0), what)

        return compact
    form = _INT16 if kafka_type == "string" else _INT32

    def legacy(frame: bytes, position: int) -> int:
        length, position = _legacy_length(frame, position, form, what)
        return _need(frame, position, length, what)

    return legacy


def _skip_tagged_fields(frame: bytes, position: int) -> int:
    if position < len(frame) and frame[position] == 0:
        return position + 1  # No tagged fields: nearly always.
    count, position = _uvarint(frame, position, "tagged fields")
    if count > len(frame) - position:
        raise LengthError(f"{count} tagged fields with {len(frame) - position} bytes left")
    for _ in range(count):
        _, position = _uvarint(frame, position, "a tag")
        size, position = _uvarint(frame, position, "a tagged field's size")
        position = _need(frame, position, size, "a tagged field")
    return position


@dataclasses.dataclass(frozen=True, slots=True)
class _Scan:
    """How to step over one entity: ``step``; ``fixed_bytes`` when its fields are all
    fixed-width (then a flexible entity is those bytes and a tagged-field section)."""

    step: _Step
    fixed_bytes: int | None
    flexible: bool


def _skip_array(item: _Scan | _Step, *, flexible: bool, what: str) -> _Step:
    if isinstance(item, _Scan) and item.fixed_bytes is not None and not item.flexible:
        size = item.fixed_bytes

        def fixed_items(frame: bytes, position: int) -> int:
            count, position = _count(frame, position, flexible=flexible, what=what)
            return _need(frame, position, count * size, what)

        return fixed_items
    if isinstance(item, _Scan) and item.fixed_bytes is not None:
        size = item.fixed_bytes

        def tagged_fixed_items(frame: bytes, position: int) -> int:
            count, position = _count(frame, position, flexible=flexible, what=what)
            for _ in range(count):
                position = _skip_tagged_fields(frame, _need(frame, position, size, what))
            return position

        return tagged_fixed_items
    step = item.step if isinstance(item, _Scan) else item

    def items(frame: bytes, position: int) -> int:
        count, position = _count(frame, position, flexible=flexible, what=what)
        for _ in range(count):
            position = step(frame, position)
        return position

    return items


def _skip_nullable_struct(struct_step: _Step, what: str) -> _Step:
    def nullable(frame: bytes, position: int) -> int:
        # KIP-893: an int8 marker, -1 for null, then the struct.
        _need(frame, position, 1, what)
        if frame[position] == 0xFF:
            return position + 1
        return struct_step(frame, position + 1)

    return nullable


def _leaf_step(kafka_type: str, *, flexible: bool, what: str) -> _Step:
    if kafka_type in _FIXED_BYTES:
        return _skip_fixed(_FIXED_BYTES[kafka_type], what)
    return _skip_sized(kafka_type, flexible=flexible, what=what)


def _field_step(field: dataclasses.Field[Any], *, flexible: bool) -> _Step:
    tp, nullable = without_none(field.type)
    kafka_type = str(field.metadata.get("kafka_type", ""))
    if typing.get_origin(tp) is tuple:
        item, _ = without_none(typing.get_args(tp)[0])
        return _skip_array(
            _entity_scan(item)
            if _is_entity(item)
            else _leaf_step(kafka_type, flexible=flexible, what=f"an item of {field.name}"),
            flexible=flexible,
            what=field.name,
        )
    if _is_entity(tp):
        step = _entity_scan(tp).step
        return _skip_nullable_struct(step, field.name) if nullable else step
    return _leaf_step(kafka_type, flexible=flexible, what=field.name)


@functools.cache
def _entity_scan(cls: type[Entity]) -> _Scan:
    flexible = bool(cls.__flexible__)
    steps: list[_Step] = []
    fixed_run = 0
    all_fixed = True
    for field in dataclasses.fields(cls):
        if "tag" in field.metadata:
            continue  # Tagged fields are read from the tagged-field section.
        size = _FIXED_BYTES.get(str(field.metadata.get("kafka_type", "")))
        # A nullable array of a fixed-width type (``tuple[i32, ...] | None``) is an array.
        if size is not None and typing.get_origin(without_none(field.type)[0]) is not tuple:
            fixed_run += size
            continue
        all_fixed = False
        if fixed_run:
            steps.append(_skip_fixed(fixed_run, f"fields before {field.name}"))
            fixed_run = 0
        steps.append(_field_step(field, flexible=flexible))
    if fixed_run:
        steps.append(_skip_fixed(fixed_run, f"the last fields of {cls.__name__}"))
    if flexible:
        steps.append(_skip_tagged_fields)

    def scan(frame: bytes, position: int) -> int:
        for step in steps:
            position = step(frame, position)
        return position

    return _Scan(scan, fixed_run if all_fixed else None, flexible)


def check_lengths(cls: type[Entity], frame: bytes, offset: int) -> None:
    """Raise ``LengthError`` unless every count and length of the ``cls`` body at
    ``offset`` fits in ``frame``."""
    _entity_scan(cls).step(frame, offset)


# -- 2. nulls ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _NullCheck:
    """A field that may hold a None it must not: an array that is not nullable, or
    entities (one, or an array of them) with such an array inside."""

    name: str
    nullable: bool
    inner: tuple[_NullCheck, ...]
    is_array: bool


def without_none(tp: Any) -> tuple[Any, bool]:
    """``tp`` without its ``| None``, and whether it had one."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _is_entity(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@functools.cache
def _null_checks(cls: type[Entity]) -> tuple[_NullCheck, ...]:
    """The fields of ``cls`` worth looking at: kio's readers of numbers, strings, bytes
    and structs never return a None that is not allowed, only its array readers do."""
    checks = []
    for field in dataclasses.fields(cls):
        tp, nullable = without_none(field.type)
        is_array = typing.get_origin(tp) is tuple
        item = without_none(typing.get_args(tp)[0])[0] if is_array else tp
        inner = _null_checks(item) if _is_entity(item) else ()
        if (is_array and not nullable) or inner:
            checks.append(_NullCheck(field.name, nullable, inner, is_array))
    return tuple(checks)


def _first_null(entity: Any, checks: tuple[_NullCheck, ...]) -> str | None:
    for check in checks:
        value = getattr(entity, check.name)
        if value is None:
            if check.nullable:
                continue
            return check.name
        if not check.inner:
            continue
        if not check.is_array:
            found = _first_null(value, check.inner)
            if found is not None:
                return f"{check.name}.{found}"
            continue
        for index, item in enumerate(value):
            found = _first_null(item, check.inner)
            if found is not None:
                return f"{check.name}[{index}].{found}"
    return None


def null_field(entity: Entity) -> str | None:
    """The path of the first non-nullable field of ``entity`` that holds None, or None."""
    return _first_null(entity, _null_checks(type(entity)))
