"""Kafka topics in Apache Spark through PySpark's Python data source API.

``tickwheel.spark`` is a PySpark 4 data source, ``format("tickwheel")``, that reads and
writes Kafka topics with the options and columns of Spark's own Kafka connector but
speaks the Kafka protocol through confluent-kafka (librdkafka) instead of a JVM jar. It
works against tickwheel's broker and Apache Kafka alike, and where the JVM connector
cannot be added (Spark Connect, managed clusters, no Maven access).

    from tickwheel.spark import local_session
    spark = local_session("clicks")          # or register(spark) on your own session
    counts = (spark.readStream.format("tickwheel")
              .option("kafka.bootstrap.servers", "127.0.0.1:9092")
              .option("subscribe", "pageviews").load())

Streaming reads plan one offset range per topic-partition and micro-batch (more with
``minPartitions``; ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` with
``maxTriggerDelay``, ``Trigger.AvailableNow``), may start at a time
(``startingTimestamp``, ``startingOffsetsByTimestamp``), and keep their offsets only in
Spark's checkpoint, so a restarted query neither loses nor repeats what it committed.
PySpark lets a Python source report no progress ``metrics``: ``offsets_behind_latest``
computes Spark's ``min/max/avgOffsetsBehindLatest`` from a progress.
Executors read with their own consumers (assign and seek, no group) and hand Spark
Arrow record batches. Writes are acknowledged by all in-sync replicas before Spark
commits a batch; the sink is at-least-once, or with ``exactlyOnce=true`` exactly-once
for read_committed readers (one transaction per task and micro-batch, see
``_exactly_once``). Spark refuses the name ``kafka`` for a Python data source: see
``KafkaDataSource``.

Layering: imports pyspark, pyarrow, numpy, fastavro and confluent-kafka, and of tickwheel only
``log`` (record batch framing and codecs), ``protocol`` (kio's schemas) and
``timer._build`` (the switch to pure Python and the twins' folder name).
Module roles: ``_options`` (parse), ``_offsets`` (checkpoint offsets, admission
control), ``_clients`` (librdkafka clients), ``_reader`` (driver planning), ``_fetch``
(executor reads: ``_wire_fetch`` fetches record batches, ``_batch_decode`` and
``_record_scan`` turn them into Arrow, ``_scan_build`` picks the scan's compiled twin or
the pure module; ``_consumer_fetch`` is the librdkafka fallback),
``_writer`` (sink), ``_produce`` (rows to records),
``_exactly_once`` (the transactional sink), ``_schema`` (columns), ``_source`` (the data
source), ``_session`` (a loopback local session); for keys and values in the
schema registry's Avro (``keyFormat``/``valueFormat=avro``), ``_registry_client`` (its
REST calls), ``_avro_types`` (Avro and Spark types), ``_avro_read`` (typed columns) and
``_avro_write`` (Confluent-framed records).
"""

from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._fetch import OffsetRange
from tickwheel.spark._offsets import offsets_behind_latest
from tickwheel.spark._options import SinkOptions, SourceOptions
from tickwheel.spark._reader import KafkaBatchReader, KafkaStreamReader
from tickwheel.spark._schema import source_schema
from tickwheel.spark._session import local_session, register
from tickwheel.spark._source import FORMAT_NAME, KafkaDataSource
from tickwheel.spark._writer import KafkaBatchWriter, KafkaCommitMessage, KafkaStreamWriter

__all__ = [
    "FORMAT_NAME",
    "KafkaBatchReader",
    "KafkaBatchWriter",
    "KafkaCommitMessage",
    "KafkaDataSource",
    "KafkaStreamReader",
    "KafkaStreamWriter",
    "OffsetRange",
    "SinkOptions",
    "SourceOptions",
    "SparkKafkaError",
    "local_session",
    "offsets_behind_latest",
    "register",
    "source_schema",
]
