"""A plain confluent-kafka client for the Spark tests: set topics up and check them.

It is independent of ``tickwheel.spark`` on purpose, so a test that checks the
source's or the sink's output does not check it with the code under test.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

TIMEOUT_S = 30.0
_topic_numbers = itertools.count()
# Distinct per run too, for runs against an external broker that keeps its topics.
_RUN_TAG = uuid.uuid4().hex[:8]


@dataclass(frozen=True)
class Record:
    """One Kafka record as the tests see it."""

    key: bytes | None
    value: bytes | None
    partition: int = -1
    headers: tuple[tuple[str, bytes | None], ...] = ()


class KafkaHelper:
    """Admin, produce and read-back against one cluster."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers})

    def new_topic(
        self, prefix: str, partitions: int = 2, config: dict[str, str] | None = None
    ) -> str:
        """Create a topic with a name no other test uses (and topic ``config``)."""
        name = f"{prefix}-{_RUN_TAG}-{next(_topic_numbers)}"
        futures = self._admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
        for future in futures.values():
            future.result(TIMEOUT_S)
        return name

    def add_partitions(self, topic: str, total: int) -> None:
        """Grow ``topic`` to ``total`` partitions."""
        futures = self._admin.create_partitions([NewPartitions(topic, total)])
        for future in futures.values():
            future.result(TIMEOUT_S)

    def delete_records_before(self, topic: str, partition: int, offset: int) -> None:
        """DeleteRecords: move the partition's log start offset to ``offset``."""
        futures = self._admin.delete_records([TopicPartition(topic, partition, offset)])
        for future in futures.values():
            future.result(TIMEOUT_S)

    def produce(self, topic: str, records: Iterable[Record]) -> int:
        """Produce ``records`` with acks=all; returns how many were acknowledged."""
        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "acks": "all"})
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: object) -> None:
            if error is not None:
                failures.append(error)

        count = 0
        for record in records:
            producer.produce(
                topic,
                value=record.value,
                key=record.key,
                partition=record.partition,
                headers=list(record.headers) or None,
                on_delivery=delivered,
            )
            count += 1
        assert producer.flush(TIMEOUT_S) == 0
        assert not failures, failures
        return count

    def end_offsets(self, topic: str, partitions: int) -> list[int]:
        """Each partition's high watermark."""
        consumer = self._consumer()
        try:
            return [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)[1]
                for p in range(partitions)
            ]
        finally:
            consumer.close()

    def read_all(self, topic: str, partitions: int) -> list[Record]:
        """Every record of ``topic``, partition by partition, in offset order."""
        ends = self.end_offsets(topic, partitions)
        consumer = self._consumer()
        records: list[Record] = []
        try:
            for partition, end in enumerate(ends):
                if end == 0:
                    continue
                consumer.assign([TopicPartition(topic, partition, 0)])
                offset = -1
                while offset < end - 1:
                    message = consumer.poll(TIMEOUT_S)
                    assert message is not None, f"{topic}-{partition} stalled at {offset}"
                    assert message.error() is None, message.error()
                    offset = message.offset() or 0
                    records.append(
                        Record(
                            message.key(),
                            message.value(),
                            partition,
                            tuple(message.headers() or ()),
                        )
                    )
        finally:
            consumer.close()
        return records

    def committed_values(self, topic: str, partitions: int) -> list[bytes]:
        """Every value a read_committed consumer sees in ``topic``, in partition order
        (to each partition's end, which may be a transaction marker)."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"committed-check-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
            }
        )
        values: list[bytes] = []
        try:
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            at_end: set[int] = set()
            deadline = time.monotonic() + TIMEOUT_S
            while len(at_end) < partitions:
                assert time.monotonic() < deadline, f"{topic}: no end of partition"
                message = consumer.poll(1.0)
                if message is None:
                    continue
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                    continue
                assert error is None, error
                values.append(message.value() or b"")
        finally:
            consumer.close()
        return values

    def _consumer(self) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": "tickwheel-spark-tests",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
