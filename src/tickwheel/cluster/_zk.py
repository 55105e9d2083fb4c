"""``ZkClient``: the broker's session with ZooKeeper, over ``kazoo``, in Kafka's layout.

``zookeeper.connect`` is Kafka's ``host:port[,host:port...][/chroot]``; the chroot is
created on first use (as Kafka does), then every path is relative to it. The client
offers what a broker needs and nothing more:

- start-up: connect, create the persistent paths, read or create the cluster id;
- ``register_broker``: the ephemeral ``/brokers/ids/<id>``. A broker restarted after
  a crash finds its previous session's node still there until that session expires,
  so it waits for the node to go (at most the session timeout) instead of failing;
  the registration is made again whenever the session is lost and re-established;
- ``create_topic``: one ZooKeeper transaction writing the topic's config, its replica
  assignment and every partition's initial state, so a topic appears whole or not at
  all; ``add_partitions`` extends the assignment conditionally on its version;
  ``set_partition_assignment_fenced`` is the controller's rewrite of one partition's
  replicas (a reassignment), conditional on the topic znode's version and fenced on
  the controller epoch;
- ``set_partition_state``: a partition state written conditionally on its znode
  version; it returns None when the version moved (another writer won);
- ``elect_controller``: the ephemeral ``/controller`` and ``/controller_epoch``;
  ``set_partition_state_fenced`` is the controller's write: one transaction that also
  checks ``/controller_epoch`` is still at the version this controller wrote, so a
  deposed controller can never overwrite a newer one's decision;
- ``claim_producer_id_block``: the next block of producer ids for this broker, taken
  by a conditional write of ``/latest_producer_id_block``, so no id is handed out twice
  in the cluster;
- ``set_entity_config``: a topic's or broker entity's config and a change
  notification under ``/config/changes``, in one transaction, as Kafka's
  ``AdminZkClient.changeConfigs`` writes them (a user's client id's quotas, nested
  under the user's node, after the user's node); every broker watches the
  notifications;
- ``create_features`` and ``set_features``: the finalized feature levels in
  ``/feature``, created once at a new cluster's levels, then replaced conditionally on
  the znode version (the finalized epoch), so two updates never both win;
- watches (``watch_children``, ``watch_data``), which call back with fresh data.

A call made while the session reconnects waits, queued in kazoo, until it is connected
again: with the server gone it only ends (``ConnectionLoss``) when ``stop`` closes the
client, which itself waits for the server's answer or for the connection attempt in
progress (up to the session timeout). The broker bounds both (``ClusterNode.stop``).

Concurrency: every method blocks on ZooKeeper round trips and is meant to be called
from a worker thread (``asyncio.to_thread``), never on the event loop. Watch
callbacks run on kazoo's callback thread; they must hand their data over to the
loop and return quickly.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

# kazoo ships no type information; its values are typed where they enter this module.
from kazoo.client import KazooClient, KazooState  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError  # type: ignore[import-untyped]
from kazoo.protocol.states import ZnodeStat  # type: ignore[import-untyped]

from tickwheel.cluster._znodes import (
    CLUSTER_ID_PATH,
    CONFIG_CHANGES_PATH,
    CONTROLLER_EPOCH_PATH,
    CONTROLLER_PATH,
    FEATURE_PATH,
    PERSISTENT_PATHS,
    PRODUCER_ID_BLOCK_PATH,
    BrokerRegistration,
    ProducerIdBlock,
    TopicAssignment,
    ZnodeError,
    broker_path,
    config_change_path,
    config_change_sequence,
    decode_broker,
    decode_cluster_id,
    decode_partition_state,
    decode_producer_id_block,
    decode_topic,
    decode_topic_config,
    encode_broker,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_features,
    encode_partition_state,
    encode_producer_id_block,
    encode_topic,
    encode_topic_config,
    entity_config_path,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_config_path,
    topic_path,
)
from tickwheel.log import NO_BROKER_EPOCH
from tickwheel.replica import LeaderAndIsr, TopicPartition

_log = logging.getLogger(__name__)
_MS_PER_S = 1000.0
_STALE_REGISTRATION_GRACE_MS = 2000
"""How long past the session timeout a previous session's registration may linger."""

DataCallback = Callable[[bytes | None, ZnodeStat | None], bool | None]
ChildrenCallback = Callable[[list[str]], bool | None]


ZK_UNAVAILABLE: tuple[type[Exception], ...] = (ConnectionLoss, SessionExpiredError)
"""What a call raises when ZooKeeper cannot be reached (the connection lost, the session
expired or closed): an outage to report in one line, not a bug."""


class TopicExistsError(Exception):
    """CreateTopics for a topic already in ZooKeeper."""


class BrokerIdTakenError(Exception):
    """Another live broker registered this broker id."""


class ControllerMovedError(Exception):
    """A controller's write refused: another controller was elected since."""


@dataclass(frozen=True, slots=True)
class ControllerEpoch:
    """A won election: the controller epoch and the version of ``/controller_epoch``."""

    epoch: int
    zk_version: int


@dataclass(frozen=True, slots=True)
class ZkSettings:
    """Kafka's ``zookeeper.*`` settings."""

    connect: str
    session_timeout_ms: int = 18_000
    connection_timeout_ms: int = 18_000


def split_connect(connect: str) -> tuple[str, str]:
    """``zookeeper.connect`` as (hosts, chroot); the chroot is "" when absent."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no host")
    chroot = ("/" + chroot.strip("/")) if slash and chroot.strip("/") else ""
    return hosts, chroot


class ZkClient:
    """One ZooKeeper session of a broker."""

    def __init__(self, settings: ZkSettings) -> None:
        self.settings = settings
        self._hosts, self.chroot = split_connect(settings.connect)
        self._client = KazooClient(
            hosts=self._hosts + self.chroot, timeout=settings.session_timeout_ms / _MS_PER_S
        )
        self._registration: BrokerRegistration | None = None
        self._lost = threading.Event()

    def start(self) -> None:
        """Connect, create the chroot and Kafka's persistent paths.

        Raises ``ConnectionError`` if ZooKeeper does not answer within
        ``zookeeper.connection.timeout.ms``.
        """
        if self.chroot:
            bootstrap = KazooClient(hosts=self._hosts)
            self._connect(bootstrap)
            try:
                bootstrap.ensure_path(self.chroot)
            finally:
                bootstrap.stop()
                bootstrap.close()
        self._connect(self._client)
        self._client.add_listener(self._on_state)
        for path in PERSISTENT_PATHS:
            self._client.ensure_path(path)

    def _connect(self, client: KazooClient) -> None:
        timeout_ms = self.settings.connection_timeout_ms
        try:
            client.start(timeout=timeout_ms / _MS_PER_S)
        except KazooTimeoutError:
            client.close()
            raise ConnectionError(
                f"ZooKeeper at {self._hosts} did not answer within {timeout_ms} ms "
                "(zookeeper.connection.timeout.ms)"
            ) from None

    @property
    def connected(self) -> bool:
        """Whether the session is connected now (not lost, not reconnecting)."""
        return bool(self._client.connected)

    def stop(self) -> None:
        """Close the session (its ephemeral nodes disappear at once)."""
        self._client.remove_listener(self._on_state)
        self._client.stop()
        self._client.close()

    def _on_state(self, state: str) -> None:
        # Called on kazoo's thread; must not block: re-registration is spawned.
        if state == KazooState.LOST:
            self._lost.set()
        elif state == KazooState.CONNECTED and self._lost.is_set() and self._registration:
            self._lost.clear()
            self._client.handler.spawn(self._reregister)

    def _reregister(self) -> None:
        registration = self._registration
        if registration is not None:
            _log.warning("ZooKeeper session re-established; registering broker again")
            self.register_broker(registration)

    # -- cluster id, brokers, controller -----------------------------------------------

    def cluster_id(self, proposed: str) -> str:
        """The cluster id in ZooKeeper, or ``proposed`` after writing it there first."""
        with contextlib.suppress(NodeExistsError):
            self._client.create(CLUSTER_ID_PATH, encode_cluster_id(proposed))
        data, _ = self._client.get(CLUSTER_ID_PATH)
        return decode_cluster_id(data)

    def create_features(self, levels: Mapping[str, int]) -> None:
        """Create ``/feature`` at ``levels`` unless it exists (then it is left as it is)."""
        with contextlib.suppress(NodeExistsError):
            self._client.create(FEATURE_PATH, encode_features(levels))

    def set_features(self, levels: Mapping[str, int], epoch: int) -> int | None:
        """Replace the finalized levels in ``/feature`` if it is still at version
        ``epoch``; the new epoch, or None if another update came first."""
        try:
            stat = self._client.set(FEATURE_PATH, encode_features(levels), version=epoch)
        except (BadVersionError, NoNodeError):
            return None
        return int(stat.version)

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Create ``/brokers/ids/<id>`` for this session, waiting out a stale one;
        returns the broker epoch (the registration's czxid, as in Kafka's ZooKeeper mode)."""
        path = broker_path(registration.broker_id)
        waited = threading.Event()
        limit_s = (self.settings.session_timeout_ms + _STALE_REGISTRATION_GRACE_MS) / _MS_PER_S
        while True:
            try:
                self._client.create(path, encode_broker(registration), ephemeral=True)
                break
            except NodeExistsError:
                stat = self._client.exists(path, watch=lambda _event: waited.set())
                if stat is None:
                    continue
                if stat.ephemeralOwner == self._client.client_id[0]:
                    self._client.set(path, encode_broker(registration))
                    break
                _log.info(
                    "broker id %d is registered by another session; waiting", registration.broker_id
                )
                if not waited.wait(limit_s):
                    raise BrokerIdTakenError(
                        f"broker id {registration.broker_id} is registered by a live session"
                    ) from None
                waited.clear()
        stat = self._client.exists(path)
        epoch = NO_BROKER_EPOCH if stat is None else int(stat.czxid)
        # A registration again after a lost session speaks for this same process, whose
        # logs are intact: it names this incarnation's epoch, a clean one.
        self._registration = replace(registration, previous_broker_epoch=epoch)
        return epoch

    def uncleanly_registered(self, broker_ids: Iterable[int]) -> set[int]:
        """Those of ``broker_ids`` whose registration says their last shutdown was
        unclean (``previous_broker_epoch`` -1), read afresh."""
        unclean = set()
        for broker_id in broker_ids:
            found = self.get(broker_path(broker_id))
            if found is None:
                continue
            with contextlib.suppress(ZnodeError):
                if decode_broker(broker_id, found[0]).previous_broker_epoch == NO_BROKER_EPOCH:
                    unclean.add(broker_id)
        return unclean

    def mark_registered_cleanly(self, broker_ids: Iterable[int]) -> None:
        """Rewrite each broker's registration with its own epoch (czxid) as the previous
        one: its unclean shutdown has been dealt with, and a controller taking over
        later must not deal with it again. Conditional on the znode's version: a
        registration replaced meanwhile is left as it is."""
        for broker_id in broker_ids:
            path = broker_path(broker_id)
            found = self.get(path)
            if found is None:
                continue
            data, stat = found
            try:
                registration = decode_broker(broker_id, data)
            except ZnodeError:
                continue
            marked = replace(registration, previous_broker_epoch=int(stat.czxid))
            with contextlib.suppress(BadVersionError, NoNodeError):
                self._client.set(path, encode_broker(marked), version=stat.version)

    def elect_controller(self, broker_id: int) -> ControllerEpoch | None:
        """Become the controller if there is none; returns the new epoch, or None."""
        try:
            self._client.create(CONTROLLER_PATH, encode_controller(broker_id), ephemeral=True)
        except NodeExistsError:
            return None
        while True:
            try:
                data, stat = self._client.get(CONTROLLER_EPOCH_PATH)
            except NoNodeError:
                try:
                    self._client.create(CONTROLLER_EPOCH_PATH, b"1")
                    return ControllerEpoch(1, 0)
                except NodeExistsError:
                    continue
            epoch = int(data.decode("ascii")) + 1
            try:
                written = self._client.set(
                    CONTROLLER_EPOCH_PATH, str(epoch).encode(), version=stat.version
                )
                return ControllerEpoch(epoch, int(written.version))
            except BadVersionError:
                continue

    def claim_producer_id_block(self, broker_id: int, size: int) -> ProducerIdBlock:
        """The next ``size`` producer ids after the last block handed out, now this broker's."""
        while True:
            found = self.get(PRODUCER_ID_BLOCK_PATH)
            if found is None:
                block = ProducerIdBlock(broker_id, 0, size - 1)
                try:
                    self._client.create(PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block))
                except NodeExistsError:
                    continue
                return block
            data, stat = found
            previous = decode_producer_id_block(data)
            block = ProducerIdBlock(broker_id, previous.last + 1, previous.last + size)
            try:
                self._client.set(
                    PRODUCER_ID_BLOCK_PATH, encode_producer_id_block(block), version=stat.version
                )
            except BadVersionError:
                continue
            return block

    # -- topics and partitions ----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        assignment: TopicAssignment,
        configs: Mapping[str, str],
        states: Mapping[int, LeaderAndIsr],
    ) -> None:
        """Write config, assignment and partition states in one transaction."""
        if self._client.exists(topic_path(name)) is not None:
            raise TopicExistsError(name)
        transaction = self._client.transaction()
        if self._client.exists(topic_config_path(name)) is None:
            transaction.create(topic_config_path(name), encode_topic_config(configs))
        else:
            transaction.set_data(topic_config_path(name), encode_topic_config(configs))
        transaction.create(topic_path(name), encode_topic(assignment))
        transaction.create(partitions_path(name), b"")
        for partition, state in sorted(states.items()):
            transaction.create(partition_path(name, partition), b"")
            transaction.create(partition_state_path(name, partition), encode_partition_state(state))
        results = transaction.commit()
        failures = [r for r in results if isinstance(r, Exception)]
        if any(isinstance(r, NodeExistsError) for r in failures):
            raise TopicExistsError(name)
        if failures:
            raise failures[0]

    def add_partitions(
        self,
        name: str,
        assignment: TopicAssignment,
        expected_version: int,
        states: Mapping[int, LeaderAndIsr],
    ) -> None:
        """Replace the assignment (if still at ``expected_version``) and add new states."""
        transaction = self._client.transaction()
        transaction.set_data(topic_path(name), encode_topic(assignment), version=expected_version)
        for partition, state in sorted(states.items()):
            transaction.create(partition_path(name, partition), b"")
            transaction.create(partition_state_path(name, partition), encode_partition_state(state))
        results = transaction.commit()
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            raise failures[0]

    def set_partition_assignment_fenced(
        self,
        tp: TopicPartition,
        replicas: tuple[int, ...],
        adding: tuple[int, ...],
        removing: tuple[int, ...],
        controller: ControllerEpoch,
        state: LeaderAndIsr | None = None,
    ) -> LeaderAndIsr | None:
        """Rewrite ``tp``'s replicas (and those being added and removed) in its topic's
        assignment, as ``controller``, the other partitions kept as stored; with
        ``state``, write it too (if its znode is still at ``state.version``) in the same
        transaction, after the assignment, so every broker's watches see the new
        replicas first. The stored state, or None (no ``state``, or its znode moved:
        nothing written). A concurrent change of the topic makes it read and write
        again; raises ``ControllerMovedError`` once another controller has been elected,
        and kazoo's ``NoNodeError`` if the topic is gone."""
        path = topic_path(tp.topic)
        while True:
            data, stat = self._client.get(path)
            current = decode_topic(tp.topic, data)

            def replaced(
                partitions: Mapping[int, tuple[int, ...]], value: tuple[int, ...]
            ) -> dict[int, tuple[int, ...]]:
                return {
                    **{p: r for p, r in partitions.items() if p != tp.partition},
                    tp.partition: value,
                }

            written = TopicAssignment(
                replaced(current.partitions, replicas),
                current.topic_id,
                replaced(current.adding, adding),
                replaced(current.removing, removing),
            )
            transaction = self._client.transaction()
            transaction.check(CONTROLLER_EPOCH_PATH, controller.zk_version)
            transaction.set_data(path, encode_topic(written), version=stat.version)
            if state is not None:
                transaction.set_data(
                    partition_state_path(tp.topic, tp.partition),
                    encode_partition_state(state),
                    version=state.version,
                )
            fenced, topic_result, *state_result = transaction.commit()
            if isinstance(fenced, Exception) and not isinstance(fenced, RolledBackError):
                raise ControllerMovedError(
                    f"controller epoch {controller.epoch} is no longer current"
                )
            if isinstance(topic_result, BadVersionError):
                continue
            if state is not None and isinstance(state_result[0], BadVersionError):
                return None
            failures = [
                r
                for r in (topic_result, *state_result)
                if isinstance(r, Exception) and not isinstance(r, RolledBackError)
            ]
            if failures:
                raise failures[0]
            return None if state is None else replace(state, version=int(state_result[0].version))

    def topic_version(self, name: str) -> int:
        """The znode version of the topic's assignment (NoNodeError if it is gone)."""
        _, stat = self._client.get(topic_path(name))
        return int(stat.version)

    def delete_topic(self, name: str) -> None:
        """Remove the topic's assignment, partition states and config."""
        self._client.delete(topic_path(name), recursive=True)
        with contextlib.suppress(NoNodeError):
            self._client.delete(topic_config_path(name))

    def set_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> int:
        """Write an entity's configs and notify every broker; the notification's sequence.

        The config and its notification are one transaction. Another broker creating
        the entity's node first (two first alterations at once) makes it fail with
        NodeExistsError; it is then tried once more, as an update.
        """
        try:
            return self._commit_entity_config(entity_type, name, configs)
        except NodeExistsError:
            return self._commit_entity_config(entity_type, name, configs)

    def _commit_entity_config(self, entity_type: str, name: str, configs: Mapping[str, str]) -> int:
        path = entity_config_path(entity_type, name)
        if "/" in name:
            # A user's client id (``<user>/clients/<client>``): the user's own config
            # node comes first, with no config, as Kafka's ``createRecursive`` makes it.
            user_path = entity_config_path(entity_type, name.split("/", 1)[0])
            with contextlib.suppress(NodeExistsError):
                self._client.create(user_path, encode_topic_config({}))
            self._client.ensure_path(path.rsplit("/", 1)[0])
        transaction = self._client.transaction()
        if self._client.exists(path) is None:
            transaction.create(path, encode_topic_config(configs))
        else:
            transaction.set_data(path, encode_topic_config(configs))
        transaction.create(
            config_change_path(), encode_config_change(entity_type, name), sequence=True
        )
        results = transaction.commit()
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            raise failures[0]
        sequence = config_change_sequence(str(results[-1]).rsplit("/", 1)[-1])
        assert sequence is not None
        return sequence

    def purge_config_changes(self, expiration_ms: int, now_ms: int) -> None:
        """Delete change notifications older than ``expiration_ms`` (every broker has
        read them long since; Kafka keeps them 15 minutes)."""
        for child in self.children(CONFIG_CHANGES_PATH):
            path = f"{CONFIG_CHANGES_PATH}/{child}"
            found = self.get(path)
            if found is not None and now_ms - int(found[1].ctime) > expiration_ms:
                with contextlib.suppress(NoNodeError):
                    self._client.delete(path)

    def entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """An entity's configs as ZooKeeper holds them (empty if it has none)."""
        found = self.get(entity_config_path(entity_type, name))
        return decode_topic_config(name, found[0]) if found else {}

    def set_partition_state(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr | None:
        """Write ``state`` if the znode is still at ``state.version``; the stored state or None."""
        try:
            stat = self._client.set(
                partition_state_path(tp.topic, tp.partition),
                encode_partition_state(state),
                version=state.version,
            )
        except (BadVersionError, NoNodeError):
            return None
        return replace(state, version=int(stat.version))

    def set_partition_state_fenced(
        self, tp: TopicPartition, state: LeaderAndIsr, controller: ControllerEpoch
    ) -> LeaderAndIsr | None:
        """``set_partition_state`` as ``controller``; raises ``ControllerMovedError``
        once another controller has been elected."""
        fenced, written = self._fenced_transaction(tp, state, controller).commit()
        # A failed multi reports the ops before the failing one as rolled back: only a
        # failed check means another controller was elected.
        if isinstance(fenced, Exception) and not isinstance(fenced, RolledBackError):
            raise ControllerMovedError(f"controller epoch {controller.epoch} is no longer current")
        if isinstance(written, Exception):
            return None
        return replace(state, version=int(written.version))

    def set_partition_states_fenced(
        self, states: Sequence[tuple[TopicPartition, LeaderAndIsr]], controller: ControllerEpoch
    ) -> list[LeaderAndIsr | None]:
        """``set_partition_state_fenced`` for many partitions, pipelined: every
        transaction is sent before the first reply is awaited, as Kafka's controller
        sends its ``SetData`` requests, so the batch costs about one round trip rather
        than one per partition. Each is fenced on its own; the result per partition is
        the stored state, or None for one that lost a race. Raises
        ``ControllerMovedError`` once another controller has been elected (the
        transactions before the first fenced one may have been written)."""
        pending = [
            self._fenced_transaction(tp, state, controller).commit_async() for tp, state in states
        ]
        results: list[LeaderAndIsr | None] = []
        moved = False
        for (_, state), reply in zip(states, pending, strict=True):
            fenced, written = reply.get()
            if isinstance(fenced, Exception) and not isinstance(fenced, RolledBackError):
                moved = True
            results.append(
                None
                if isinstance(written, Exception)
                else replace(state, version=int(written.version))
            )
        if moved:
            raise ControllerMovedError(f"controller epoch {controller.epoch} is no longer current")
        return results

    def _fenced_transaction(
        self, tp: TopicPartition, state: LeaderAndIsr, controller: ControllerEpoch
    ) -> Any:
        """A transaction writing ``state`` if its znode is still at ``state.version``
        and ``/controller_epoch`` still ``controller``'s."""
        transaction = self._client.transaction()
        transaction.check(CONTROLLER_EPOCH_PATH, controller.zk_version)
        transaction.set_data(
            partition_state_path(tp.topic, tp.partition),
            encode_partition_state(state),
            version=state.version,
        )
        return transaction

    def partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        """The partition's state as ZooKeeper holds it now, or None if it has none."""
        path = partition_state_path(tp.topic, tp.partition)
        found = self.get(path)
        if found is None:
            return None
        return decode_partition_state(path, found[0], int(found[1].version))

    def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        """A znode's data and stat, or None if it does not exist."""
        try:
            data, stat = self._client.get(path)
        except NoNodeError:
            return None
        return data, stat

    def children(self, path: str) -> list[str]:
        """A znode's children (empty if it does not exist)."""
        try:
            return list(self._client.get_children(path))
        except NoNodeError:
            return []

    def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents where missing."""
        self._client.ensure_path(path)

    def create_node(
        self, path: str, data: bytes, *, sequence: bool = False, makepath: bool = False
    ) -> str:
        """Create a persistent znode (``sequence``: ZooKeeper appends a sequence
        number); its path. Raises kazoo's ``NodeExistsError`` if it exists."""
        return str(self._client.create(path, data, sequence=sequence, makepath=makepath))

    def set_node(self, path: str, data: bytes, version: int) -> None:
        """Write a znode at ``version`` (-1: any); kazoo's ``BadVersionError`` if it moved."""
        self._client.set(path, data, version=version)

    def delete_node(self, path: str, version: int) -> None:
        """Delete a znode at ``version`` (-1: any); kazoo's ``BadVersionError`` if it moved."""
        self._client.delete(path, version=version)

    # -- watches --------------------------------------------------------------------------

    def watch_children(self, path: str, callback: ChildrenCallback) -> None:
        """Call ``callback(children)`` now and on every change (False stops watching)."""
        self._client.ChildrenWatch(path, callback)

    def watch_data(self, path: str, callback: DataCallback) -> None:
        """Call ``callback(data, stat)`` now and on every change; data None: deleted."""
        self._client.DataWatch(path, callback)
