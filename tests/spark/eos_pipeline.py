"""A Spark driver for the exactly-once kill test, run as its own process.

    python eos_pipeline.py BOOTSTRAP SOURCE_TOPIC SINK_TOPIC CHECKPOINT MAX_OFFSETS

Copies ``key`` and ``value`` of every record of SOURCE_TOPIC to SINK_TOPIC through the
exactly-once sink, in micro-batches of at most MAX_OFFSETS records
(``Trigger.AvailableNow``), on the given checkpoint. Prints ``started`` once the query
runs, ``batch N`` when Spark reports micro-batch N's progress (after its commit), and
``done`` when it has caught up; the test SIGKILLs it in between.
"""

from __future__ import annotations

import sys

from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

from tickwheel.spark import FORMAT_NAME, local_session

# Bounds how long an abandoned transaction can hold read_committed readers back.
TRANSACTION_TIMEOUT_MS = "15000"


class _PrintProgress(StreamingQueryListener):
    def onQueryStarted(self, event: QueryStartedEvent) -> None:  # noqa: N802 (Spark API)
        pass

    def onQueryProgress(self, event: QueryProgressEvent) -> None:  # noqa: N802 (Spark API)
        print(f"batch {event.progress.batchId}", flush=True)

    def onQueryIdle(self, event: QueryIdleEvent) -> None:  # noqa: N802 (Spark API)
        pass

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:  # noqa: N802 (Spark API)
        pass


def main(argv: list[str]) -> int:
    bootstrap, source, sink, checkpoint, max_offsets = argv
    spark = local_session("tickwheel-eos-kill-test")
    spark.streams.addListener(_PrintProgress())
    query = (
        spark.readStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_offsets)
        .load()
        .select("key", "value")
        .writeStream.format(FORMAT_NAME)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.transaction.timeout.ms", TRANSACTION_TIMEOUT_MS)
        .option("topic", sink)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    print("started", flush=True)
    query.awaitTermination()
    print("done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
