"""Share groups' delivery side (KIP-932): the persister interface for share state."""

from tickwheel.share._persister import (
    InMemoryPersister,
    Persister,
    PersisterError,
    PersisterStateBatch,
    RecordState,
    ShareGroupState,
    SharePartitionKey,
)

__all__ = [
    "InMemoryPersister",
    "Persister",
    "PersisterError",
    "PersisterStateBatch",
    "RecordState",
    "ShareGroupState",
    "SharePartitionKey",
]
