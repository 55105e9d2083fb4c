"""Metadata (key 3): brokers, the cluster id, the controller, topics and their leaders.

On a single node this broker is the only broker, the controller, and the leader and
only replica of every partition, except a partition whose log directory failed: that
one is answered LEADER_NOT_AVAILABLE with leader -1 and this broker offline. In a
cluster (``zookeeper.connect``) the answer comes from the cluster's metadata cache:
every live broker, the controller, each partition's leader, replicas and ISR (a
partition without a live leader is answered LEADER_NOT_AVAILABLE with leader -1, never
with a broker missing from the list).
Every topic a client asks for appears in the answer — with
UNKNOWN_TOPIC_OR_PARTITION or INVALID_TOPIC_EXCEPTION when it cannot be served —
because librdkafka, kafka-python and aiokafka all misbehave on a response that leaves
a requested topic out. A null topic list (v1+) means every topic. Each topic carries
its topic id (v10+; the Kafka 4 group protocols' clients need it). A topic may be
asked for by id (v12): as in Kafka's ``handleTopicMetadataRequest``, once any
requested topic carries a non-zero id the request is answered by its ids alone,
whatever names come with them (Kafka's Java admin client sends an id with the name
"", not null), and an unknown id is answered UNKNOWN_TOPIC_ID with the id and a null
name. Before v12 a topic with a null name or a non-zero id makes the request invalid:
every topic is answered INVALID_REQUEST, as Kafka answers the request's error. Unknown
topics are created with the broker defaults when both the request and
``auto.create.topics.enable`` allow it; internal topics never are.

Authorization (Kafka's ``handleTopicMetadataRequest``): a request for all topics lists
only those the principal may DESCRIBE (the others are left out without an audit
line at INFO); a topic asked for by name or id that it may not DESCRIBE is answered
TOPIC_AUTHORIZATION_FAILED (by id: with a null name, so the name does not leak), and an
unknown topic it may not create (CREATE on the cluster or on the topic) is answered
TOPIC_AUTHORIZATION_FAILED rather than created. ``include_topic_authorized_operations``
(v8+) gets each topic's operations the principal may perform, and
``include_cluster_authorized_operations`` (v8-10; DescribeCluster's from v11, KIP-700)
the cluster's, as DescribeCluster answers them (librdkafka's ``DescribeCluster`` asks
through Metadata v10).

The handler is written against version 12's classes: the request is read as v12
(``DecodedRequest.body_as``, the request itself from a v12 client) and each topic's
entry built as v12, then converted to the request's version as it is encoded.

Cost: each topic's entry is encoded once per (version, listener) and kept until the
topic changes (``_topic_metadata``), so a request costs what its topics cost; an entry
with ``topic_authorized_operations`` depends on the principal and is built each time.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Hashable

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
from kio.schema.metadata.v10.response import MetadataResponse as MetadataResponseV10
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from tickwheel.protocol import (
    NO_THROTTLE,
    ApiKey,
    DecodedRequest,
    VersionRange,
    array_item_class,
    convert,
    encode_entity,
    encode_response_with_array,
    response_schema,
)
from tickwheel.replica import NO_LEADER, TopicPartition, is_internal_topic
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import (
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
    cluster_authorized_operations,
)
from tickwheel.server._cluster import auto_create_topic, partition_entries
from tickwheel.server._context import BrokerContext
from tickwheel.server._topics import topic_name_error
from tickwheel.server.apis._common import ApiSpec, Response, reply

_NO_TOPIC_ID = uuid.UUID(int=0)
_FIRST_TOPIC_ID_REQUEST_VERSION = 12
_NO_CONTROLLER = -1
_CLUSTER_OPERATIONS_VERSIONS = VersionRange(8, 10)
"""The versions that carry the cluster's authorized operations (DescribeCluster from v11)."""


def _error_entry(
    error: ErrorCode, name: str | None, topic_id: uuid.UUID | None = None
) -> MetadataResponseTopic:
    return MetadataResponseTopic(
        error_code=error,
        name=None if name is None else TopicName(name),
        topic_id=topic_id,
        partitions=(),
    )


def _unknown_topic_id_entry(
    topic_id: uuid.UUID, error: ErrorCode = ErrorCode.unknown_topic_id
) -> MetadataResponseTopic:
    # Only v12 requests ask by id, and its response's name is nullable.
    return _error_entry(error, None, topic_id)


def _topic_entry(context: BrokerContext, name: str) -> MetadataResponseTopic:
    info = context.topics.topics.get(name)
    if info is None:
        error = (
            ErrorCode.invalid_topic_exception
            if topic_name_error(name)
            else ErrorCode.unknown_topic_or_partition
        )
        return _error_entry(error, name)
    if context.cluster is not None:
        partitions = partition_entries(context.cluster, name, context.request_listener)
    else:
        partitions = local_partitions(context, name, info.num_partitions)
    return MetadataResponseTopic(
        error_code=ErrorCode.none,
        name=TopicName(name),
        topic_id=info.topic_id,
        is_internal=is_internal_topic(name),
        partitions=partitions,
    )


def local_partitions(
    context: BrokerContext, name: str, num_partitions: int
) -> tuple[MetadataResponsePartition, ...]:
    """A topic's partitions on a single node: this broker leads each one it can."""
    broker_id = BrokerId(context.broker_id)
    only_this_broker = (broker_id,)
    partitions = []
    for index in range(num_partitions):
        tp = TopicPartition(name, index)
        partition = context.replica_manager.get_partition(tp)
        epoch = i32(partition.leader_epoch if partition is not None else 0)
        if context.replica_manager.log_manager.is_offline(tp):
            # Its log directory failed and no other replica can lead (Kafka's
            # controller leaves it leaderless): clients wait rather than retry here.
            partitions.append(
                MetadataResponsePartition(
                    error_code=ErrorCode.leader_not_available,
                    partition_index=i32(index),
                    leader_id=BrokerId(NO_LEADER),
                    leader_epoch=epoch,
                    replica_nodes=only_this_broker,
                    isr_nodes=(),
                    offline_replicas=only_this_broker,
                )
            )
            continue
        partitions.append(
            MetadataResponsePartition(
                error_code=ErrorCode.none,
                partition_index=i32(index),
                leader_id=broker_id,
                leader_epoch=epoch,
                replica_nodes=only_this_broker,
                isr_nodes=only_this_broker,
                offline_replicas=(),
            )
        )
    return tuple(partitions)


def _stamp(context: BrokerContext, name: str) -> Hashable | None:
    """What ``name``'s entry is built from, changing whenever the entry would; None for a
    topic this broker does not know (its error entry is not kept)."""
    info = context.topics.topics.get(name)
    if info is None:
        return None
    cluster = context.cluster
    if cluster is not None:
        cache = cluster.cache
        return (info.topic_id, cache.topic_generation(name), cache.broker_generation)
    replica_manager = context.replica_manager
    return (
        info.topic_id,
        info.num_partitions,
        replica_manager.topic_generation(name),
        replica_manager.log_manager.offline_dir_count,
    )


def _topic_bytes(context: BrokerContext, request: DecodedRequest, name: str) -> bytes:
    """``name``'s encoded entry, kept from an earlier request if the topic is unchanged."""
    item_class = array_item_class(response_schema(request.api_key, request.api_version), "topics")
    stamp = _stamp(context, name)
    if stamp is None:
        return encode_entity(item_class, _topic_entry(context, name))
    parts = context.topic_metadata
    listener = context.request_listener
    kept = parts.get(name, request.api_version, listener, stamp)
    if kept is None:
        kept = encode_entity(item_class, _topic_entry(context, name))
        parts.put(name, request.api_version, listener, stamp, kept)
    return kept


def _may_create(context: BrokerContext, request: DecodedRequest, name: str) -> bool:
    """Whether auto-creating ``name`` (if missing and enabled) is allowed: CREATE on
    the cluster, or on the topic."""
    if context.authorizer is None or name in context.topics.topics:
        return True
    if not context.config.auto_create_topics_enable:
        return True
    if authorize_cluster(context, request, AclOperation.CREATE, log_if_denied=False):
        return True
    return authorize(context, request, AclOperation.CREATE, ResourceType.TOPIC, name)


def _entry(
    context: BrokerContext,
    request: DecodedRequest,
    body: MetadataRequest,
    name: str,
    denied: bool,
    by_id: dict[str, uuid.UUID],
) -> bytes:
    if not denied and not body.include_topic_authorized_operations:
        return _topic_bytes(context, request, name)
    if not denied:
        entry = dataclasses.replace(
            _topic_entry(context, name),
            topic_authorized_operations=i32(
                authorized_operations(context, request, ResourceType.TOPIC, name)
            ),
        )
    elif name in by_id:
        entry = _unknown_topic_id_entry(by_id[name], ErrorCode.topic_authorization_failed)
    else:
        entry = _error_entry(ErrorCode.topic_authorization_failed, name)
    item_class = array_item_class(response_schema(request.api_key, request.api_version), "topics")
    return encode_entity(item_class, entry)


async def _auto_create(
    context: BrokerContext, request: DecodedRequest, names: list[str], denied: set[str]
) -> None:
    """Create the missing topics of ``names`` the principal may create; the others it
    may not create join ``denied``."""
    # Internal topics are made by their owner with their own settings
    # (``__consumer_offsets`` by the group coordinator), never by a client.
    for name in names:
        if is_internal_topic(name) or name in denied or topic_name_error(name) is not None:
            continue
        if not _may_create(context, request, name):
            denied.add(name)
        elif context.cluster is not None:
            await auto_create_topic(context, name)
        else:
            context.auto_create_topic(name)


def _requested_ids(body: MetadataRequest) -> list[uuid.UUID]:
    """The non-zero topic ids of the request, each once, in its order; when there is
    any, Kafka answers by them and ignores the names."""
    found = (t.topic_id for t in body.topics or ())
    return list(dict.fromkeys(i for i in found if i is not None and i != _NO_TOPIC_ID))


def _ids_too_early(body: MetadataRequest, version: int) -> bool:
    """Whether a request before v12 names a topic by id or leaves a name null (Kafka
    refuses both: ids are read from v12 only)."""
    if version >= _FIRST_TOPIC_ID_REQUEST_VERSION or body.topics is None:
        return False
    return any(
        t.name is None or (t.topic_id is not None and t.topic_id != _NO_TOPIC_ID)
        for t in body.topics
    )


def _invalid_request(request: DecodedRequest, body: MetadataRequest) -> bytes:
    """Kafka's error answer to a whole Metadata request: each topic INVALID_REQUEST,
    its name ("" for null) and id echoed, no brokers."""
    topics = tuple(
        MetadataResponseTopic(
            error_code=ErrorCode.invalid_request,
            name=TopicName(t.name or ""),
            topic_id=t.topic_id,
            partitions=(),
        )
        for t in body.topics or ()
    )
    return reply(
        request,
        MetadataResponse(
            throttle_time=NO_THROTTLE,
            brokers=(),
            cluster_id=None,
            controller_id=BrokerId(_NO_CONTROLLER),
            topics=topics,
        ),
    )


async def handle_metadata(context: BrokerContext, request: DecodedRequest) -> Response:
    """Describe the cluster and the requested (or all) topics."""
    body = request.body_as(MetadataRequest)
    if _ids_too_early(body, request.api_version):
        return _invalid_request(request, body)
    cluster = context.cluster
    unknown_ids: list[uuid.UUID] = []
    by_id: dict[str, uuid.UUID] = {}
    denied: set[str] = set()
    if body.topics is None:
        names = sorted(context.topics.topics)
        if len(context.topic_metadata) > len(names):
            context.topic_metadata.retain(context.topics.topics)
        if context.authorizer is not None:
            names = sorted(
                authorized_names(
                    context,
                    request,
                    AclOperation.DESCRIBE,
                    ResourceType.TOPIC,
                    names,
                    log_if_denied=False,
                )
            )
    else:
        topic_ids = _requested_ids(body)
        names = [] if topic_ids else [t.name for t in body.topics if t.name is not None]
        for topic_id in topic_ids:
            known = context.topic_name(topic_id)
            if known is None:
                unknown_ids.append(topic_id)
            else:
                names.append(known)
                by_id[known] = topic_id
        if context.authorizer is not None:
            denied = set(names) - authorized_names(
                context, request, AclOperation.DESCRIBE, ResourceType.TOPIC, names
            )
        if body.allow_auto_topic_creation:
            await _auto_create(context, request, names, denied)
    response_class = response_schema(request.api_key, request.api_version)
    item_class = array_item_class(response_class, "topics")
    topics = [_entry(context, request, body, name, name in denied, by_id) for name in names]
    topics += [
        encode_entity(item_class, _unknown_topic_id_entry(topic_id)) for topic_id in unknown_ids
    ]
    rest = MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=_brokers(context),
        cluster_id=context.cluster_id,
        controller_id=BrokerId(
            cluster.cache.live_controller_id() if cluster else context.broker_id
        ),
        topics=(),
    )
    return encode_response_with_array(
        request.correlation_id,
        response_class,
        _with_cluster_operations(context, request, rest),
        "topics",
        topics,
    )


def _with_cluster_operations(
    context: BrokerContext, request: DecodedRequest, rest: MetadataResponse
) -> MetadataResponse | MetadataResponseV10:
    """``rest``, with the cluster's authorized operations for versions that carry them."""
    if (
        not _CLUSTER_OPERATIONS_VERSIONS.min_version
        <= request.api_version
        <= (_CLUSTER_OPERATIONS_VERSIONS.max_version)
    ):
        return rest
    asked = request.body_as(MetadataRequestV10).include_cluster_authorized_operations
    return dataclasses.replace(
        convert(MetadataResponseV10, rest),
        cluster_authorized_operations=i32(
            cluster_authorized_operations(context, request, asked=asked)
        ),
    )


def _brokers(context: BrokerContext) -> tuple[MetadataResponseBroker, ...]:
    """This broker alone, or in a cluster every live broker with the request's listener
    (the endpoint there; a broker without it is left out)."""
    if context.cluster is None:
        endpoint = context.advertised
        return (
            MetadataResponseBroker(
                node_id=BrokerId(context.broker_id), host=endpoint.host, port=i32(endpoint.port)
            ),
        )
    return tuple(
        MetadataResponseBroker(node_id=BrokerId(b.broker_id), host=b.host, port=i32(b.port))
        for b in context.cluster.cache.endpoints(context.request_listener)
    )


METADATA = ApiSpec(ApiKey.METADATA, "Metadata", VersionRange(1, 12), handle_metadata)
