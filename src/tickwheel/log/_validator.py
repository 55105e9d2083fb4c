"""The rules a leader enforces on producers' batches before it assigns their offsets.

Kafka's ``LogValidator`` for magic 2, as far as it applies to batches kept as opaque
bytes: ``check_client_batches`` reads only the headers that ``tickwheel.record``
already framed and CRC-checked (``parse_batches``), and raises the Kafka error a
producer gets for a batch that is too large, carries an unknown codec, contradicts its
own record count, is a control batch, or is transactional without a producer id.

Concurrency: a pure function over headers; thread-safe.
"""

from __future__ import annotations

from typing import Final

from tickwheel.log._errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError
from tickwheel.log._index import NO_TIMESTAMP
from tickwheel.record import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
)

# none, gzip, snappy, lz4, zstd
MAX_COMPRESSION_CODEC: Final = 4
# The smallest record: length, attributes, timestamp delta, offset delta, key length,
# value length and header count, one byte each.
MIN_RECORD_BYTES: Final = 7


def check_client_batches(
    batches: list[tuple[int, BatchHeader]], max_message_bytes: int, *, allow_control: bool = False
) -> tuple[int, int, bool]:
    """Apply the rules a leader enforces on producers' batches; raise the Kafka error.

    Returns the payload's offset count (records, and a marker's one record), its
    largest max timestamp (-1 if none) and whether any batch carries a producer id.
    Transactional batches need a producer id; control batches (transaction markers)
    are refused unless ``allow_control`` (the broker's own coordinators append them):
    "clients are not allowed to write control records", as Kafka's validator says.
    """
    num_messages = 0
    max_timestamp = NO_TIMESTAMP
    idempotent = False
    for _, header in batches:
        # One unpack instead of a field lookup per rule: this runs for every produced batch.
        _, length, _, _, _, attributes, delta, _, timestamp, producer, _, sequence, count = header
        size_bytes = length + LOG_OVERHEAD
        if size_bytes > max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {size_bytes} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        codec = attributes & COMPRESSION_CODEC_MASK
        if codec > MAX_COMPRESSION_CODEC:
            raise CorruptRecordError(f"unknown compression codec {codec}")
        if count <= 0 or delta + 1 != count:
            raise InvalidRecordError(
                f"record count {count} is not positive or disagrees with the last offset "
                f"delta {delta}"
            )
        if codec == 0 and size_bytes - RECORD_BATCH_OVERHEAD < count * MIN_RECORD_BYTES:
            raise InvalidRecordError(f"{count} records cannot fit in a {size_bytes}-byte batch")
        control = attributes & CONTROL_FLAG_MASK
        if control and not allow_control:
            raise InvalidRecordError("clients may not write control batches")
        if attributes & TRANSACTIONAL_FLAG_MASK and producer <= NO_PRODUCER_ID:
            raise InvalidRecordError("a transactional batch must carry a producer id")
        if producer > NO_PRODUCER_ID:
            if sequence < 0 and not control:
                raise InvalidRecordError(f"invalid base sequence {sequence}")
            idempotent = True
        num_messages += count
        # A comparison, not max(): the builtin call would cost more than the test.
        if timestamp > max_timestamp:  # noqa: PLR1730
            max_timestamp = timestamp
    return num_messages, max_timestamp, idempotent
