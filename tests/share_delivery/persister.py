"""``InMemoryPersister``: share states in a dict, for tests of the share-partitions
without a broker (the broker's persister is durable in ``__share_group_state``)."""

from __future__ import annotations

from tickwheel.share_delivery import ShareGroupState, SharePartitionKey


class InMemoryPersister:
    """A ``Persister`` in a dict: correct in every way but durability."""

    def __init__(self) -> None:
        self.states: dict[SharePartitionKey, ShareGroupState] = {}

    async def read_state(self, key: SharePartitionKey) -> ShareGroupState | None:
        """The state last written for ``key``."""
        return self.states.get(key)

    async def write_state(self, key: SharePartitionKey, state: ShareGroupState) -> None:
        """Keep ``state`` as the state of ``key``."""
        self.states[key] = state

    async def delete_state(self, key: SharePartitionKey) -> None:
        """Drop the state of ``key``."""
        self.states.pop(key, None)
