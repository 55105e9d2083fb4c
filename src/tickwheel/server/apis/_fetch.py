"""Fetch (key 1): read partitions, long-polling in the Fetch purgatory.

``ReplicaManager.fetch_messages`` answers at once when there is at least
``min_bytes``, an error, or ``max_wait_ms`` is 0; otherwise a DelayedFetch waits until
an append or a high-watermark move makes enough bytes readable, or the wait ends, and
then reads the log again. The handler is written against version 12's request class
(``DecodedRequest.body_as``: the request itself from a v12 client, else converted, a
partition's ``current_leader_epoch`` before v9 at -1, any). The response is encoded by
hand (``encode_fetch_response``) with the log's record slices as chunks, so the server
can ``sendfile`` them.

read_committed fetches (isolation_level 1) read up to the last stable offset and get
the aborted transactions among what they read, which consumers skip along with the
control batches.

Authorization (Kafka's ``handleFetchRequest``): a follower's fetch (``replica_id`` >= 0)
needs CLUSTER_ACTION on the cluster, a consumer's READ on each topic; the partitions
refused are answered TOPIC_AUTHORIZATION_FAILED and not read.

Client quotas (a consumer's, never a follower's): the fetch's ``max_bytes`` is capped at
what the client's ``consumer_byte_rate`` allows over the quota windows, and the bytes
read are recorded against it (``context.quotas.fetch``); a client over its quota is
answered at once with no data and the throttle time (the read taken back, as Kafka's
``unrecordQuotaSensor``), and its connection is muted for it.

A partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries its current
leader (v12+, KIP-951: ``_leader_hints``); the leaders' endpoints need v16, not served.

Fetch sessions (KIP-227) are not kept: every response carries session id 0, which
tells the client to send full fetch requests.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchRequest

from tickwheel.protocol import (
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    ApiKey,
    DecodedRequest,
    FetchPartitionData,
    FetchTopicData,
    VersionRange,
    encode_fetch_response,
)
from tickwheel.replica import (
    FetchIsolation,
    FetchParams,
    FetchPartitionResult,
    PartitionFetchInfo,
    TopicPartition,
)
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize_cluster, authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._client_quotas import quota_client
from tickwheel.server.apis._common import ApiSpec, Pending, Response, to_ms
from tickwheel.server.apis._leader_hints import leader_hints

_NO_SESSION = 0


async def handle_fetch(context: BrokerContext, request: DecodedRequest) -> Response:
    """Read now or after waiting in the purgatory; answer every requested partition."""
    body = request.body_as(FetchRequest)
    max_bytes: int = body.max_bytes
    client = quota_client(request)
    if body.replica_id < 0:  # a consumer: followers are not held to client quotas
        quota_bytes = context.quotas.fetch.max_value_in_window(*client)
        if quota_bytes is not None:
            max_bytes = max(1, min(max_bytes, int(quota_bytes)))
    params = FetchParams(
        replica_id=body.replica_id,
        max_wait_ms=to_ms(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=max_bytes,
        isolation=FetchIsolation.of(body.replica_id, body.isolation_level),
    )
    fetch_infos = [
        (
            TopicPartition(topic.topic, p.partition),
            PartitionFetchInfo(
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
            ),
        )
        for topic in body.topics
        for p in topic.partitions
    ]
    denied = _refused(context, request, params, {tp.topic for tp, _ in fetch_infos})
    if denied:
        fetch_infos = [(tp, info) for tp, info in fetch_infos if tp.topic not in denied]
    results: dict[TopicPartition, FetchPartitionResult] = {}
    if fetch_infos or not denied:
        pending: Pending[dict[TopicPartition, FetchPartitionResult]] = Pending()
        context.replica_manager.fetch_messages(params, fetch_infos, pending.resolve)
        results = await pending
    refused = FetchPartitionResult(ErrorCode.topic_authorization_failed)
    for topic in body.topics:
        if topic.topic in denied:
            results.update(
                (TopicPartition(topic.topic, p.partition), refused) for p in topic.partitions
            )
    if not params.is_from_follower:
        size_bytes = sum(result.size_bytes for result in results.values())
        throttle_ms = context.quotas.fetch.record(*client, size_bytes)
        if throttle_ms > 0:
            context.quotas.fetch.add(*client, -size_bytes)
            return encode_fetch_response(
                request.correlation_id,
                request.api_version,
                [],
                throttle_time_ms=throttle_ms,
                session_id=_NO_SESSION,
            )
    for tp, result in results.items():
        context.metrics.record_fetch(
            tp.topic, result.size_bytes, from_follower=params.is_from_follower
        )
    leaders = leader_hints(context, ((tp, r.error_code) for tp, r in results.items())).leaders
    topics = [
        FetchTopicData(
            topic.topic,
            [
                _partition_data(
                    p.partition,
                    results[TopicPartition(topic.topic, p.partition)],
                    params.isolation,
                    leaders.get((topic.topic, p.partition)),
                )
                for p in topic.partitions
            ],
        )
        for topic in body.topics
    ]
    return encode_fetch_response(
        request.correlation_id, request.api_version, topics, session_id=_NO_SESSION
    )


def _refused(
    context: BrokerContext, request: DecodedRequest, params: FetchParams, topics: set[str]
) -> set[str]:
    """The topics this fetch may not read."""
    if context.authorizer is None:
        return set()
    if params.is_from_follower:
        allowed = authorize_cluster(context, request, AclOperation.CLUSTER_ACTION)
        return set() if allowed else topics
    return topics - authorized_names(
        context, request, AclOperation.READ, ResourceType.TOPIC, topics
    )


def _partition_data(
    index: int,
    result: FetchPartitionResult,
    isolation: FetchIsolation,
    current_leader: tuple[int, int] | None,
) -> FetchPartitionData:
    # read_committed readers get the aborted transactions overlapping what they read
    # (maybe an empty list), read_uncommitted ones null, as from Kafka.
    aborted = None
    if isolation is FetchIsolation.TXN_COMMITTED:
        found = None if result.data is None else result.data.aborted_transactions
        aborted = found or []
    return FetchPartitionData(
        aborted_transactions=aborted,
        partition_index=index,
        error_code=result.error_code,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        records=None if result.data is None else result.data.records,
        current_leader=current_leader,
    )


FETCH = ApiSpec(
    ApiKey.FETCH, "Fetch", VersionRange(FETCH_MIN_VERSION, FETCH_MAX_VERSION), handle_fetch
)
