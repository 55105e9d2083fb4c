"""The transaction APIs, answered by the broker's transaction coordinator.

AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions
go to the broker's ``TransactionService`` (``context.transactions``); so do
FindCoordinator with key_type 1 (``_find_coordinator``) and InitProducerId with a
transactional id (``_init_producer_id``). Their versions and handlers live in
``tickwheel.coordinator.transaction``: each API's spec here calls that API's handler
(``TRANSACTION_API_HANDLERS``) directly, and replies with its typed answer at the
version asked.

``start_transactions`` runs at broker start-up after ``start_groups`` (markers the
loaded transactions send may land in ``__consumer_offsets``, whose groups must be
loaded): the service loads every ``__transaction_state`` partition this broker leads.
As in Kafka, the topic is created when the first FindCoordinator for a transactional
id needs it, with ``transaction.state.log.num.partitions`` partitions and Kafka's topic
configs (compacted, uncompressed, ``transaction.state.log.min.isr``,
``transaction.state.log.segment.bytes``); in a cluster with
``transaction.state.log.replication.factor`` replicas and never fewer (while fewer
brokers are alive FindCoordinator answers COORDINATOR_NOT_AVAILABLE, as for
``__consumer_offsets``). In a cluster the coordinator of an id is the leader of its
partition as this broker's metadata cache knows it; the node's leadership listener,
which already tells the group coordinator of ``__consumer_offsets``, fans out to the
transaction coordinator for ``__transaction_state`` (coordinator epoch = the
partition's leader epoch). Markers to partitions another broker leads travel as
WriteTxnMarkers v1 (``tickwheel.cluster.KafkaTxnMarkerTransport``), and a partition
leader's questions to the coordinator of another broker as AddPartitionsToTxn v5
(``KafkaVerificationTransport``, on its own inter-broker channels). With an authorizer,
each request is checked first (``_transaction_authorization``).

Concurrency: event-loop thread only, like every handler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode

from tickwheel.cluster import (
    TXN_MARKERS,
    TXN_VERIFICATION,
    BrokerChannels,
    ClusterNode,
    KafkaTxnMarkerTransport,
)
from tickwheel.coordinator import CoordinatorLocator, CoordinatorNode, partition_for
from tickwheel.coordinator.group import OFFSETS_TOPIC, GroupService
from tickwheel.coordinator.transaction import (
    TRANSACTION_API_HANDLERS,
    TRANSACTION_API_NAMES,
    TRANSACTION_API_VERSIONS,
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionService,
    TxnPartitions,
)
from tickwheel.protocol import ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import NO_LEADER, TopicPartition
from tickwheel.server._context import BrokerContext, BrokerState
from tickwheel.server._time import BrokerTime
from tickwheel.server.apis._common import ApiSpec, Response, reply
from tickwheel.server.apis._internal_topics import chain_leadership, internal_topic_leader
from tickwheel.server.apis._transaction_authorization import authorized_transaction_handler

_ADD_PARTITIONS_TO_TXN_VERSION = 5


class KafkaVerificationTransport:
    """The ``PartitionVerifier``'s ``VerificationTransport``: AddPartitionsToTxn v5, one
    channel per coordinator broker (one request at a time on each)."""

    def __init__(self, channels: BrokerChannels) -> None:
        self._channels = channels

    async def add_partitions_to_txn(
        self, broker_id: int, transactions: Sequence[TxnPartitions]
    ) -> dict[str, dict[TopicPartition, ErrorCode]]:
        """Ask ``broker_id``; ``{transactional_id: {tp: error}}``. A failed request
        closes the channel (the next one reconnects) and raises; a top-level error
        answers every partition with it."""
        entries = []
        for question in transactions:
            by_topic: dict[str, list[int]] = {}
            for tp in question.partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            entries.append(
                {
                    "transactional_id": question.transactional_id,
                    "producer_id": question.producer_id,
                    "producer_epoch": question.producer_epoch,
                    "verify_only": question.verify_only,
                    "topics": [
                        {"name": topic, "partitions": partitions}
                        for topic, partitions in by_topic.items()
                    ],
                }
            )
        try:
            body = await self._channels.get(broker_id).request(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                _ADD_PARTITIONS_TO_TXN_VERSION,
                {"transactions": entries},
            )
        except BaseException:
            await self._channels.drop(broker_id)
            raise
        if body.error_code != ErrorCode.none:
            return {
                q.transactional_id: dict.fromkeys(q.partitions, ErrorCode(body.error_code))
                for q in transactions
            }
        return {
            result.transactional_id: {
                TopicPartition(topic.name, int(p.partition_index)): ErrorCode(
                    p.partition_error_code
                )
                for topic in result.topic_results
                for p in topic.results_by_partition
            }
            for result in body.results_by_transaction
        }

    async def close(self) -> None:
        """Close every connection."""
        await self._channels.close()


def start_transactions(
    context: BrokerState, broker_time: BrokerTime, groups: GroupService
) -> TransactionService:
    """Start this broker's transaction coordinator over its ``__transaction_state``;
    ``groups`` tells where a group's offsets live."""
    config = TransactionConfig.from_properties(context.config.as_properties())
    existing = context.topics.topics.get(TRANSACTION_STATE_TOPIC)
    topic_configs = config.topic_configs()

    def offsets_partition(group_id: str) -> TopicPartition:
        count = groups.config.offsets_topic_num_partitions
        offsets = context.topics.topics.get(OFFSETS_TOPIC)
        if offsets is not None:
            count = offsets.num_partitions
        return TopicPartition(OFFSETS_TOPIC, partition_for(group_id, count))

    def advertised() -> CoordinatorNode:
        endpoint = context.advertised
        return CoordinatorNode(context.broker_id, endpoint.host, endpoint.port)

    cluster = context.cluster
    if cluster is None:

        def create_topic() -> None:
            if TRANSACTION_STATE_TOPIC in context.topics.topics:
                return
            context.create_topic(
                TRANSACTION_STATE_TOPIC, config.transaction_state_log_num_partitions, topic_configs
            )

        def partition_exists(topic: str, partition: int) -> bool:
            info = context.topics.topics.get(topic)
            return info is not None and 0 <= partition < info.num_partitions

        async def allocate_local() -> int:
            return context.topics.allocate_producer_id()

        service = TransactionService(
            config,
            context.replica_manager,
            broker_id=context.broker_id,
            timers=broker_time.timers,
            clock_ms=broker_time.wall_clock_ms,
            allocate_producer_id=allocate_local,
            partition_exists=partition_exists,
            offsets_partition=offsets_partition,
            advertised=advertised,
            create_topic=create_topic,
        )
    else:
        service = TransactionService(
            config,
            context.replica_manager,
            broker_id=context.broker_id,
            timers=broker_time.timers,
            clock_ms=broker_time.wall_clock_ms,
            allocate_producer_id=cluster.allocate_producer_id,
            partition_exists=lambda topic, partition: cluster.cache.contains_partition(
                TopicPartition(topic, partition)
            ),
            offsets_partition=offsets_partition,
            locate=_cluster_locator(context, cluster, config),
            leader_of=_cluster_leader_lookup(cluster),
            transport=KafkaTxnMarkerTransport(
                cluster.inter_broker_channels(
                    TXN_MARKERS.client_id(context.broker_id), config.request_timeout_ms
                )
            ),
            verification_transport=KafkaVerificationTransport(
                cluster.inter_broker_channels(
                    TXN_VERIFICATION.client_id(context.broker_id), config.request_timeout_ms
                )
            ),
        )
        chain_leadership(cluster, TRANSACTION_STATE_TOPIC, service.on_elected, service.on_resigned)
    if existing is not None:
        service.state.partition_count = existing.num_partitions
    service.start()
    return service


def _cluster_leader_lookup(cluster: ClusterNode) -> Callable[[TopicPartition], int | None]:
    def leader_of(tp: TopicPartition) -> int | None:
        if tp.topic not in cluster.cache.topics:
            return None
        leader = cluster.cache.leader(tp)
        return NO_LEADER if leader < 0 else leader

    return leader_of


def _cluster_locator(
    context: BrokerState, cluster: ClusterNode, config: TransactionConfig
) -> CoordinatorLocator:
    """The leader of a ``__transaction_state`` partition per the metadata cache, on the
    listener of the request being handled."""

    def locate(partition: int) -> CoordinatorNode | None:
        leader = internal_topic_leader(
            cluster,
            TopicPartition(TRANSACTION_STATE_TOPIC, partition),
            num_partitions=config.transaction_state_log_num_partitions,
            replication_factor=config.transaction_state_log_replication_factor,
            configs=config.topic_configs(),
            replication_setting="transaction.state.log.replication.factor",
            listener_name=context.request_listener,
        )
        return (
            None if leader is None else CoordinatorNode(leader.broker_id, leader.host, leader.port)
        )

    return locate


def _transaction_spec(api_key: int, versions: VersionRange) -> ApiSpec:
    """API ``api_key`` answered by the transaction coordinator's handler for it."""
    handler = TRANSACTION_API_HANDLERS[api_key]
    authorized = authorized_transaction_handler(api_key)

    async def handle(context: BrokerContext, request: DecodedRequest) -> Response:
        transactions = context.transactions
        if context.authorizer is not None:
            return await authorized(context, transactions, request)
        return reply(request, await handler(transactions.apis, request))

    return ApiSpec(api_key, TRANSACTION_API_NAMES[api_key], versions, handle)


TRANSACTION_SPECS: tuple[ApiSpec, ...] = tuple(
    _transaction_spec(api_key, versions) for api_key, versions in TRANSACTION_API_VERSIONS.items()
)
