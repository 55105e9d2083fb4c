"""Produce (key 0): append record batches to partition leaders.

The handler turns the request into ``TopicPartition -> batch bytes`` and hands it to
``ReplicaManager.append_records``; record batches stay opaque bytes (the log
validates them and assigns offsets). acks=0 gets no response at all (and when it
fails, the connection is closed, as Kafka does, since no response can carry the
error); acks=1 is answered after the append; acks=all waits in the Produce purgatory
(DelayedProduce) until the high watermark covers the appended records, or the
request's timeout. Partitions are answered in the order the request listed them. A
partition whose records the log refuses one by one (a record without a key on a
compacted topic) is answered INVALID_RECORD with each of them in ``record_errors``
and Kafka's summary in ``error_message`` (v8+), as Kafka's ``LogValidator`` answers.

Schema id validation (Confluent's ``confluent.key/value.schema.validation``, Redpanda's
``redpanda.key/value.schema.id.validation``): the partitions of a topic that validates
(``context.schema_validations``, one look-up per partition; none at all while no topic
validates) have their records checked by the schema registry's ``SchemaValidator``
before the append; records it refuses are answered in the same way as the log's
(``refused_records``: INVALID_RECORD, ``record_errors``, ``error_message``), and none
of that partition's records is appended. A validating topic on a broker that no longer
serves a registry refuses its records with INVALID_RECORD and says so.

Transactional batches (Kafka's ``handleProduceRequest`` and ``handleProduceAppend``): a
request whose partitions' first batch is transactional but which names no
``transactional_id`` is refused whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and
one whose transactional batches carry more than one (producer id, epoch) with
INVALID_PRODUCER_ID_MAPPING. The handler peeks at the headers of the whole batches for
that (``tickwheel.record.iter_batches``); the log validates everything else.

Verification (KIP-890, Kafka's ``ReplicaManager.appendRecords``): with
``transaction.partition.verification.enable`` (default true), and always for v12 (whose
client adds no partition itself), the partitions of a
transactional produce on which the producer has no open transaction at its epoch
(``ReplicaManager.start_transaction_verification``) are first put to the transaction
coordinator (``PartitionVerifier``): v3-11 ask whether each is in the ongoing
transaction (part 1), v12 (transaction version 2, part 2) has it added. A partition the
coordinator refuses is not appended: TRANSACTION_ABORTABLE is answered as such from
v11 and as INVALID_TXN_STATE before, PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, and the
coordinator's retriable answers (CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) as
NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh. The others
are appended with their guard; the log refuses one whose guard a marker has dropped
meanwhile. Produce v12 is only sent by clients told ``transaction.version`` 2
(``server._features``); v10 and v11 are v9's request and response with tagged fields.

A partition answered NOT_LEADER_OR_FOLLOWER carries its current leader and that leader's
endpoint (v10+, KIP-951: ``_leader_hints``).

Client quotas: the request's record bytes are recorded against the client's
``producer_byte_rate`` (``context.quotas.produce``) once appended; a client over its
quota gets the throttle time in ``throttle_time_ms`` and its connection is muted for it
(acks=0 included, which has no answer to carry it).

Authorization (Kafka's ``handleProduceRequest``): transactional batches need WRITE on
the transactional id, else the whole request is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE, else its partitions are
answered TOPIC_AUTHORIZATION_FAILED and not appended.

The handler is written against version 9's request class (``DecodedRequest.body_as``:
the request itself from a v9 client, else converted, v10-12 included). The response is written by
``encode_produce_response`` straight from the results (the same bytes as kio's entity
for the version; ``tickwheel.protocol._produce`` tells why): with one message per
request, building and encoding kio's entity cost a third of the broker's CPU per
request.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.request import ProduceRequest

from tickwheel.coordinator.transaction import client_answer
from tickwheel.log import NO_VERIFICATION_GUARD, RecordValidationError, VerificationGuard
from tickwheel.protocol import (
    ApiKey,
    DecodedRequest,
    PartitionAnswer,
    VersionRange,
    encode_produce_response,
)
from tickwheel.record import TRANSACTIONAL_FLAG_MASK, iter_batches
from tickwheel.replica import (
    ACKS_NONE,
    ProducePartitionResult,
    TopicPartition,
    refused_records,
)
from tickwheel.security import AclOperation, ResourceType
from tickwheel.server._authorization import authorize, authorized_names
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._client_quotas import quota_client
from tickwheel.server.apis._common import (
    ApiSpec,
    CloseConnectionError,
    Pending,
    Response,
    to_ms,
)
from tickwheel.server.apis._leader_hints import leader_hints


def _transactional_batches(records: bytes) -> tuple[bool, set[tuple[int, int]]]:
    """Whether the first batch is transactional, and the (producer id, epoch) of every
    transactional batch; a malformed tail is left to the log to refuse."""
    first = False
    producers: set[tuple[int, int]] = set()
    for position, header in iter_batches(records):
        transactional = bool(header.attributes & TRANSACTIONAL_FLAG_MASK)
        if position == 0:
            first = transactional
        if transactional:
            producers.add((header.producer_id, header.producer_epoch))
    return first, producers


def _request_error(
    context: BrokerContext,
    request: DecodedRequest,
    transactional_id: str | None,
    entries: dict[TopicPartition, bytes],
) -> ErrorCode | tuple[int, int] | None:
    """The error refusing the whole request for its transactional batches, if any, else
    the (producer id, epoch) of its transactional batches, if any."""
    any_first = False
    producers: set[tuple[int, int]] = set()
    for records in entries.values():
        first, found = _transactional_batches(records)
        any_first = any_first or first
        producers |= found
    if any_first and (
        transactional_id is None
        or not authorize(
            context, request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        )
    ):
        return ErrorCode.transactional_id_authorization_failed
    if len(producers) > 1:
        return ErrorCode.invalid_producer_id_mapping
    return next(iter(producers), None)


_FIRST_ABORTABLE_VERSION = 11
_FIRST_ADD_PARTITION_VERSION = 12


async def _verify(
    context: BrokerContext,
    request: DecodedRequest,
    transactional_id: str,
    producer: tuple[int, int],
    entries: dict[TopicPartition, bytes],
) -> tuple[dict[TopicPartition, VerificationGuard], dict[TopicPartition, ProducePartitionResult]]:
    """The guards of the partitions to append, and the refusals of the others."""
    producer_id, producer_epoch = producer
    guards: dict[TopicPartition, VerificationGuard] = {}
    for tp in entries:
        guard = context.replica_manager.start_transaction_verification(
            tp, producer_id, producer_epoch
        )
        guards[tp] = NO_VERIFICATION_GUARD if guard is None else guard
    asked = [tp for tp, guard in guards.items() if guard is not NO_VERIFICATION_GUARD]
    if not asked:
        return guards, {}
    answers = await context.transactions.verifier.verify(
        transactional_id,
        producer_id,
        producer_epoch,
        asked,
        add=request.api_version >= _FIRST_ADD_PARTITION_VERSION,
    )
    refused = {
        tp: ProducePartitionResult(
            client_answer(
                error,
                abortable_known=request.api_version >= _FIRST_ABORTABLE_VERSION,
                retriable=ErrorCode.not_enough_replicas,
            )
        )
        for tp, error in answers.items()
        if error != ErrorCode.none
    }
    return guards, refused


def _schema_validated(
    context: BrokerContext, entries: dict[TopicPartition, bytes]
) -> tuple[dict[TopicPartition, bytes], dict[TopicPartition, ProducePartitionResult]]:
    """The partitions to append, and the answers of those whose records schema id
    validation refuses."""
    refused: dict[TopicPartition, ProducePartitionResult] = {}
    if not context.schema_validations:
        return entries, refused
    for tp, records in entries.items():
        validation = context.schema_validations.get(tp.topic)
        if validation is None:
            continue
        hosted = context.replica_manager.get_partition(tp)
        if hosted is None:
            continue  # The append answers it.
        validator = context.schema_validator
        if validator is None:
            refused[tp] = ProducePartitionResult(
                ErrorCode.invalid_record,
                error_message=f"topic {tp.topic} validates schema ids ("
                f"{validation.enabling_config}) but this broker serves no schema registry "
                "(schema.registry.listeners is unset)",
            )
            continue
        errors = validator.record_errors(tp.topic, records, validation.key, validation.value)
        if errors:
            refused[tp] = refused_records(
                RecordValidationError(errors), hosted.log.log_start_offset
            )
    return {tp: records for tp, records in entries.items() if tp not in refused}, refused


async def handle_produce(context: BrokerContext, request: DecodedRequest) -> Response:
    """Append, wait as ``acks`` requires, answer per partition."""
    body = request.body_as(ProduceRequest)
    entries: dict[TopicPartition, bytes] = {}
    invalid: dict[TopicPartition, ProducePartitionResult] = {}
    for topic in body.topic_data:
        for partition in topic.partition_data:
            tp = TopicPartition(topic.name, partition.index)
            if partition.records is None:
                invalid[tp] = ProducePartitionResult(ErrorCode.invalid_record)
            else:
                entries[tp] = partition.records
    request_bytes = sum(map(len, entries.values()))
    checked = _request_error(context, request, body.transactional_id, entries)
    refused = checked if isinstance(checked, ErrorCode) else None
    if refused is None and context.authorizer is not None:
        allowed = authorized_names(
            context,
            request,
            AclOperation.WRITE,
            ResourceType.TOPIC,
            (t.name for t in body.topic_data),
        )
        for tp in [tp for tp in (*entries, *invalid) if tp.topic not in allowed]:
            entries.pop(tp, None)
            invalid[tp] = ProducePartitionResult(ErrorCode.topic_authorization_failed)
    if refused is not None:
        results = {tp: ProducePartitionResult(refused) for tp in (*entries, *invalid)}
        entries = {}
    else:
        guards: dict[TopicPartition, VerificationGuard] | None = None
        if (
            isinstance(checked, tuple)
            and body.transactional_id is not None
            and (
                context.config.transaction_partition_verification_enable
                or request.api_version >= _FIRST_ADD_PARTITION_VERSION
            )
        ):
            guards, unverified = await _verify(
                context, request, body.transactional_id, checked, entries
            )
            invalid.update(unverified)
            entries = {tp: records for tp, records in entries.items() if tp not in unverified}
        entries, unregistered = _schema_validated(context, entries)
        invalid.update(unregistered)
        pending: Pending[dict[TopicPartition, ProducePartitionResult]] = Pending()
        context.replica_manager.append_records(
            to_ms(body.timeout),
            body.acks,
            entries,
            pending.resolve,
            verification_guards=guards,
        )
        results = {**await pending, **invalid}
    for tp, records in entries.items():
        result = results[tp]
        appended = result.error_code == ErrorCode.none
        context.metrics.record_produce(
            tp.topic, len(records) if appended else 0, result.appended_messages
        )
    throttle_ms = context.quotas.produce.record(*quota_client(request), request_bytes)
    if body.acks == ACKS_NONE:
        failed = sorted(str(tp) for tp, r in results.items() if r.error_code != ErrorCode.none)
        if failed:
            raise CloseConnectionError(f"acks=0 produce failed for {', '.join(failed)}")
        return None
    return encode_produce_response(
        request.correlation_id,
        request.api_version,
        [
            (
                topic.name,
                [
                    _partition_answer(p.index, results[TopicPartition(topic.name, p.index)])
                    for p in topic.partition_data
                ],
            )
            for topic in body.topic_data
        ],
        throttle_time_ms=throttle_ms,
        hints=leader_hints(context, ((tp, r.error_code) for tp, r in results.items())),
    )


def _partition_answer(index: int, result: ProducePartitionResult) -> PartitionAnswer:
    return (
        index,
        result.error_code,
        result.base_offset,
        result.log_append_time_ms if result.log_append_time_ms >= 0 else -1,
        result.log_start_offset,
        result.error_message,
        result.record_errors,
    )


# Kafka 4 removed versions 0-2 but still lists Produce from 0 (KAFKA-18659: an older
# librdkafka, such as kcat's 2.0.2, sends batches uncompressed when the list starts at
# 3); a request below 3 closes the connection, as Kafka's request parser refuses it.
PRODUCE = ApiSpec(
    ApiKey.PRODUCE,
    "Produce",
    VersionRange(3, 12),
    handle_produce,
    advertised_min_version=0,
)
