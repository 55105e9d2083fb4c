"""DescribeLogDirs (key 35) and AlterReplicaLogDirs (key 34): this broker's log directories.

DescribeLogDirs answers, for each ``log.dirs`` entry (its absolute path), NONE with the
volume's total and usable bytes (v4) and the logs it holds of the partitions asked
(``topics`` null: every log), or KAFKA_STORAGE_ERROR with nothing else for an offline
directory. Each log: its size in bytes, its offset lag (a current log's distance below
the high watermark, 0 on a leader; a future log's distance behind the current log's
end) and whether it is the future log of a move. Topics with no log there are left
out, as Kafka's ``describeLogDirs`` does. It needs DESCRIBE on the cluster; otherwise
the answer is CLUSTER_AUTHORIZATION_FAILED (v3's top-level error) with no directory.
v5's ``is_cordoned`` is always false: cordoning log directories is KRaft's.

AlterReplicaLogDirs moves each named partition's log to the directory named
(``ReplicaManager.alter_replica_log_dir`` tells the errors; ``_log_dir_move`` how the
move keeps the partition serving). It needs ALTER on the cluster; otherwise every
partition answers CLUSTER_AUTHORIZATION_FAILED. The answer comes once each move has
started; the move completes in the background (DescribeLogDirs shows its future log).

Written against DescribeLogDirs v5 and AlterReplicaLogDirs v2; older versions convert.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from collections import defaultdict

from kio.schema.alter_replica_log_dirs.v2.request import AlterReplicaLogDirsRequest
from kio.schema.alter_replica_log_dirs.v2.response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kio.schema.describe_log_dirs.v5.request import DescribeLogDirsRequest
from kio.schema.describe_log_dirs.v5.response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.replica import LogDirInfo, TopicPartition
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply


def _result(info: LogDirInfo) -> DescribeLogDirsResult:
    if not info.online:
        return DescribeLogDirsResult(
            error_code=ErrorCode.kafka_storage_error, log_dir=str(info.path), topics=()
        )
    partitions: dict[str, list[DescribeLogDirsPartition]] = defaultdict(list)
    for log in info.logs:
        partitions[log.tp.topic].append(
            DescribeLogDirsPartition(
                partition_index=i32(log.tp.partition),
                partition_size=i64(log.size_bytes),
                offset_lag=i64(log.offset_lag),
                is_future_key=log.is_future,
            )
        )
    return DescribeLogDirsResult(
        error_code=ErrorCode.none,
        log_dir=str(info.path),
        topics=tuple(
            DescribeLogDirsTopic(name=TopicName(topic), partitions=tuple(entries))
            for topic, entries in partitions.items()
        ),
        total_bytes=i64(info.total_bytes),
        usable_bytes=i64(info.usable_bytes),
    )


async def handle_describe_log_dirs(context: BrokerContext, request: DecodedRequest) -> Response:
    """Each log directory, its volume and the logs it holds."""
    body = request.body_as(DescribeLogDirsRequest)
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return reply(
            request,
            DescribeLogDirsResponse(
                throttle_time=NO_THROTTLE,
                error_code=ErrorCode.cluster_authorization_failed,
                results=(),
            ),
        )
    partitions = (
        None
        if body.topics is None
        else {TopicPartition(t.topic, p) for t in body.topics for p in t.partitions}
    )
    described = context.replica_manager.log_manager.describe(partitions)
    return reply(
        request,
        DescribeLogDirsResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            results=tuple(_result(info) for info in described),
        ),
    )


async def handle_alter_replica_log_dirs(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Start moving each named partition's log to its named directory."""
    body = request.body_as(AlterReplicaLogDirsRequest)
    allowed = authorize_cluster(context, request, AclOperation.ALTER)
    errors: dict[str, dict[int, ErrorCode]] = defaultdict(dict)
    for log_dir in body.dirs:
        for topic in log_dir.topics:
            for partition in topic.partitions:
                errors[topic.name][partition] = (
                    context.replica_manager.alter_replica_log_dir(
                        TopicPartition(topic.name, partition), log_dir.path
                    )
                    if allowed
                    else ErrorCode.cluster_authorization_failed
                )
    return reply(
        request,
        AlterReplicaLogDirsResponse(
            throttle_time=NO_THROTTLE,
            results=tuple(
                AlterReplicaLogDirTopicResult(
                    topic_name=TopicName(topic),
                    partitions=tuple(
                        AlterReplicaLogDirPartitionResult(
                            partition_index=i32(index), error_code=error
                        )
                        for index, error in by_index.items()
                    ),
                )
                for topic, by_index in errors.items()
            ),
        ),
    )


LOG_DIR_SPECS = (
    ApiSpec(
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        "AlterReplicaLogDirs",
        VersionRange(1, 2),
        handle_alter_replica_log_dirs,
    ),
    ApiSpec(
        ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", VersionRange(1, 5), handle_describe_log_dirs
    ),
)
