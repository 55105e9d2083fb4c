"""OffsetDelete through librdkafka's C API, which confluent-kafka 2.16 does not wrap.

librdkafka has ``rd_kafka_DeleteConsumerGroupOffsets`` (the AdminClient call behind
Kafka's ``kafka-consumer-groups --delete-offsets``), but confluent-kafka's Python
AdminClient offers no method for it. The wheel ships the library itself, so the tests
call it with ctypes: the same client code, request versions and error handling that a
C, Go (confluent-kafka-go) or .NET application runs.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from pathlib import Path

import confluent_kafka

_ERRSTR_BYTES = 512
_PRODUCER = 0  # rd_kafka_type_t RD_KAFKA_PRODUCER: what an admin client is created as
_CONF_OK = 0


class _TopicPartition(ctypes.Structure):
    """rd_kafka_topic_partition_t (stable ABI)."""

    _fields_ = (
        ("topic", ctypes.c_char_p),
        ("partition", ctypes.c_int32),
        ("offset", ctypes.c_int64),
        ("metadata", ctypes.c_void_p),
        ("metadata_size", ctypes.c_size_t),
        ("opaque", ctypes.c_void_p),
        ("err", ctypes.c_int),
        ("_private", ctypes.c_void_p),
    )


class _TopicPartitionList(ctypes.Structure):
    """rd_kafka_topic_partition_list_t (stable ABI)."""

    _fields_ = (
        ("cnt", ctypes.c_int),
        ("size", ctypes.c_int),
        ("elems", ctypes.POINTER(_TopicPartition)),
    )


def _load() -> ctypes.CDLL | None:
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        return None
    lib = ctypes.CDLL(str(found[0]))
    pointer = ctypes.c_void_p
    signatures: dict[str, tuple[object, list[object]]] = {
        "rd_kafka_conf_new": (pointer, []),
        "rd_kafka_conf_set": (
            ctypes.c_int,
            [pointer, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
        ),
        "rd_kafka_new": (pointer, [ctypes.c_int, pointer, ctypes.c_char_p, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [pointer]),
        "rd_kafka_queue_new": (pointer, [pointer]),
        "rd_kafka_queue_destroy": (None, [pointer]),
        "rd_kafka_queue_poll": (pointer, [pointer, ctypes.c_int]),
        "rd_kafka_event_destroy": (None, [pointer]),
        "rd_kafka_event_error": (ctypes.c_int, [pointer]),
        "rd_kafka_topic_partition_list_new": (pointer, [ctypes.c_int]),
        "rd_kafka_topic_partition_list_add": (pointer, [pointer, ctypes.c_char_p, ctypes.c_int32]),
        "rd_kafka_topic_partition_list_destroy": (None, [pointer]),
        "rd_kafka_DeleteConsumerGroupOffsets_new": (pointer, [ctypes.c_char_p, pointer]),
        "rd_kafka_DeleteConsumerGroupOffsets_destroy": (None, [pointer]),
        "rd_kafka_DeleteConsumerGroupOffsets": (
            None,
            [pointer, ctypes.POINTER(pointer), ctypes.c_size_t, pointer, pointer],
        ),
        "rd_kafka_event_DeleteConsumerGroupOffsets_result": (pointer, [pointer]),
        "rd_kafka_DeleteConsumerGroupOffsets_result_groups": (
            ctypes.POINTER(pointer),
            [pointer, ctypes.POINTER(ctypes.c_size_t)],
        ),
        "rd_kafka_group_result_error": (pointer, [pointer]),
        "rd_kafka_error_code": (ctypes.c_int, [pointer]),
        "rd_kafka_group_result_partitions": (ctypes.POINTER(_TopicPartitionList), [pointer]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


LIBRDKAFKA = _load()


def delete_consumer_group_offsets(
    bootstrap_servers: str,
    group_id: str,
    partitions: Iterable[tuple[str, int]],
    timeout_ms: int,
) -> tuple[int, dict[tuple[str, int], int]]:
    """Delete offsets with librdkafka: (group error code, error code per partition)."""
    lib = LIBRDKAFKA
    assert lib is not None, "the confluent-kafka wheel ships no librdkafka"
    errstr = ctypes.create_string_buffer(_ERRSTR_BYTES)
    conf = lib.rd_kafka_conf_new()
    for name, value in (("bootstrap.servers", bootstrap_servers), ("log_level", "3")):
        set_result = lib.rd_kafka_conf_set(
            conf, name.encode(), value.encode(), errstr, _ERRSTR_BYTES
        )
        assert set_result == _CONF_OK, errstr.value
    client = lib.rd_kafka_new(_PRODUCER, conf, errstr, _ERRSTR_BYTES)
    assert client, errstr.value
    queue = lib.rd_kafka_queue_new(client)
    wanted = lib.rd_kafka_topic_partition_list_new(0)
    for topic, partition in partitions:
        lib.rd_kafka_topic_partition_list_add(wanted, topic.encode(), partition)
    request = lib.rd_kafka_DeleteConsumerGroupOffsets_new(group_id.encode(), wanted)
    event = None
    try:
        requests = (ctypes.c_void_p * 1)(request)
        lib.rd_kafka_DeleteConsumerGroupOffsets(client, requests, 1, None, queue)
        event = lib.rd_kafka_queue_poll(queue, timeout_ms)
        assert event, "no DeleteConsumerGroupOffsets result within the timeout"
        request_error = lib.rd_kafka_event_error(event)
        if request_error:
            return request_error, {}
        result = lib.rd_kafka_event_DeleteConsumerGroupOffsets_result(event)
        count = ctypes.c_size_t()
        groups = lib.rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, ctypes.byref(count))
        assert count.value == 1
        group_error = lib.rd_kafka_group_result_error(groups[0])
        if group_error:
            return lib.rd_kafka_error_code(group_error), {}
        answered = lib.rd_kafka_group_result_partitions(groups[0]).contents
        return 0, {
            (answered.elems[i].topic.decode(), answered.elems[i].partition): answered.elems[i].err
            for i in range(answered.cnt)
        }
    finally:
        if event:
            lib.rd_kafka_event_destroy(event)
        lib.rd_kafka_DeleteConsumerGroupOffsets_destroy(request)
        lib.rd_kafka_topic_partition_list_destroy(wanted)
        lib.rd_kafka_queue_destroy(queue)
        lib.rd_kafka_destroy(client)
