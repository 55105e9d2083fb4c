"""``KafkaDataSource``: the PySpark data source named ``tickwheel``.

It builds the readers and writers of this package from the options Spark hands it,
checking the options (and a sink's columns) on the driver, before any task runs.

Why not also ``format("kafka")``: Spark 4 refuses the name. ``spark.dataSource.register``
first asks Spark's own lookup whether ``kafka`` exists, and without the JVM connector
that lookup fails with ``KAFKA_DATA_SOURCE_NOT_ENABLED`` rather than
``DATA_SOURCE_NOT_FOUND``, which registration reports as
``DATA_SOURCE_ALREADY_EXISTS``. Putting the source into Spark's data source manager
behind its back does not help: ``spark.read``/``readStream``/``write``/``writeStream``
resolve built-in names first and fail with ``KAFKA_DATA_SOURCE_NOT_ENABLED`` before
looking at Python sources. (Measured on PySpark 4.3.0.) So a pipeline moves between
Spark's connector and this one by changing ``"kafka"`` to ``"tickwheel"``; every option
and column stays the same.

Concurrency: Spark constructs and calls a data source on the driver, one call at a time.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import SinkOptions, SourceOptions
from tickwheel.spark._reader import KafkaBatchReader, KafkaStreamReader
from tickwheel.spark._schema import check_sink_schema, source_schema
from tickwheel.spark._writer import KafkaBatchWriter, KafkaStreamWriter

FORMAT_NAME = "tickwheel"


class KafkaDataSource(DataSource):
    """Kafka topics as a Spark source and sink, with the options of Spark's connector."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        include = self.options.get("includeHeaders", "false").strip().lower() == "true"
        return source_schema(include_headers=include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark API)
        return KafkaStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._sink_options(schema, overwrite)
        if options.exactly_once:
            raise SparkKafkaError("exactlyOnce=true is for streaming queries (writeStream)")
        return KafkaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 (Spark API)
        return KafkaStreamWriter(self._sink_options(schema, overwrite))

    def _sink_options(self, schema: StructType, overwrite: bool) -> SinkOptions:
        if overwrite:
            raise SparkKafkaError("Kafka topics are append-only: write with mode 'append'")
        options = SinkOptions.parse(self.options)
        check_sink_schema(schema, default_topic=options.topic)
        return options
