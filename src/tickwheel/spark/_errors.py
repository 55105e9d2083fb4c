"""The one error type of ``tickwheel.spark``.

Every failure this layer raises on purpose -- a bad option, lost data under
``failOnDataLoss=true``, a record Kafka would not take -- is a ``SparkKafkaError`` whose
message names the option or the topic-partition and offsets involved. Spark wraps it
(``StreamingQueryException`` or ``PythonException``) with the message kept intact.

Concurrency: plain immutable exception objects; safe anywhere.
"""

from __future__ import annotations


class SparkKafkaError(Exception):
    """A Kafka source or sink failure; ``error_code`` is Kafka's numeric code when known."""

    def __init__(self, message: str, *, error_code: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
