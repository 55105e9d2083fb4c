"""Responses assembled from parts encoded beforehand: one array's items as bytes.

A response whose cost is dominated by one large array (Metadata's topics) can keep
each item encoded, and only the rest is encoded per request. ``encode_entity`` encodes
one item (a kio entity of any version, converted to the class asked for);
``encode_response_with_array`` encodes the response with that array empty, then puts
the items' bytes in its place::

    | header | fields before | array length | items ... | fields after | tagged |
                             ^ written here, for len(items)

The fields after the array must be fixed-width integers (Metadata's
``cluster_authorized_operations``), so their bytes are a known count at the end; a
flexible version ends with its empty tagged-field section (one byte). The result is
byte for byte what ``encode_response`` makes of the whole response.

Pure and cached; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
import typing
from collections.abc import Sequence
from typing import Final

from kio.static.primitive import i8, i16, i32, i64
from kio.static.protocol import Entity, ResponsePayload

from tickwheel.protocol._codec import encode_response
from tickwheel.protocol._framing import SIZE_PREFIX_BYTES, size_prefix, uvarint
from tickwheel.protocol._schemas import writer_for
from tickwheel.protocol._versions import convert

_FIXED_WIDTH_BYTES: Final[dict[object, int]] = {i8: 1, bool: 1, i16: 2, i32: 4, i64: 8}
_EMPTY_TAGGED_FIELDS_BYTES: Final = 1
_ARRAY_LENGTH: Final = struct.Struct(">i")


def encode_entity(cls: type[Entity], entity: Entity) -> bytes:
    """The wire bytes of ``entity`` (say an array item, of any version of its API) as an
    entity of ``cls``."""
    buffer = io.BytesIO()
    writer_for(cls)(buffer, convert(cls, entity))
    return buffer.getvalue()


@functools.cache
def array_item_class(cls: type[Entity], field_name: str) -> type[Entity]:
    """The class of the items of array field ``field_name`` of ``cls``."""
    item: type[Entity] = typing.get_args(typing.get_type_hints(cls)[field_name])[0]
    return item


@functools.cache
def _trailing_bytes(cls: type[ResponsePayload], field_name: str) -> int:
    """How many bytes follow array ``field_name`` in every encoding of ``cls``."""
    hints = typing.get_type_hints(cls)
    names = [field.name for field in dataclasses.fields(cls)]
    trailing = 0
    for name in names[names.index(field_name) + 1 :]:
        width = _FIXED_WIDTH_BYTES.get(hints[name])
        if width is None:
            raise TypeError(f"{cls.__name__}.{name} after {field_name} is not fixed-width")
        trailing += width
    return trailing + (_EMPTY_TAGGED_FIELDS_BYTES if cls.__flexible__ else 0)


def _array_length(count: int, *, flexible: bool) -> bytes:
    return uvarint(count + 1) if flexible else _ARRAY_LENGTH.pack(count)


def encode_response_with_array(
    correlation_id: int,
    cls: type[ResponsePayload],
    response: ResponsePayload,
    field_name: str,
    items: Sequence[bytes],
) -> bytes:
    """The response frame of ``cls`` from ``response`` (of any version of its API, its
    array ``field_name`` empty), that array holding ``items`` (each from
    ``encode_entity`` of its item class)."""
    if getattr(response, field_name):
        raise ValueError(f"{type(response).__name__}.{field_name} must be empty")
    empty = encode_response(correlation_id, convert(cls, response))
    flexible = bool(cls.__flexible__)
    empty_length = len(_array_length(0, flexible=flexible))
    split = len(empty) - _trailing_bytes(cls, field_name)
    body = [
        empty[SIZE_PREFIX_BYTES : split - empty_length],
        _array_length(len(items), flexible=flexible),
        *items,
        empty[split:],
    ]
    size = sum(map(len, body))
    return b"".join([size_prefix(size), *body])
