"""``ShareSessionCache``: the share sessions of the members fetching from this broker.

Kafka's share sessions (KIP-932, shaped like KIP-227's fetch sessions): a member keeps
one session per group on each broker it fetches from, keyed by (group id, member id).
The session remembers the share-partitions the member fetches, so a request after the
first names only what changed: partitions to add (``topics``) and partitions to drop
(``forgotten_topics_data``). Each request carries the session epoch:

- 0 (``INITIAL_EPOCH``): a ShareFetch opens a new session with the partitions it names
  (replacing any earlier one); it may not acknowledge anything (INVALID_REQUEST).
  A ShareAcknowledge at epoch 0 is INVALID_SHARE_SESSION_EPOCH.
- -1 (``FINAL_EPOCH``): the last request; it may acknowledge but not fetch
  (INVALID_REQUEST if a ShareFetch names partitions); the session then closes, and the
  member's acquired records are released. No session: SHARE_SESSION_NOT_FOUND.
- any other: must equal the session's epoch (else INVALID_SHARE_SESSION_EPOCH; no
  session: SHARE_SESSION_NOT_FOUND); the session then expects the next one (after
  2**31-1 comes 1).

The cache holds at most ``max_sessions`` (``group.share.max.share.sessions``). A
member that left its group normally closes its session with a final request; until it
does, its session is marked departed, and a new session that finds the cache full
evicts the oldest departed one. With none to evict, it gets
SHARE_SESSION_LIMIT_REACHED. A session belongs to the connection that opened it, as in
Kafka: when that connection closes, ``remove_connection`` closes its sessions, so a
client that opens sessions under invented member ids cannot keep the cache full after
it leaves.

Concurrency: the broker's event loop only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

TopicIdPartition = tuple[uuid.UUID, int]


class ShareSessionError(Exception):
    """A request refused by the session rules, with the top-level error code."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name)
        self.error_code = error_code


def next_epoch(epoch: int) -> int:
    """The epoch a session expects after ``epoch``."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    """One member's session: the partitions it fetches and the epoch it must send next."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    # The connection that opened it (None: not known, as in tests without a broker).
    connection_id: int | None = None


class ShareSessionCache:
    """Share sessions by (group id, member id)."""

    def __init__(self, max_sessions: int) -> None:
        self._max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        # Sessions of members that left their group, oldest first.
        self._departed: dict[tuple[str, str], None] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member's session, if open."""
        return self._sessions.get((group_id, member_id))

    def for_fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition],
        forgotten: Iterable[TopicIdPartition],
        *,
        acknowledging: bool,
        connection_id: int | None = None,
    ) -> ShareSession:
        """The session a ShareFetch at ``epoch`` works in, updated with its partitions.

        At FINAL_EPOCH the session is returned unchanged and still open: the caller
        acknowledges, then ``remove``\\ s it. Raises ``ShareSessionError``.
        """
        key = (group_id, member_id)
        added = list(added)
        if epoch == INITIAL_EPOCH:
            if acknowledging:
                raise ShareSessionError(ErrorCode.invalid_request)
            self.remove(group_id, member_id)
            if len(self._sessions) >= self._max_sessions:
                if not self._departed:
                    raise ShareSessionError(ErrorCode.share_session_limit_reached)
                self.remove(*next(iter(self._departed)))
            opened = ShareSession(
                group_id, member_id, partitions=dict.fromkeys(added), connection_id=connection_id
            )
            self._sessions[key] = opened
            return opened
        session = self._sessions.get(key)
        if epoch == FINAL_EPOCH:
            if added:
                raise ShareSessionError(ErrorCode.invalid_request)
            if session is None:
                raise ShareSessionError(ErrorCode.share_session_not_found)
            return session
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found)
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        for partition in added:
            session.partitions[partition] = None
        for partition in forgotten:
            session.partitions.pop(partition, None)
        session.epoch = next_epoch(epoch)
        return session

    def for_acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a ShareAcknowledge at ``epoch`` works in (its epoch moved on unless
        final). Raises ``ShareSessionError``."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(ErrorCode.share_session_not_found)
        if epoch != FINAL_EPOCH:
            if session.epoch != epoch:
                raise ShareSessionError(ErrorCode.invalid_share_session_epoch)
            session.epoch = next_epoch(epoch)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        """Close the member's session; the closed session, or None."""
        self._departed.pop((group_id, member_id), None)
        return self._sessions.pop((group_id, member_id), None)

    def remove_connection(self, connection_id: int) -> list[ShareSession]:
        """Close every session ``connection_id`` opened (it closed); the closed ones."""
        closed = [s for s in self._sessions.values() if s.connection_id == connection_id]
        for session in closed:
            self.remove(session.group_id, session.member_id)
        return closed

    def mark_departed(self, group_id: str, member_id: str) -> None:
        """The member left its group: its session may be evicted when the cache is full."""
        if (group_id, member_id) in self._sessions:
            self._departed[(group_id, member_id)] = None

    def members_of(self, group_id: str) -> list[str]:
        """The members of ``group_id`` with an open session."""
        return [member for group, member in self._sessions if group == group_id]
