"""Transaction timeouts and transactional id expiration as timer tasks.

Kafka scans every cached transaction every
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (10 s) for Ongoing ones
past ``txnStartTimestamp + txnTimeoutMs``, and every
``transaction.remove.expired.transaction.cleanup.interval.ms`` (1 h) for ids idle for
``transactional.id.expiration.ms``. Here each deadline is one ``TimerTask`` on a timer
of the broker's ``LoopTimers`` (hierarchical wheel; O(1) to add or cancel), so an abort
happens within a tick of its deadline and a ``ManualClock`` test fires it exactly:

- ``TxnTimeoutTask``: armed when a transaction starts (a completed or Empty id becomes
  Ongoing) for ``start + transaction.timeout.ms - now``; cancelled when the transaction
  reaches PrepareCommit or PrepareAbort (not when EndTxn arrives: if its append fails,
  the transaction is still Ongoing and must still time out), and when the id's
  partition is unloaded; re-armed for every Ongoing transaction a load finds.
- ``TxnExpirationTask``: armed whenever an id enters or is updated in a state that may
  expire (Empty, CompleteCommit, CompleteAbort), for ``last_update +
  transactional.id.expiration.ms - now``; cancelled when it leaves those states.

Running a task only calls back into the coordinator, which re-checks everything (the
transaction may have moved on since). Concurrency: event-loop thread only (the timer's
``InlineExecutor`` runs tasks on the loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tickwheel.coordinator.transaction._metadata import TransactionMetadata, TransactionState
from tickwheel.timer import SystemTimer, TimerTask

TimeoutCallback = Callable[[str, int, int, int], None]
"""``(transactional_id, producer_id, producer_epoch, txn_start_timestamp)`` timed out."""
ExpirationCallback = Callable[[str], None]
"""``transactional_id`` may have expired."""

_STARTS_TRANSACTION = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)
_ENDS_TRANSACTION = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})


class TxnTimeoutTask(TimerTask):
    """Abort one transaction if it is still the same Ongoing one when this runs."""

    __slots__ = ("_callback", "producer_epoch", "producer_id", "start_ms", "transactional_id")

    def __init__(
        self,
        callback: TimeoutCallback,
        metadata: TransactionMetadata,
        delay_ms: int,
    ) -> None:
        super().__init__(delay_ms)
        self._callback = callback
        self.transactional_id = metadata.transactional_id
        self.producer_id = metadata.producer_id
        self.producer_epoch = metadata.producer_epoch
        self.start_ms = metadata.txn_start_timestamp

    def run(self) -> None:
        self._callback(self.transactional_id, self.producer_id, self.producer_epoch, self.start_ms)


class TxnExpirationTask(TimerTask):
    """Expire one transactional id if it is still idle when this runs."""

    __slots__ = ("_callback", "transactional_id")

    def __init__(self, callback: ExpirationCallback, transactional_id: str, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._callback = callback
        self.transactional_id = transactional_id

    def run(self) -> None:
        self._callback(self.transactional_id)


class TxnTimeouts:
    """The timeout and expiration tasks of the transactions a coordinator caches."""

    def __init__(
        self,
        timer: SystemTimer,
        *,
        expiration_ms: int,
        on_timeout: TimeoutCallback,
        on_expiration: ExpirationCallback,
    ) -> None:
        self.timer = timer
        self._expiration_ms = expiration_ms
        self._on_timeout = on_timeout
        self._on_expiration = on_expiration
        self._timeouts: dict[str, TxnTimeoutTask] = {}
        self._expirations: dict[str, TxnExpirationTask] = {}

    @property
    def pending_timeouts(self) -> int:
        """Ongoing transactions whose timeout is armed."""
        return len(self._timeouts)

    def timeout_task(self, transactional_id: str) -> TxnTimeoutTask | None:
        """The armed timeout of ``transactional_id``, if any."""
        return self._timeouts.get(transactional_id)

    def expiration_task(self, transactional_id: str) -> TxnExpirationTask | None:
        """The armed expiration of ``transactional_id``, if any."""
        return self._expirations.get(transactional_id)

    def on_transition(
        self, metadata: TransactionMetadata, previous: TransactionState, now_ms: int
    ) -> None:
        """Arm or cancel after ``metadata`` moved from ``previous`` to its state."""
        state = metadata.state
        if state is TransactionState.ONGOING and previous in _STARTS_TRANSACTION:
            self.arm_timeout(metadata, now_ms)
        elif state in _ENDS_TRANSACTION:
            self.cancel_timeout(metadata.transactional_id)
        self.on_loaded(metadata, now_ms, timeout=False)

    def on_loaded(
        self, metadata: TransactionMetadata, now_ms: int, *, timeout: bool = True
    ) -> None:
        """Arm what a loaded (or just changed) id needs."""
        if timeout and metadata.state is TransactionState.ONGOING:
            self.arm_timeout(metadata, now_ms)
        if metadata.state.expiration_allowed:
            self.arm_expiration(metadata, now_ms)
        else:
            self.cancel_expiration(metadata.transactional_id)

    def arm_timeout(self, metadata: TransactionMetadata, now_ms: int) -> None:
        """Abort the Ongoing transaction at ``start + timeout`` (at once if past)."""
        self.cancel_timeout(metadata.transactional_id)
        deadline = metadata.txn_start_timestamp + metadata.txn_timeout_ms
        task = TxnTimeoutTask(self._on_timeout, metadata, max(deadline - now_ms, 0))
        self._timeouts[metadata.transactional_id] = task
        self.timer.add(task)

    def rearm_timeout(self, metadata: TransactionMetadata, delay_ms: int) -> None:
        """Look at the transaction again in ``delay_ms`` (a transition was pending)."""
        self.cancel_timeout(metadata.transactional_id)
        task = TxnTimeoutTask(self._on_timeout, metadata, delay_ms)
        self._timeouts[metadata.transactional_id] = task
        self.timer.add(task)

    def cancel_timeout(self, transactional_id: str) -> None:
        """Forget the id's timeout."""
        task = self._timeouts.pop(transactional_id, None)
        if task is not None:
            task.cancel()

    def timeout_fired(self, transactional_id: str) -> None:
        """The id's timeout task ran: it is no longer armed."""
        self._timeouts.pop(transactional_id, None)

    def arm_expiration(self, metadata: TransactionMetadata, now_ms: int) -> None:
        """Expire the id ``transactional.id.expiration.ms`` after its last update."""
        self.arm_expiration_in(
            metadata.transactional_id,
            max(metadata.txn_last_update_timestamp + self._expiration_ms - now_ms, 0),
        )

    def arm_expiration_in(self, transactional_id: str, delay_ms: int) -> None:
        """Look at the id's expiration again in ``delay_ms``."""
        self.cancel_expiration(transactional_id)
        task = TxnExpirationTask(self._on_expiration, transactional_id, delay_ms)
        self._expirations[transactional_id] = task
        self.timer.add(task)

    def cancel_expiration(self, transactional_id: str) -> None:
        """Forget the id's expiration."""
        task = self._expirations.pop(transactional_id, None)
        if task is not None:
            task.cancel()

    def expiration_fired(self, transactional_id: str) -> None:
        """The id's expiration task ran: it is no longer armed."""
        self._expirations.pop(transactional_id, None)

    def cancel_all(self, transactional_ids: Iterable[str]) -> None:
        """Forget every task of ``transactional_ids`` (their partition was unloaded)."""
        for transactional_id in transactional_ids:
            self.cancel_timeout(transactional_id)
            self.cancel_expiration(transactional_id)
