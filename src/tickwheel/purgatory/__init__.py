"""Kafka's delayed-operation purgatory: answer when something happens, or after a timeout.

A ``DelayedOperation`` is a request that cannot be answered yet -- a produce waiting
for replicas, a fetch waiting for bytes, a long-poll waiting for a value. Put it in a
``DelayedOperationPurgatory`` under the keys of the events that may complete it; call
``check_and_complete(key)`` when such an event happens; the purgatory's timer
completes it after ``delay_ms`` otherwise. ``on_complete`` runs exactly once either way.

    class WaitForValue(DelayedOperation):
        def try_complete(self) -> bool:
            return box.value is not None and self.force_complete()
        def on_complete(self) -> None:
            reply(box.value)          # None when it timed out
        def on_expiration(self) -> None:
            pass

    with DelayedOperationPurgatory[WaitForValue]("long-poll") as purgatory:
        purgatory.try_complete_else_watch(WaitForValue(5000), ["box"])
        box.value = 42
        purgatory.check_and_complete("box")   # -> 1, reply(42) has run

The modules, lowest first: ``_keys`` (Kafka's watch keys), ``_operation``
(``DelayedOperation``), ``_watchers`` (per-key lists in shards), ``_reaper`` (the
``ExpirationReaper`` thread), ``_purgatory`` (``DelayedOperationPurgatory``; its
docstring tells the design, the purge, the threaded and event-loop modes and the
concurrency contract). Depends only on the standard library and ``tickwheel.timer``.
"""

from typing import TYPE_CHECKING

from tickwheel.timer._build import COMPILED

if TYPE_CHECKING or not COMPILED:
    from tickwheel.purgatory._keys import GroupJoinKey, MemberKey, TopicPartitionOperationKey
    from tickwheel.purgatory._operation import DelayedOperation
    from tickwheel.purgatory._purgatory import (
        DEFAULT_PURGE_INTERVAL,
        PURGE_SHARDS_PER_STEP,
        SHARD_COUNT,
        DelayedOperationPurgatory,
    )
    from tickwheel.purgatory._reaper import REAPER_POLL_MS
else:
    from tickwheel.purgatory._mypyc._keys import GroupJoinKey, MemberKey, TopicPartitionOperationKey
    from tickwheel.purgatory._mypyc._operation import DelayedOperation
    from tickwheel.purgatory._mypyc._purgatory import (
        DEFAULT_PURGE_INTERVAL,
        PURGE_SHARDS_PER_STEP,
        SHARD_COUNT,
        DelayedOperationPurgatory,
    )
    from tickwheel.purgatory._mypyc._reaper import REAPER_POLL_MS

__all__ = [
    "DEFAULT_PURGE_INTERVAL",
    "PURGE_SHARDS_PER_STEP",
    "REAPER_POLL_MS",
    "SHARD_COUNT",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "GroupJoinKey",
    "MemberKey",
    "TopicPartitionOperationKey",
]
