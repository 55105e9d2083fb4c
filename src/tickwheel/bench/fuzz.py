"""``tickwheel bench fuzz``: garbage, mutated and schema-breaking frames against a broker.

A ``tickwheel serve`` subprocess (log under ``--log-parent``, default ``/dev/shm``)
receives at least ``--frames`` (100,000) request frames over many short connections,
``--concurrency`` (16) at a time, from one asyncio loop in this process. Three kinds:

1. **Schema-breaking.** For every API the broker serves (``API_SPECS``), at every
   version, a well-formed seed request (``seed_entity``) is written again with one
   field replaced (``schema_breaking_frames``): every array as null, empty, with a
   negative count and with a count far past the frame's end; every string and byte
   string as null, empty, with a negative and with a huge length; every integer as
   -1, its minimum and its maximum (negative partitions, timeouts, byte limits);
   every boolean as 2. The walk reaches nested fields through each array's first
   item. One frame per connection, so each reaches the broker's decoder whatever
   the one before did.
2. **Mutated seeds.** A seed with 1-4 bytes flipped, replaced, inserted or cut, now
   and then behind a size prefix that lies (the approach of ``tests/server/test_fuzz``).
3. **Random frames.** Random bytes behind a served or an unknown API key and version;
   and now and then a TLS ClientHello, as a client configured for SSL sends.

4. **SASL conversations**, on the broker's second listener (SASL_PLAINTEXT, PLAIN and
   both SCRAMs; ``sasl_conversation``): an ApiVersions now and then, a SaslHandshake
   naming a real or made-up mechanism (at v0 too), then SaslAuthenticate frames whose
   tokens are random bytes or PLAIN and SCRAM messages with bytes changed, now and then
   a request no one may send before logging in; any frame sometimes mutated. Failed
   logins wait ``connection.failed.authentication.delay.ms`` on the broker's timing
   wheel before their connection closes, so the broker keeps many of them at once.

Each connection sends 1-10 frames of kinds 2 and 3 (the first bad one usually closes
it), half-closes, and reads the answers until the broker closes or
``_READ_TIMEOUT_S`` passes; one in ``_ABORT_ONE_IN`` resets the connection instead,
before reading its answers. The Fetch seeds read a first batch of 100 KB, above the
server's sendfile threshold, so answers also meet closing sockets on the sendfile
path. Every ``_LIVENESS_EVERY_CONNECTIONS`` connections a fresh
connection must get an ApiVersions answer.

Then **the connection defences** (``tickwheel.bench._defences``): slow announcers of
100 MB requests, tricklers of 24 MB frames, a frame too large before SASL
authentication, a connection flood above a creation rate and a host over
``max.connections.per.ip``, each against a broker of its own, with what a new client and
an existing producer saw meanwhile and the broker's peak RSS growth.
Last, a real client (confluent-kafka) produces a message and consumes it back, on the
PLAINTEXT listener and, logged in with PLAIN, on the SASL one.

Reported: frames sent (and how many schema-breaking), answers read (a frame after
one that closed its connection is never read), connections, tracebacks and ERROR
lines in the broker's stderr, WARNING lines, broker deaths (each one restarts
the broker), liveness checks unanswered, frames/s, the broker's peak RSS and its RSS
growth under the held frames. The exit status is 1 when the broker printed a
traceback, died, missed a liveness check or failed the real client. Record the
figures in ``docs/benchmarks.md`` ("Fuzzing").

``seed_entity``, ``encode_request``, ``schema_breaking_frames``, ``mutate``,
``random_frame`` and ``sasl_conversation`` are also what ``tests/server`` fuzzes with.

Concurrency: a command on the main thread; one asyncio loop for the connections, one
thread draining the broker's stderr; librdkafka runs its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime
import functools
import io
import random
import socket
import struct
import sys
import tempfile
import time
import types
import typing
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from kio.serial import entity_writer
from kio.static.protocol import Entity, RequestPayload

from tickwheel.bench._batches import make_batch
from tickwheel.bench._chart import Bars, add_png_argument, save_png
from tickwheel.bench._defences import SCENARIOS, run_scenario
from tickwheel.bench._defences import report as defences_report
from tickwheel.bench._served import (
    LOOPBACK,
    SASL_MECHANISMS,
    SASL_PASSWORD,
    SASL_USER,
    BrokerUnderTest,
    answers_api_versions,
    receive,
)
from tickwheel.protocol import ApiKey, build_entity, request_header_bytes, request_schema, uvarint
from tickwheel.security import SASL_AUTHENTICATE_KEY, SASL_HANDSHAKE_KEY
from tickwheel.server.apis import API_SPECS, SUPPORTED_VERSIONS

FUZZ_TOPIC = "fuzz"
FUZZ_ADMIN_TOPIC = "fuzz-admin"
FUZZ_GROUP = "fuzz-group"
SENDFILE_BATCH_BYTES = 100_000
"""The first batch in ``FUZZ_TOPIC``: above the server's 64 KiB sendfile threshold."""

_TMPFS = "/dev/shm"
_DEFAULT_FRAMES = 100_000
_DEFAULT_CONCURRENCY = 16
_MAX_FRAMES_PER_CONNECTION = 10
_READ_TIMEOUT_S = 2.0
_ABORT_ONE_IN = 10
_LYING_PREFIX_ONE_IN = 20
_TLS_HELLO_ONE_IN = 200
_RANDOM_FRAME_ONE_IN = 3
_LIVENESS_EVERY_CONNECTIONS = 500
_LIVENESS_TIMEOUT_S = 10.0
_CLIENT_TIMEOUT_S = 30.0
_MIB = 1024 * 1024
_MAX_TRACEBACKS_SHOWN = 3
_API_VERSIONS_KEY = ApiKey.API_VERSIONS
_PRODUCE_KEY = ApiKey.PRODUCE
# Frames of kind 3 use these keys too: served ones, and ones no broker serves.
_UNKNOWN_API_KEYS = (-1, 99, 32767)
_SASL_CONNECTION_ONE_IN_FRAMES = 20
_MAX_SASL_TOKENS = 4
_NOT_BEFORE_LOGIN_KEYS = (0, 1, 3, 19, 51)
# A TLS 1.2 ClientHello's record header and the start of its handshake message.
_TLS_CLIENT_HELLO = bytes.fromhex("160301020001000200fc0303") + bytes(32)

# -- seeds: one well-formed request per API and version --------------------------------

_FIELD_VALUES: Mapping[str, object] = {
    # Field values by name at any depth; anything else gets a plain value of its type.
    "name": FUZZ_TOPIC,
    "topic": FUZZ_TOPIC,
    "group_id": FUZZ_GROUP,
    "key": FUZZ_GROUP,
    "coordinator_keys": [FUZZ_GROUP],
    "groups": [FUZZ_GROUP],
    "groups_names": [FUZZ_GROUP],
    "protocol_type": "consumer",
    "member_id": "",
    "acks": 1,
    "timeout": 100,
    "records": make_batch([b"fuzz"]),
    "replica_id": -1,
    "max_wait": 50,
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 256 * 1024,
    "current_leader_epoch": -1,
    "timestamp": -1,
    # The least group.min.session.timeout.ms allows: a v0 JoinGroup's member holds the
    # next rebalance (a v1 seed's join) for its session timeout.
    "session_timeout": 6_000,
    "rebalance_timeout": 100,
    "generation_id": -1,
    "generation_id_or_member_epoch": -1,
    "committed_offset": 1,
    "committed_leader_epoch": -1,
    "retention_time": -1,
    "resource_type": 2,
    "resource_name": FUZZ_TOPIC,
    "num_partitions": 1,
    "replication_factor": 1,
    "count": 2,
    "broker_ids": [0],
    "validate_only": True,
    "transaction_timeout": 1000,
    "producer_id": -1,
    "producer_epoch": -1,
    "session_epoch": -1,
}
_API_VALUES: Mapping[int, Mapping[str, object]] = {
    # Admin APIs work on a topic of their own, so the produce and fetch seeds keep theirs;
    # the topic is created by a manual assignment with a real config, so that their
    # mutations reach the checks of both.
    19: {
        "topics": [
            {
                "name": FUZZ_ADMIN_TOPIC,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": [{"name": "retention.ms", "value": "60000"}],
            }
        ]
    },
    20: {"topic_names": [FUZZ_ADMIN_TOPIC], "topics": [{"name": FUZZ_ADMIN_TOPIC}]},
    37: {"topics": [{"name": FUZZ_ADMIN_TOPIC, "assignments": [{}]}]},
    # DescribeShareGroupOffsets: its ``groups`` are entities, not the group ids of
    # DescribeGroups.
    90: {"groups": [{"group_id": FUZZ_GROUP, "topics": [{"topic_name": FUZZ_TOPIC}]}]},
    # OffsetFetch from v8 names its groups as entities, not the strings DescribeGroups has.
    9: {"groups": [{"group_id": FUZZ_GROUP}]},
}
_PLAIN_VALUES: Mapping[str, object] = {"string": "fuzz", "bytes": b"fuzz", "bool": False}


_NOT_GIVEN = object()


def _without_none(tp: Any) -> tuple[Any, bool]:
    """``tp`` without its ``| None`` (kio's mark of a nullable field), and whether it had one."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [arg for arg in typing.get_args(tp) if arg is not type(None)]
        return args[0], True
    return tp, False


def _is_entity(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _seed_values(cls: type[Any], overrides: Mapping[str, object]) -> dict[str, Any]:
    """Values for every field of ``cls``: ``overrides``, then ``_FIELD_VALUES``, then
    one item per array, null where nullable, a plain value of the field's type."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp, nullable = _without_none(f.type)
        given = overrides.get(f.name, _FIELD_VALUES.get(f.name, _NOT_GIVEN))
        if typing.get_origin(tp) is tuple:
            item, _ = _without_none(typing.get_args(tp)[0])
            if given is not _NOT_GIVEN:
                values[f.name] = (
                    [_seed_values(item, v) for v in typing.cast(list[Mapping[str, object]], given)]
                    if _is_entity(item)
                    else given
                )
            elif _is_entity(item):
                values[f.name] = [_seed_values(item, {})]
            else:
                values[f.name] = [_plain(f.metadata.get("kafka_type"))]
        elif given is not _NOT_GIVEN:
            values[f.name] = given
        elif nullable:
            values[f.name] = None
        elif _is_entity(tp):
            values[f.name] = _seed_values(tp, {})
        else:
            values[f.name] = _plain(f.metadata.get("kafka_type"))
    return values


def _plain(kafka_type: object) -> object:
    return _PLAIN_VALUES.get(str(kafka_type), 0)


def seed_entity(api_key: int, version: int) -> RequestPayload:
    """A well-formed request of ``api_key`` at ``version``, on the fuzz topic and group."""
    cls = request_schema(api_key, version)
    return build_entity(cls, _seed_values(cls, _API_VALUES.get(api_key, {})))


def _header(api_key: int, version: int, correlation_id: int) -> bytes:
    return request_header_bytes(api_key, version, correlation_id, client_id="fuzz")


def _framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def encode_request(
    api_key: int, version: int, body: Entity | Mapping[str, Any], correlation_id: int
) -> bytes:
    """A whole request frame, size prefix included (``body`` an entity or its values)."""
    if isinstance(body, Mapping):
        body = build_entity(request_schema(api_key, version), body)
    buffer = io.BytesIO()
    entity_writer(type(body))(buffer, body)
    return _framed(_header(api_key, version, correlation_id) + buffer.getvalue())


def seed_frames() -> list[bytes]:
    """One seed request frame for every API the broker serves, at every version."""
    return [
        encode_request(key, version, seed_entity(key, version), index)
        for index, (key, version) in enumerate(served_versions())
    ]


def served_versions() -> Iterator[tuple[int, int]]:
    """Every (API key, version) the broker serves, as ``API_SPECS`` lists them."""
    for spec in API_SPECS:
        for version in range(spec.versions.min_version, spec.versions.max_version + 1):
            yield spec.api_key, version


# -- schema-breaking variants ----------------------------------------------------------

# A field's place in a request: field names, and item indexes within arrays.
_Path = tuple[str | int, ...]
_INT_FORMATS: Mapping[str, str] = {
    "int8": ">b",
    "int16": ">h",
    "int32": ">i",
    "int64": ">q",
    "uint8": ">B",
    "uint16": ">H",
    "uint32": ">I",
    "uint64": ">Q",
    "error_code": ">h",
    "timedelta_i32": ">i",
    "timedelta_i64": ">q",
    "datetime_i64": ">q",
}
_NULL_UUID = bytes(16)
_NULLABLE_STRUCT_NULL = b"\xff"
_NULLABLE_STRUCT_PRESENT = b"\x01"
_NO_TAGGED_FIELDS = b"\x00"


def _length(value: int | None, *, flexible: bool, legacy_format: str) -> bytes:
    """A length prefix: compact (length + 1, 0 for null) or legacy (-1 for null)."""
    if flexible:
        return uvarint(0 if value is None else value + 1)
    return struct.pack(legacy_format, -1 if value is None else value)


def _leaf(kafka_type: str, value: Any, *, flexible: bool) -> bytes:
    if kafka_type in _INT_FORMATS:
        if isinstance(value, datetime.timedelta):
            value = round(value.total_seconds() * 1000)
        elif isinstance(value, datetime.datetime):
            value = round(value.timestamp() * 1000)
        return struct.pack(_INT_FORMATS[kafka_type], -1 if value is None else int(value))
    if kafka_type == "bool":
        return b"\x01" if value else b"\x00"
    if kafka_type == "float64":
        return struct.pack(">d", value)
    if kafka_type == "uuid":
        return _NULL_UUID if value is None else typing.cast(uuid.UUID, value).bytes
    data = value.encode() if isinstance(value, str) else value
    legacy_format = ">h" if kafka_type == "string" else ">i"
    prefix = _length(
        None if data is None else len(data), flexible=flexible, legacy_format=legacy_format
    )
    return prefix + (data or b"")


def _int_limits(fmt: str) -> tuple[int, int]:
    """The smallest and largest value of a struct integer format."""
    bits = struct.calcsize(fmt) * 8
    if fmt[1].isupper():
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _bad_values(kafka_type: str, *, flexible: bool, is_array: bool) -> list[bytes]:
    """What replaces a field: nulls, negative and huge lengths, out-of-range numbers."""
    if is_array or kafka_type in {"string", "bytes", "records"}:
        if flexible:
            # Null, empty, then lengths of 2^32 - 2 and 2^31 - 1: far past any frame's end.
            return [uvarint(0), uvarint(1), uvarint(2**32 - 1), uvarint(2**31)]
        length_format = ">h" if kafka_type == "string" and not is_array else ">i"
        # Null, empty, two negative lengths, and the largest: far past any frame's end.
        lengths = (-1, 0, -2, *_int_limits(length_format))
        return [struct.pack(length_format, v) for v in lengths]
    if kafka_type in _INT_FORMATS:
        fmt = _INT_FORMATS[kafka_type]
        smallest, largest = _int_limits(fmt)
        values = (largest,) if smallest == 0 else (-1, smallest, largest)
        return [struct.pack(fmt, v) for v in values]
    return [b"\x02"] if kafka_type == "bool" else []


@dataclass(frozen=True, slots=True)
class _Site:
    path: _Path
    kafka_type: str
    flexible: bool
    is_array: bool


def _walk(
    entity: Any, path: _Path, out: bytearray, at: _Path, bad: bytes, sites: list[_Site]
) -> None:
    """Encode ``entity`` into ``out``, writing ``bad`` instead of the field at ``at``,
    and list every field that could be replaced in ``sites``."""
    cls = type(entity)
    flexible = bool(cls.__flexible__)
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            continue
        here = (*path, f.name)
        tp, nullable = _without_none(f.type)
        kafka_type = str(f.metadata.get("kafka_type", ""))
        is_array = typing.get_origin(tp) is tuple
        sites.append(_Site(here, kafka_type, flexible, is_array))
        if here == at:
            out += bad
            continue
        value = getattr(entity, f.name)
        if is_array:
            item_type, _ = _without_none(typing.get_args(tp)[0])
            out += _length(
                None if value is None else len(value), flexible=flexible, legacy_format=">i"
            )
            for index, item in enumerate(value or ()):
                item_path = (*here, index)
                if _is_entity(item_type):
                    _walk(item, item_path, out, at, bad, sites)
                    continue
                sites.append(_Site(item_path, kafka_type, flexible, is_array=False))
                out += bad if item_path == at else _leaf(kafka_type, item, flexible=flexible)
        elif _is_entity(tp):
            if nullable:
                out += _NULLABLE_STRUCT_NULL if value is None else _NULLABLE_STRUCT_PRESENT
            if value is not None:
                _walk(value, here, out, at, bad, sites)
        else:
            out += _leaf(kafka_type, value, flexible=flexible)
    if flexible:
        out += _NO_TAGGED_FIELDS


def encode_body(entity: Entity, at: _Path = (), bad: bytes = b"") -> bytes:
    """``entity``'s bytes (tagged fields left out), the field at ``at`` replaced by ``bad``."""
    out = bytearray()
    _walk(entity, (), out, at, bad, [])
    return bytes(out)


def schema_breaking_frames(
    api_key: int, version: int, first_correlation_id: int = 0
) -> list[bytes]:
    """The seed of ``api_key`` v``version`` once per field and bad value of that field."""
    seed = seed_entity(api_key, version)
    sites: list[_Site] = []
    _walk(seed, (), bytearray(), (), b"", sites)
    frames: list[bytes] = []
    for site in sites:
        for bad in _bad_values(site.kafka_type, flexible=site.flexible, is_array=site.is_array):
            header = _header(api_key, version, first_correlation_id + len(frames))
            frames.append(_framed(header + encode_body(seed, site.path, bad)))
    return frames


def all_schema_breaking_frames() -> list[bytes]:
    """``schema_breaking_frames`` of every API the broker serves, at every version."""
    frames: list[bytes] = []
    for key, version in served_versions():
        frames += schema_breaking_frames(key, version, len(frames))
    return frames


# -- mutations and random frames --------------------------------------------------------


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """``frame`` with 1-4 bytes flipped, replaced, inserted or cut; now and then behind
    a size prefix that lies."""
    body = bytearray(frame[4:])
    for _ in range(rng.randint(1, 4)):
        position = rng.randint(0, len(body))
        action = rng.choice(("flip", "replace", "insert", "cut"))
        if action == "insert" or position == len(body):
            body[position:position] = rng.randbytes(rng.randint(1, 8))
        elif action == "flip":
            body[position] ^= 1 << rng.randint(0, 7)
        elif action == "replace":
            body[position] = rng.randint(0, 255)
        else:
            del body[position : position + rng.randint(1, 8)]
    if rng.randint(0, _LYING_PREFIX_ONE_IN) == 0:
        return struct.pack(">i", rng.randint(-(2**31), 2**31 - 1)) + bytes(body)
    return _framed(bytes(body))


def random_frame(rng: random.Random) -> bytes:
    """Random bytes behind a served or unknown API key, any version; or a TLS hello."""
    if rng.randint(1, _TLS_HELLO_ONE_IN) == 1:
        return _TLS_CLIENT_HELLO
    key = rng.choice((*sorted(SUPPORTED_VERSIONS), *_UNKNOWN_API_KEYS))
    head = struct.pack(">hhi", key, rng.randint(-2, 20), rng.randint(-(2**31), 2**31 - 1))
    return _framed(head + rng.randbytes(rng.randint(0, 80)))


def _sasl_token(rng: random.Random) -> bytes:
    """A PLAIN or SCRAM message, right or with bytes changed, or random bytes."""
    nonce = rng.randbytes(rng.randint(0, 24)).hex()
    candidates = (
        f"\x00{SASL_USER}\x00{SASL_PASSWORD}".encode(),
        f"{SASL_USER}\x00{SASL_USER}\x00wrong".encode(),
        f"n,,n={SASL_USER},r={nonce}".encode(),
        f"n,a=x,n={SASL_USER},r={nonce},e=1".encode(),
        f"c=biws,r={nonce},p={rng.randbytes(32).hex()}".encode(),
        rng.randbytes(rng.randint(0, 64)),
    )
    token = bytearray(rng.choice(candidates))
    for _ in range(rng.randint(0, 3)):
        if token:
            token[rng.randrange(len(token))] = rng.randint(0, 255)
    return bytes(token)


def sasl_conversation(rng: random.Random) -> list[bytes]:
    """The frames of one connection to a SASL listener: maybe ApiVersions, a handshake
    (a real or made-up mechanism, v1 or the refused v0), then SaslAuthenticate frames
    with random or damaged tokens, now and then a request not allowed before login;
    any frame sometimes mutated."""
    frames: list[bytes] = []
    if rng.randint(0, 1):
        version = rng.randint(0, 3)
        frames.append(
            encode_request(_API_VERSIONS_KEY, version, seed_entity(_API_VERSIONS_KEY, version), 0)
        )
    mechanism = rng.choice((*SASL_MECHANISMS, "GSSAPI", rng.randbytes(6).hex()))
    frames.append(
        encode_request(SASL_HANDSHAKE_KEY, rng.choice((1, 1, 1, 0)), {"mechanism": mechanism}, 1)
    )
    for index in range(rng.randint(0, _MAX_SASL_TOKENS)):
        values = {"auth_bytes": _sasl_token(rng)}
        frames.append(encode_request(SASL_AUTHENTICATE_KEY, rng.randint(0, 2), values, 2 + index))
    if rng.randint(0, 3) == 0:
        key = rng.choice(_NOT_BEFORE_LOGIN_KEYS)
        frames.append(seed_frames_by_key()[key])
    return [mutate(frame, rng) if rng.randint(0, 5) == 0 else frame for frame in frames]


@functools.cache
def seed_frames_by_key() -> dict[int, bytes]:
    """A seed frame (the API's highest version) per API key the broker serves."""
    return {
        spec.api_key: encode_request(
            spec.api_key,
            spec.versions.max_version,
            seed_entity(spec.api_key, spec.versions.max_version),
            0,
        )
        for spec in API_SPECS
    }


# -- the fuzzing ----------------------------------------------------------------------


@dataclass
class FuzzFigures:
    """What one run sent and what became of the broker."""

    frames: int = 0
    answers: int = 0
    schema_breaking_frames: int = 0
    sasl_connections: int = 0
    connections: int = 0
    liveness_misses: int = 0
    seconds: float = 0.0
    client_round_trip: bool = False
    sasl_round_trip: bool = False


async def _send_connection(port: int, frames: list[bytes], *, abort: bool) -> int | None:
    """Send ``frames`` on a new connection; the answers read, None if it did not open."""
    try:
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
    except OSError:
        return None
    answers = 0
    try:
        writer.write(b"".join(frames))
        if abort:
            # A reset with the answers unread: the broker writes into a closing socket.
            writer.transport.abort()
            return 0
        writer.write_eof()
        with contextlib.suppress(TimeoutError, asyncio.IncompleteReadError):
            async with asyncio.timeout(_READ_TIMEOUT_S):
                while True:
                    (size,) = struct.unpack(">i", await reader.readexactly(4))
                    await reader.readexactly(size)
                    answers += 1
    except OSError:
        pass
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return answers


def _connections(frames: int, rng: random.Random, seeds: list[bytes]) -> Iterator[list[bytes]]:
    """Connections' worth of mutated and random frames, ``frames`` in all."""
    left = frames
    while left > 0:
        count = min(left, rng.randint(1, _MAX_FRAMES_PER_CONNECTION))
        left -= count
        yield [
            random_frame(rng)
            if rng.randint(1, _RANDOM_FRAME_ONE_IN) == 1
            else mutate(rng.choice(seeds), rng)
            for _ in range(count)
        ]


async def _fuzz(broker: BrokerUnderTest, figures: FuzzFigures, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    seeds = seed_frames()
    breaking = all_schema_breaking_frames()
    plan: list[tuple[bool, list[bytes]]] = [(False, [frame]) for frame in breaking]
    plan += ((False, c) for c in _connections(max(args.frames - len(breaking), 0), rng, seeds))
    sasl_plan = [
        (True, sasl_conversation(rng))
        for _ in range(max(args.frames // _SASL_CONNECTION_ONE_IN_FRAMES, 1))
    ]
    # Spread over the run, so that SASL connections wait on the wheel while others fuzz.
    for index, connection in enumerate(sasl_plan):
        plan.insert(rng.randint(0, len(plan)) if index else 0, connection)
    figures.schema_breaking_frames = len(breaking)
    figures.sasl_connections = len(sasl_plan)
    queue: asyncio.Queue[tuple[bool, list[bytes]]] = asyncio.Queue()
    for connection in plan:
        queue.put_nowait(connection)
    lock = asyncio.Lock()

    async def worker() -> None:
        while not queue.empty():
            sasl, frames = queue.get_nowait()
            abort = rng.randint(1, _ABORT_ONE_IN) == 1
            port = broker.sasl_port if sasl else broker.port
            answers = await _send_connection(port, frames, abort=abort)
            if answers is None:
                # Refused: the broker died (it is restarted) or is out of descriptors.
                queue.put_nowait((sasl, frames))
                async with lock:
                    await _check_liveness(broker, figures)
                continue
            figures.frames += len(frames)
            figures.answers += answers
            figures.connections += 1
            if figures.connections % _LIVENESS_EVERY_CONNECTIONS == 0:
                async with lock:
                    await _check_liveness(broker, figures)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    figures.seconds = time.perf_counter() - started
    await _check_liveness(broker, figures)


async def _check_liveness(broker: BrokerUnderTest, figures: FuzzFigures) -> None:
    answered = await asyncio.to_thread(answers_api_versions, broker.port, _LIVENESS_TIMEOUT_S)
    if not broker.alive() or not answered:
        figures.liveness_misses += 1
    print(
        f"[fuzz] {figures.frames:,} frames, {figures.connections:,} connections, "
        f"{len(broker.log.tracebacks)} tracebacks, {broker.deaths} deaths",
        file=sys.stderr,
    )


def sasl_client_config(bootstrap_servers: str) -> dict[str, str]:
    """confluent-kafka's settings for the SASL listener's PLAIN user."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": SASL_USER,
        "sasl.password": SASL_PASSWORD,
    }


def _client_round_trip(
    bootstrap_servers: str, topic: str = "after-fuzz", settings: Mapping[str, str] = {}
) -> bool:
    """A confluent-kafka producer writes one message and a consumer reads it back."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, **settings})
    producer.produce(topic, value=b"still here", partition=0)
    if producer.flush(_CLIENT_TIMEOUT_S) != 0:
        return False
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": topic, **settings})
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + _CLIENT_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return message.value() == b"still here"
    finally:
        consumer.close()
    return False


def _prepare_topic(broker: BrokerUnderTest) -> None:
    """Put a 100 KB batch at the start of the fuzz topic (the Fetch seeds read it)."""
    values = {
        "acks": 1,
        "timeout": 1000,
        "topic_data": [
            {
                "name": FUZZ_TOPIC,
                "partition_data": [
                    {"index": 0, "records": make_batch([b"s" * SENDFILE_BATCH_BYTES])}
                ],
            }
        ],
    }
    with socket.create_connection((LOOPBACK, broker.port), timeout=_CLIENT_TIMEOUT_S) as sock:
        # Metadata v1 creates the topic (before v4 a client cannot opt out).
        sock.sendall(encode_request(ApiKey.METADATA, 1, {"topics": [{"name": FUZZ_TOPIC}]}, 1))
        sock.sendall(encode_request(_PRODUCE_KEY, 9, values, 2))
        for _ in range(2):
            (size,) = struct.unpack(">i", receive(sock, 4))
            receive(sock, size)


def report(figures: FuzzFigures, broker: BrokerUnderTest) -> str:
    """The figures as a Markdown table."""
    log = broker.log
    rows = [
        ("frames sent", f"{figures.frames:,}"),
        (
            "of which schema-breaking (null, negative, huge, out of range)",
            f"{figures.schema_breaking_frames:,}",
        ),
        ("SASL conversations (SASL_PLAINTEXT listener)", f"{figures.sasl_connections:,}"),
        ("answers read", f"{figures.answers:,}"),
        ("connections", f"{figures.connections:,}"),
        ("frames/s", f"{figures.frames / figures.seconds:,.0f}" if figures.seconds else "n/a"),
        ("broker tracebacks", str(len(log.tracebacks))),
        ("broker ERROR lines", str(log.by_level.get("ERROR", 0))),
        ("broker WARNING lines", f"{log.by_level.get('WARNING', 0):,}"),
        ("broker deaths", str(broker.deaths)),
        ("liveness checks unanswered", str(figures.liveness_misses)),
        ("broker peak RSS (MiB)", f"{broker.peak_rss_bytes / _MIB:.0f}"),
        (
            "confluent-kafka produce + consume afterwards",
            "ok" if figures.client_round_trip else "FAILED",
        ),
        (
            "confluent-kafka SASL PLAIN login, produce + consume afterwards",
            "ok" if figures.sasl_round_trip else "FAILED",
        ),
    ]
    lines = [
        "| figure | value |",
        "|---|---:|",
        *(f"| {label} | {value} |" for label, value in rows),
    ]
    for traceback in log.tracebacks[:_MAX_TRACEBACKS_SHOWN]:
        lines += ["", "```", *traceback, "```"]
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tickwheel bench fuzz", description=__doc__.split("\n")[0] if __doc__ else None
    )
    parser.add_argument("--frames", type=int, default=_DEFAULT_FRAMES, help="at least this many")
    parser.add_argument("--concurrency", type=int, default=_DEFAULT_CONCURRENCY)
    parser.add_argument("--seed", type=int, default=0, help="random seed of the mutations")
    parser.add_argument(
        "--broker-override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a broker property for tickwheel serve (repeatable)",
    )
    parser.add_argument(
        "--log-parent",
        default=_TMPFS if Path(_TMPFS).is_dir() else None,
        help="where the broker's temporary log directory goes (default /dev/shm)",
    )
    parser.add_argument(
        "--skip-defences",
        action="store_true",
        help="leave out the attacks on the connection defences (tickwheel.bench._defences)",
    )
    add_png_argument(parser)
    return parser


def main(argv: list[str]) -> int:
    """Fuzz a broker subprocess, print the figures; non-zero if the broker suffered."""
    args = _parser().parse_args(argv)
    figures = FuzzFigures()
    with tempfile.TemporaryDirectory(prefix="tickwheel-fuzz-", dir=args.log_parent) as log_dir:
        broker = BrokerUnderTest(Path(log_dir), args.broker_override)
        broker.start()
        try:
            _prepare_topic(broker)
            asyncio.run(_fuzz(broker, figures, args))
            broker.alive()
            figures.client_round_trip = _client_round_trip(broker.bootstrap_servers)
            figures.sasl_round_trip = _client_round_trip(
                broker.sasl_bootstrap_servers,
                "after-sasl-fuzz",
                sasl_client_config(broker.sasl_bootstrap_servers),
            )
        finally:
            broker.stop()
    defences = (
        [] if args.skip_defences else [run_scenario(name, args.log_parent) for name in SCENARIOS]
    )
    print(report(figures, broker))
    if defences:
        print()
        print(defences_report(defences))
    save_png(
        args.png,
        f"tickwheel bench fuzz - {figures.frames:,} mutated frames, seed {args.seed}",
        [
            Bars(
                title="what the broker suffered (0 is the target)",
                unit="count",
                values={
                    "tickwheel": {
                        "tracebacks": len(broker.log.tracebacks),
                        "ERROR lines": broker.log.by_level.get("ERROR", 0),
                        "deaths": broker.deaths,
                        "liveness misses": figures.liveness_misses,
                    }
                },
            )
        ],
    )
    failed = (
        broker.log.tracebacks
        or broker.deaths
        or figures.liveness_misses
        or not figures.client_round_trip
        or not figures.sasl_round_trip
        or not all(result.met for result in defences)
    )
    return 1 if failed else 0
