"""``SchemaValidator``: broker-side schema id validation of produced records.

Confluent's and Redpanda's broker-side schema id validation, against this broker's own
registry. A key or value written by a schema registry serializer starts with the wire
format's five bytes: magic byte 0, then the schema id as a 4-byte big-endian integer,
then the payload (which is not inspected). It passes when that id is a live (not
soft-deleted) version of the subject the topic's naming strategy gives:

=========================  ==========================================================
TopicNameStrategy          ``<topic>-key`` or ``<topic>-value``
RecordNameStrategy         the record name: an Avro schema's full name (a record, enum
                           or fixed), a JSON Schema's ``title``
TopicRecordNameStrategy    ``<topic>-<record name>``
=========================  ==========================================================

A null key or value passes (a tombstone, a keyless record). Anything else -- too short,
another magic byte, an id the registry does not know, an id with no record name where
the strategy needs one, an id not registered under the subject -- refuses the record.
The strategies themselves are the broker's topic configs; ``SubjectNaming`` is what
this module needs of one: the subject from the topic, key or value, and record name.

``record_errors`` answers the records of the first batch of a produce's records that
holds refused ones, each with its index in its batch and why, as the log answers the
keyless records of a compacted topic (Kafka's ``RecordValidationException``); the
produce handler refuses the partition with them. Compressed batches are decompressed
to read the prefixes; control batches are not validated (clients may not write them:
the log refuses them); a batch whose records do not parse is refused as such (record
0), since the log, which takes batches as opaque bytes, would not look.

Cost, per validated partition: the registry reads what ``_schemas`` holds that it has
not read (one comparison of offsets when nothing); the prefix scan (``_prefix_scan``,
compiled by the build: some 60 ns per record) answers each batch's distinct
(key prefix, value prefix) pairs -- nearly always one -- and each pair is judged once,
each id once per call, with the store's ``subjects_by_id`` (kept as each ``_schemas``
record is applied) and its record name (parsed once from its schema text, kept while
the id names that same stored schema). Only a refusal walks the records again
(``tickwheel.record.record_prefixes``) to name them.

Concurrency: event-loop thread only, like the registry it reads.
"""

from __future__ import annotations

import json
from typing import Final, Protocol

from tickwheel.record import (
    CONTROL_FLAG_MASK,
    RecordError,
    iter_batches,
    record_prefixes,
    records_section,
)
from tickwheel.registry._avro import AVRO
from tickwheel.registry._json_schema import JSON
from tickwheel.registry._prefix_scan_build import distinct_prefixes
from tickwheel.registry._records import SchemaValue
from tickwheel.registry._registry import SchemaRegistry

MAGIC_BYTE: Final = 0
"""The first byte of the schema registry's wire format."""
WIRE_PREFIX_BYTES: Final = 5
"""The magic byte and the 4-byte schema id."""
_AVRO_NAMED_TYPES: Final = frozenset({"record", "enum", "fixed"})


class SubjectNaming(Protocol):
    """How a topic's records name the subject their schema id must be registered under."""

    def subject(self, topic: str, is_key: bool, record_name: str | None) -> str | None:
        """The subject, or None when it needs a record name and ``record_name`` is None."""
        ...


def record_name(value: SchemaValue) -> str | None:
    """The name RecordNameStrategy uses: an Avro named type's full name, a JSON Schema's
    title; None for other schemas."""
    try:
        document = json.loads(value.schema)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    name: object = None
    if value.schema_type == JSON:
        name = document.get("title")
    elif value.schema_type == AVRO and document.get("type") in _AVRO_NAMED_TYPES:
        name, namespace = document.get("name"), document.get("namespace")
        if isinstance(name, str) and "." not in name and isinstance(namespace, str) and namespace:
            name = f"{namespace}.{name}"
    return name if isinstance(name, str) else None


class SchemaValidator:
    """Checks produced records' schema ids against one registry."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._registry = registry
        # Schema id -> the stored schema its record name was read from, and the name.
        self._record_names: dict[int, tuple[SchemaValue, str | None]] = {}

    def record_errors(
        self,
        topic: str,
        records: bytes,
        key: SubjectNaming | None,
        value: SubjectNaming | None,
    ) -> list[tuple[int, str]]:
        """The refused records of the first batch of ``records`` holding any: their
        index in the batch and why; empty when every record passes. ``key`` and
        ``value``: the strategy of each validated field, None for one not validated."""
        self._registry.catch_up()
        view = memoryview(records)
        judged: dict[tuple[bool, int], str | None] = {}
        for position, header in iter_batches(records):
            if header.attributes & CONTROL_FLAG_MASK:
                continue
            batch = view[position : position + header.size_bytes]
            try:
                pairs = distinct_prefixes(
                    records_section(batch, header), header.records_count, WIRE_PREFIX_BYTES
                )
            except (RecordError, IndexError, ValueError) as exc:
                return [(0, f"the records of the batch do not parse: {exc}")]
            # Each distinct pair is judged once; records are named only when one is refused.
            refused = {
                pair: reason
                for pair in pairs
                if (reason := self._pair_refusal(topic, key, value, pair, judged)) is not None
            }
            if refused:
                prefixes = record_prefixes(batch, header, WIRE_PREFIX_BYTES)
                return [(i, refused[pair]) for i, pair in enumerate(prefixes) if pair in refused]
        return []

    def _pair_refusal(
        self,
        topic: str,
        key: SubjectNaming | None,
        value: SubjectNaming | None,
        pair: tuple[bytes | None, bytes | None],
        judged: dict[tuple[bool, int], str | None],
    ) -> str | None:
        """Why a record whose key and value start with ``pair`` is refused, or None."""
        key_prefix, value_prefix = pair
        reason = None
        if key is not None and key_prefix is not None:
            reason = self._refusal(topic, key, True, key_prefix, judged)
        if reason is None and value is not None and value_prefix is not None:
            reason = self._refusal(topic, value, False, value_prefix, judged)
        return reason

    def _refusal(
        self,
        topic: str,
        strategy: SubjectNaming,
        is_key: bool,
        prefix: bytes,
        judged: dict[tuple[bool, int], str | None],
    ) -> str | None:
        """Why a key or value starting with ``prefix`` is refused, or None."""
        field = "key" if is_key else "value"
        if len(prefix) < WIRE_PREFIX_BYTES:
            return f"the {field} is too short for a schema id ({len(prefix)} bytes)"
        if prefix[0] != MAGIC_BYTE:
            return f"the {field} has unknown magic byte {prefix[0]} (expected {MAGIC_BYTE})"
        schema_id = int.from_bytes(prefix[1:WIRE_PREFIX_BYTES])
        verdict_key = (is_key, schema_id)
        if verdict_key not in judged:
            judged[verdict_key] = self._id_refusal(topic, strategy, is_key, schema_id)
        return judged[verdict_key]

    def _id_refusal(
        self, topic: str, strategy: SubjectNaming, is_key: bool, schema_id: int
    ) -> str | None:
        named = f"the {'key' if is_key else 'value'}'s schema id {schema_id}"
        store = self._registry.store
        subjects = store.subjects_by_id.get(schema_id)
        if subjects is None:
            if schema_id in store.by_id:
                return f"{named} is in no subject but soft-deleted ones"
            return f"{named} is unknown to the schema registry"
        subject = strategy.subject(topic, is_key, self._record_name(schema_id))
        if subject is None:
            return f"{named} names a schema without a record name, which {strategy} needs"
        if subject not in subjects:
            return f"{named} is not registered under subject {subject}"
        return None

    def _record_name(self, schema_id: int) -> str | None:
        value = self._registry.store.by_id[schema_id]
        known = self._record_names.get(schema_id)
        if known is not None and known[0] is value:
            return known[1]
        name = record_name(value)
        self._record_names[schema_id] = (value, name)
        return name
