"""tickwheel.coordinator: Kafka's three coordinators, one room each, and what they share.

Each coordinator keeps its state in an internal topic and is led, for a key, by the
leader of the partition the key hashes to. The rooms (Kafka's own split):

- ``group`` -- the group coordinator (``org.apache.kafka.coordinator.group``) over
  ``__consumer_offsets``: the classic protocol and committed offsets at its root, the
  consumer protocol (KIP-848) in ``group.consumer``, share groups' membership (KIP-932)
  in ``group.share``. Group ids are one namespace across the three protocols.
- ``transaction`` -- the transaction coordinator over ``__transaction_state``.
- ``share_state`` -- the share coordinator (``org.apache.kafka.coordinator.share``):
  share groups' durable state in ``__share_group_state``. Share *delivery* (acquisition
  locks, share sessions, DelayedShareFetch) is the broker's, in ``tickwheel.share_delivery``.

What the three share, here at the root:

- ``_hashing`` -- which partition of its topic (and so which broker) coordinates a key.
- ``_locator`` -- ``CoordinatorNode`` and ``CoordinatorLocator``: the broker
  FindCoordinator names.
- ``_batches`` -- the v2 record batches written to the internal topics.
- ``_state_log`` -- reading an internal topic's partition back, record by record.
- ``_errors`` -- the coordinators' errors and their mapping of append errors.

Concurrency: each room's docstring states its own; the shared modules are pure.
"""

from tickwheel.coordinator._errors import CoordinatorError, CorruptOffsetsRecordError
from tickwheel.coordinator._hashing import java_string_hash, partition_for
from tickwheel.coordinator._locator import FIND_COORDINATOR_KEY, CoordinatorLocator, CoordinatorNode

__all__ = [
    "FIND_COORDINATOR_KEY",
    "CoordinatorError",
    "CoordinatorLocator",
    "CoordinatorNode",
    "CorruptOffsetsRecordError",
    "java_string_hash",
    "partition_for",
]
