"""librdkafka clients: a bad ``kafka.*`` option fails with this layer's error."""

from __future__ import annotations

import pytest

from tickwheel.spark import SparkKafkaError
from tickwheel.spark._clients import KafkaMetadata, reader_consumer, writer_producer

BAD = (("bootstrap.servers", "127.0.0.1:9"), ("key.deserializer", "org.example.Java"))


def test_unknown_client_setting_is_refused_with_a_clear_error() -> None:
    with pytest.raises(SparkKafkaError, match=r"kafka\.\* options"):
        reader_consumer(BAD)
    with pytest.raises(SparkKafkaError, match=r"kafka\.\* options"):
        writer_producer(BAD)
    with pytest.raises(SparkKafkaError, match=r"kafka\.\* options"):
        KafkaMetadata(BAD).partition_counts()
