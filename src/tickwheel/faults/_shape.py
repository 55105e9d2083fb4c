"""Where a request's topics and partitions are, in any API's kio classes.

Kafka's partitioned APIs all nest the same way, under names that differ by API and
version: a topic array (``topic_data``, ``topics``, ``v3_and_below_topics``...) whose
items have a name (``name`` or ``topic``) and a partition array (``partition_data``,
``partitions``...) whose items have an index (``index``, ``partition``,
``partition_index``), or are the indexes themselves; the response mirrors it with an
error field on each partition (``error_code``, ``partition_error_code``). ``TopicShape``
finds those fields in a class once, so the fault plan can match a rule's topic and
partition against any API, and the answers can be built for any API, without a table
of names per API.

Pure and cached per class; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any, Final, cast

from kio.static.protocol import Entity

_TOPIC_NAMES: Final = ("name", "topic")
_INDEX_NAMES: Final = ("partition_index", "index", "partition")
_ERROR_NAMES: Final = ("error_code", "partition_error_code")
# The topic array of a request that names topics without partitions (Metadata).
_METADATA_TOPICS: Final = "topics"


@dataclass(frozen=True, slots=True)
class TopicShape:
    """The fields of a topic array, its items' name and partition array, and the
    partitions' index field (None: the partitions are plain indexes) and error field
    (None: a request's partitions carry none)."""

    topics: str
    topic_class: type[Entity]
    name: str
    partitions: str
    partition_class: type[Entity] | None
    index: str | None
    error: str | None


def _field_types(cls: type[Any]) -> list[tuple[str, Any]]:
    """Each field of ``cls`` with its type resolved (some kio modules annotate with
    strings)."""
    hints = typing.get_type_hints(cls)
    return [(field.name, hints[field.name]) for field in dataclasses.fields(cls)]


def _item_class(tp: Any) -> type[Any] | None:
    args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
    if typing.get_origin(tp) is not tuple and args:
        tp = args[0]
    if typing.get_origin(tp) is not tuple:
        return None
    item = typing.get_args(tp)[0]
    return item if isinstance(item, type) else None


def _first(names: tuple[str, ...], fields: dict[str, dataclasses.Field[Any]]) -> str | None:
    return next((name for name in names if name in fields), None)


def _fields(cls: type[Any]) -> dict[str, dataclasses.Field[Any]]:
    return {field.name: field for field in dataclasses.fields(cls)}


def _partition_array(topic_class: type[Any]) -> tuple[str, type[Any]] | None:
    for name, tp in _field_types(topic_class):
        item = _item_class(tp)
        if item is not None and issubclass(item, int):
            return name, item
        if (
            item is not None
            and dataclasses.is_dataclass(item)
            and _first(_INDEX_NAMES, _fields(item)) is not None
        ):
            return name, item
    return None


@functools.cache
def topic_shape(cls: type[Entity]) -> TopicShape | None:
    """The topic array of ``cls`` (a request or response body class), if it has one."""
    for field_name, tp in _field_types(cls):
        topic_class = _item_class(tp)
        if topic_class is None or not dataclasses.is_dataclass(topic_class):
            continue
        name = _first(_TOPIC_NAMES, _fields(topic_class))
        found = _partition_array(topic_class)
        if name is None or found is None:
            continue
        partitions, item = found
        topic_entity = cast("type[Entity]", topic_class)
        if dataclasses.is_dataclass(item):
            item_fields = _fields(item)
            return TopicShape(
                topics=field_name,
                topic_class=topic_entity,
                name=name,
                partitions=partitions,
                partition_class=cast("type[Entity]", item),
                index=_first(_INDEX_NAMES, item_fields),
                error=_first(_ERROR_NAMES, item_fields),
            )
        return TopicShape(field_name, topic_entity, name, partitions, None, None, None)
    return None


def partition_index(shape: TopicShape, partition: Any) -> int:
    """The index of ``partition``, an item of a partition array of ``shape``."""
    return int(partition if shape.index is None else getattr(partition, shape.index))


def request_partitions(body: Entity) -> list[tuple[str, int]] | None:
    """The (topic, partition) pairs a request names, in its order; None when its API
    names no partitions."""
    shape = topic_shape(type(body))
    if shape is None:
        return None
    return [
        (str(getattr(topic, shape.name)), partition_index(shape, partition))
        for topic in getattr(body, shape.topics) or ()
        for partition in getattr(topic, shape.partitions) or ()
    ]


def request_topics(body: Entity) -> list[str] | None:
    """The topic names a request names, each once; None when it asks for every topic
    (a Metadata request with null topics). An API without topics names none."""
    shape = topic_shape(type(body))
    if shape is not None:
        return list(
            dict.fromkeys(str(getattr(t, shape.name)) for t in getattr(body, shape.topics) or ())
        )
    if not hasattr(body, _METADATA_TOPICS):
        return []
    topics = getattr(body, _METADATA_TOPICS)
    if topics is None:
        return None
    return [str(name) for topic in topics if (name := getattr(topic, "name", None)) is not None]
