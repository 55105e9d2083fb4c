"""Avro schemas and Spark types: the mapping both ways, as Spark's ``from_avro`` and
``to_avro`` make it.

``spark_type`` gives the Spark type of an Avro schema as Spark's ``SchemaConverters``
does: a record is a struct (a field is nullable when its type is a union with null),
an array an array, a map a map with string keys, an enum a string, fixed and bytes
binary; the logical types ``date`` (int) is a date, ``timestamp-millis`` and
``timestamp-micros`` (long) a timestamp, ``local-timestamp-millis`` and
``local-timestamp-micros`` (long) a timestamp without time zone, ``decimal`` (bytes or
fixed) a decimal of its precision and scale. A union with null is its other branch,
nullable; ``[int, long]`` is a long and ``[float, double]`` a double. Other logical
types (``uuid``, ``time-millis``, ...) are their base type, as Spark reads them, and
``parse`` removes them from every schema it parses so that fastavro decodes them so
too. What Spark would turn into a struct of ``member0``, ``member1``... (any other union)
and recursive types, which Spark refuses, fail with the field named.

``avro_schema`` goes the other way for a sink's struct column, as Spark's ``to_avro``
derives a schema: a record named ``topLevelRecord`` whose nested records are named
after their field (namespace: the names above them), a nullable type as the union
``[type, "null"]``, byte, short and int as int, a timestamp as ``timestamp-micros``, a
timestamp without time zone as ``local-timestamp-micros``, a date as ``date``, a
decimal as bytes with the ``decimal`` logical type (Spark uses fixed; both are read the
same way). Types Avro has no place for (maps with non-string keys, intervals, variants)
fail with the field named.

Pure functions over immutable values, and a per-process cache of parsed schemas (which
fastavro treats as read-only); safe from any thread.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Final

import fastavro
from fastavro.schema import SchemaParseException, UnknownType
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from tickwheel.spark._errors import SparkKafkaError

TOP_LEVEL_RECORD: Final = "topLevelRecord"
_NULL: Final = "null"
_PRIMITIVES: Final[dict[str, DataType]] = {
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}
# (base type, logical type) -> the Spark type; decimal is handled apart (it has
# parameters). A logical type not here is read as its base type.
_LOGICAL_TYPES: Final[dict[tuple[str, str], DataType]] = {
    ("int", "date"): DateType(),
    ("long", "timestamp-millis"): TimestampType(),
    ("long", "timestamp-micros"): TimestampType(),
    ("long", "local-timestamp-millis"): TimestampNTZType(),
    ("long", "local-timestamp-micros"): TimestampNTZType(),
}
_NAMED_LEAVES: Final[dict[str, DataType]] = {"enum": StringType(), "fixed": BinaryType()}
_DECIMAL: Final = "decimal"
_DECIMAL_BASES: Final = frozenset({"bytes", "fixed"})
# Spark's decimals hold at most 38 digits.
_MAX_DECIMAL_PRECISION: Final = 38
# Two-branch unions without null that Spark widens to one type.
_WIDENED_UNIONS: Final[dict[frozenset[str], DataType]] = {
    frozenset({"int", "long"}): LongType(),
    frozenset({"float", "double"}): DoubleType(),
}
# Spark type -> Avro type for the simple cases of avro_schema.
_AVRO_OF: Final[dict[type[DataType], Any]] = {
    BooleanType: "boolean",
    ByteType: "int",
    ShortType: "int",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    NullType: "null",
    DateType: {"type": "int", "logicalType": "date"},
    TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
}


@functools.lru_cache(maxsize=256)
def parse(text: str) -> Any:
    """``text`` parsed by fastavro, with the logical types Spark does not map removed;
    raises ``SparkKafkaError`` for a schema that is not valid Avro."""
    try:
        return fastavro.parse_schema(_spark_logical_types_only(json.loads(text)))
    except (ValueError, TypeError, SchemaParseException, UnknownType) as exc:
        raise SparkKafkaError(f"not a valid Avro schema: {exc}") from None


def spark_type(parsed: Any, what: str) -> tuple[DataType, bool]:
    """The Spark type of the parsed Avro schema ``parsed`` and whether it is nullable;
    ``what`` names it in errors (the column)."""
    return _spark_type(parsed, what, _named_types(parsed), ())


def avro_schema(data_type: DataType, what: str) -> str:
    """The Avro schema (JSON text) Spark's ``to_avro`` derives for a non-null column of
    ``data_type``; ``what`` names it in errors."""
    return json.dumps(_avro_type(data_type, False, TOP_LEVEL_RECORD, "", what))


def _spark_logical_types_only(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_spark_logical_types_only(branch) for branch in schema]
    if not isinstance(schema, dict):
        return schema
    copied = {key: _spark_logical_types_only(value) for key, value in schema.items()}
    logical = copied.get("logicalType")
    base = copied.get("type")
    if logical is not None and not (
        isinstance(base, str)
        and ((base, logical) in _LOGICAL_TYPES or (logical == _DECIMAL and base in _DECIMAL_BASES))
    ):
        del copied["logicalType"]
    return copied


def _named_types(parsed: Any) -> dict[str, Any]:
    """Every named type defined in ``parsed``, by full name (fastavro gives full names)."""
    named: dict[str, Any] = {}

    def visit(schema: Any) -> None:
        if isinstance(schema, list):
            for branch in schema:
                visit(branch)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed"):
                named[schema["name"]] = schema
            for field in schema.get("fields", ()) if kind in ("record", "error") else ():
                visit(field["type"])
            if kind == "array":
                visit(schema["items"])
            elif kind == "map":
                visit(schema["values"])
            elif isinstance(kind, (dict, list)):
                visit(kind)

    visit(parsed)
    return named


def _spark_type(
    schema: Any, what: str, named: dict[str, Any], seen: tuple[str, ...]
) -> tuple[DataType, bool]:
    if isinstance(schema, list):
        return _union_type(schema, what, named, seen)
    if isinstance(schema, str):
        return _type_by_name(schema, what, named, seen)
    kind = schema["type"]
    if not isinstance(kind, str):
        return _spark_type(kind, what, named, seen)
    if kind in _CONTAINERS:
        return _CONTAINERS[kind](schema, what, named, seen)
    leaf = _logical_type(schema, what)
    if leaf is None:
        leaf = _NAMED_LEAVES.get(kind)
    return (leaf, False) if leaf is not None else _spark_type(kind, what, named, seen)


def _type_by_name(
    name: str, what: str, named: dict[str, Any], seen: tuple[str, ...]
) -> tuple[DataType, bool]:
    if name == _NULL:
        return NullType(), True
    if name in _PRIMITIVES:
        return _PRIMITIVES[name], False
    if name in seen:
        raise SparkKafkaError(
            f"{what}: the recursive type {name} has no Spark type (Spark refuses it too)"
        )
    return _spark_type(named[name], what, named, seen)


def _logical_type(schema: dict[str, Any], what: str) -> DataType | None:
    """The Spark type of a logical type Spark maps, or None."""
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == _DECIMAL and kind in _DECIMAL_BASES:
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if precision > _MAX_DECIMAL_PRECISION:
            raise SparkKafkaError(
                f"{what}: a decimal of precision {precision} does not fit Spark's"
                f" {_MAX_DECIMAL_PRECISION} digits"
            )
        return DecimalType(precision, scale)
    return _LOGICAL_TYPES.get((kind, logical)) if isinstance(logical, str) else None


def _struct_type(
    schema: dict[str, Any], what: str, named: dict[str, Any], seen: tuple[str, ...]
) -> tuple[DataType, bool]:
    inner = (*seen, schema["name"])
    fields = []
    for field in schema["fields"]:
        field_type, nullable = _spark_type(field["type"], f"{what}.{field['name']}", named, inner)
        fields.append(StructField(field["name"], field_type, nullable))
    return StructType(fields), False


def _array_type(
    schema: dict[str, Any], what: str, named: dict[str, Any], seen: tuple[str, ...]
) -> tuple[DataType, bool]:
    items, items_nullable = _spark_type(schema["items"], f"{what}[]", named, seen)
    return ArrayType(items, items_nullable), False


def _map_type(
    schema: dict[str, Any], what: str, named: dict[str, Any], seen: tuple[str, ...]
) -> tuple[DataType, bool]:
    values, values_nullable = _spark_type(schema["values"], f"{what}{{}}", named, seen)
    return MapType(StringType(), values, values_nullable), False


_CONTAINERS: Final[dict[str, Callable[..., tuple[DataType, bool]]]] = {
    "record": _struct_type,
    "error": _struct_type,
    "array": _array_type,
    "map": _map_type,
}


def _union_type(
    branches: list[Any], what: str, named: dict[str, Any], seen: tuple[str, ...]
) -> tuple[DataType, bool]:
    others = [branch for branch in branches if branch != _NULL]
    nullable = len(others) < len(branches)
    if not others:
        return NullType(), True
    if len(others) == 1:
        data_type, branch_nullable = _spark_type(others[0], what, named, seen)
        return data_type, nullable or branch_nullable
    names = {branch for branch in others if isinstance(branch, str)}
    widened = _WIDENED_UNIONS.get(frozenset(names)) if len(names) == len(others) else None
    if widened is not None:
        return widened, nullable
    raise SparkKafkaError(
        f"{what}: the union {json.dumps(branches)} has no Spark type here (Spark makes"
        " it a struct of member0, member1...; use a union of one type and null)"
    )


def _avro_type(data_type: DataType, nullable: bool, name: str, namespace: str, what: str) -> Any:
    avro = _non_null_avro_type(data_type, name, namespace, what)
    return [avro, _NULL] if nullable and not isinstance(data_type, NullType) else avro


def _non_null_avro_type(data_type: DataType, name: str, namespace: str, what: str) -> Any:
    simple = _AVRO_OF.get(type(data_type))
    if simple is not None:
        return simple
    if isinstance(data_type, DecimalType):
        return {
            "type": "bytes",
            "logicalType": _DECIMAL,
            "precision": data_type.precision,
            "scale": data_type.scale,
        }
    if isinstance(data_type, ArrayType):
        items = _avro_type(data_type.elementType, data_type.containsNull, name, namespace, what)
        return {"type": "array", "items": items}
    if isinstance(data_type, MapType):
        if not isinstance(data_type.keyType, StringType):
            raise SparkKafkaError(
                f"{what}: an Avro map has string keys, not {data_type.keyType.simpleString()}"
            )
        values = _avro_type(data_type.valueType, data_type.valueContainsNull, name, namespace, what)
        return {"type": "map", "values": values}
    if isinstance(data_type, StructType):
        inner = f"{namespace}.{name}" if namespace else name
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        record["fields"] = [
            {
                "name": field.name,
                "type": _avro_type(
                    field.dataType, field.nullable, field.name, inner, f"{what}.{field.name}"
                ),
            }
            for field in data_type.fields
        ]
        return record
    raise SparkKafkaError(f"{what}: Avro has no type for {data_type.simpleString()}")
