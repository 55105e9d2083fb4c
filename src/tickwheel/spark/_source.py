"""``KafkaDataSource``: the PySpark data source named ``tickwheel``.

It builds the readers and writers of this package from the options Spark hands it,
checking the options (and a sink's columns) on the driver, before any task runs. With an
Avro key or value (``keyFormat`` / ``valueFormat``), ``schema()`` asks the registry for
the subject's latest version (``_avro_read``), and a sink registers its schema when it
is built (``_avro_write``).

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

from tickwheel.spark import _avro_read, _avro_write
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import SinkOptions, SourceOptions, source_formats
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
        columns = _avro_read.plan_columns(source_formats(self.options))
        return source_schema(include_headers=include, column_types=_avro_read.column_types(columns))

    def reader(self, schema: StructType) -> DataSourceReader:
        options = SourceOptions.parse(self.options, streaming=False)
        return KafkaBatchReader(options, avro=_planned_avro(options, schema), schema=schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (Spark API)
        options = SourceOptions.parse(self.options, streaming=True)
        return KafkaStreamReader(options, avro=_planned_avro(options, schema), schema=schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = self._sink_options(schema, overwrite)
        if options.exactly_once:
            raise SparkKafkaError("exactlyOnce=true is for streaming queries (writeStream)")
        return KafkaBatchWriter(options, avro=_avro_write.plan_columns(options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 (Spark API)
        options = self._sink_options(schema, overwrite)
        return KafkaStreamWriter(options, avro=_avro_write.plan_columns(options, schema))

    def _sink_options(self, schema: StructType, overwrite: bool) -> SinkOptions:
        if overwrite:
            raise SparkKafkaError("Kafka topics are append-only: write with mode 'append'")
        options = SinkOptions.parse(self.options)
        check_sink_schema(
            schema, default_topic=options.topic, avro_columns=options.formats.avro_columns()
        )
        return options


def _planned_avro(options: SourceOptions, schema: StructType) -> tuple[_avro_read.AvroColumn, ...]:
    """The source's Avro columns, checked against the ``schema`` Spark planned with: a
    subject given a new version between ``schema()`` and now fails the query here."""
    columns = _avro_read.plan_columns(options.formats)
    planned = {field.name: field.dataType for field in schema.fields}
    for column, data_type in _avro_read.column_types(columns).items():
        found = planned.get(column)
        if found is None or found.simpleString() != data_type.simpleString():
            raise SparkKafkaError(
                f"the {column} column's type is not that of the latest version of"
                f" {_avro_read.subject_name(options.formats.topic or '', column)!r}"
                f" ({data_type.simpleString()}): a version registered while the query was"
                " planned, or a schema given to the reader; run the query again without one"
            )
    return columns
