"""Broker-to-broker requests over the Kafka protocol: the client side of the wire.

``BrokerChannel`` is one TCP connection from this broker to another, carrying one
request at a time (a follower's fetcher never pipelines), over ``tickwheel.protocol``'s
``AsyncClient`` (framing, correlation and kio's encoding are the protocol layer's);
the channel adds the timeout, reconnecting and the login. ``KafkaFetchTransport`` is
the replica layer's ``FetchTransport`` on top of it (through ``BrokerChannels``, one
channel per broker opened with the ``ChannelSettings`` every inter-broker channel of a
kind shares): a follower's fetch becomes a Fetch request at ``FOLLOWER_FETCH_VERSION``,
written by ``encode_follower_fetch_request`` (by hand, as every follower sends one
per round trip: see ``tickwheel.protocol._fetch``), the answer becomes
``FollowerFetchResult``s; a follower's question where its leader epoch ends becomes an
OffsetsForLeaderEpoch v4 (with its replica id).
``KafkaTxnMarkerTransport`` is the transaction coordinator's ``MarkerTransport``: the
COMMIT/ABORT markers for partitions another broker leads, as WriteTxnMarkers v1.

A channel to a broker's TLS listener (SSL, SASL_SSL) is given the broker's client
``ssl_context``: the handshake runs as the connection opens, checking the peer's
certificate (and its host name, per ``ssl.endpoint.identification.algorithm``) and
presenting this broker's own key store where the peer asks for a client certificate.
``_connect`` makes a connection ready for requests: TCP, TLS, then the SASL login below.
A channel speaks fixed versions, the ones Kafka's brokers send each other, and asks no
ApiVersions first.

Fetch v12 is the newest version that names topics (v13 uses topic ids) and carries
the current leader epoch and the follower's log start offset, as Kafka's followers
send them.

When the inter-broker listener is SASL_PLAINTEXT or SASL_SSL, a channel authenticates
right after it connects, as Kafka's clients do (``ChannelSasl``: the mechanism of
``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password`` of the
listener's JAAS line), through ``AsyncClient.login`` with ``tickwheel.security``'s
client of the mechanism: SaslHandshake v1, then SaslAuthenticate v2 until the client
has nothing more to send -- for SCRAM, after it checked the server's signature. A
session with a lifetime (``connections.max.reauth.ms`` on the other broker) is renewed
by reconnecting once 85% of it has passed, before the other broker would close the
connection. A failed login raises ``WireError``, like any broken connection: the caller
reconnects later.

Concurrency: event-loop thread only; a channel must not be used by two tasks at once
(each leader's fetcher owns its channel).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tickwheel.cluster._znodes import BrokerEndpoint
from tickwheel.protocol import (
    FOLLOWER_FETCH_VERSION,
    ApiKey,
    AsyncClient,
    Encoder,
    FollowerFetchPartitionData,
    ProtocolError,
    SaslLoginError,
    encode_follower_fetch_request,
)
from tickwheel.replica import (
    EpochEndOffset,
    FollowerFetchRequest,
    FollowerFetchResult,
    TopicPartition,
    TxnMarker,
)
from tickwheel.security import SaslClientError, sasl_client

OFFSETS_FOR_LEADER_EPOCH_VERSION = 4
WRITE_TXN_MARKERS_VERSION = 1  # the only version Kafka 4 (and kio) still has
_REAUTHENTICATE_AT = 0.85
"""The share of a SASL session's lifetime after which a channel reconnects."""
_MS_PER_S = 1000.0


class WireError(OSError):
    """A response that does not match its request: the connection is unusable."""


@dataclass(frozen=True, slots=True)
class ChannelSasl:
    """How a channel logs in: a SASL mechanism (PLAIN, SCRAM-SHA-256/512) and a user."""

    mechanism: str
    username: str
    password: str = field(repr=False)


class BrokerChannel:
    """One connection to a broker, one request at a time."""

    def __init__(
        self,
        endpoint: BrokerEndpoint,
        *,
        client_id: str,
        timeout_ms: int,
        ssl_context: ssl.SSLContext | None = None,
        sasl: ChannelSasl | None = None,
    ) -> None:
        """A channel to ``endpoint``, over TLS with ``ssl_context`` if given, logging in
        with ``sasl`` if given."""
        self.endpoint = endpoint
        self._client_id = client_id
        self._timeout_s = timeout_ms / _MS_PER_S
        self._ssl_context = ssl_context
        self._sasl = sasl
        self._client: AsyncClient | None = None
        # Loop time at which the SASL session is renewed (None: it does not expire).
        self._renew_at: float | None = None

    async def _connect(self) -> AsyncClient:
        """Open the connection: TCP, the TLS handshake when the channel has TLS, then the
        SASL login when it has SASL (the peer's SASL listener answers nothing else first)."""
        endpoint = self.endpoint
        client = await AsyncClient.open(
            endpoint.host, endpoint.port, client_id=self._client_id, ssl_context=self._ssl_context
        )
        self._client = client
        if self._sasl is not None:
            try:
                await self._authenticate(client, self._sasl)
            except BaseException:
                await self.close()
                raise
        return client

    async def request(self, api_key: int, api_version: int, values: Mapping[str, Any]) -> Any:
        """Send a request built from ``values``; returns the decoded response body."""
        return await self._exchange(lambda client: client.call(api_key, api_version, values))

    async def request_encoded(self, api_key: int, api_version: int, encode: Encoder) -> Any:
        """Send the frame ``encode(correlation_id, client_id)`` makes (a request of
        ``api_key`` at ``api_version``); returns the decoded response body."""
        return await self._exchange(
            lambda client: client.call_encoded(api_key, api_version, encode)
        )

    async def _exchange(self, call: Callable[[AsyncClient], Awaitable[Any]]) -> Any:
        """``call`` on the connection, opened (or renewed) first if need be, within the
        channel's timeout."""
        async with asyncio.timeout(self._timeout_s):
            renew_at = self._renew_at
            if renew_at is not None and asyncio.get_running_loop().time() >= renew_at:
                await self.close()
            client = self._client or await self._connect()
            try:
                return await call(client)
            except ProtocolError as exc:
                raise WireError(str(exc)) from exc

    async def _authenticate(self, client: AsyncClient, sasl: ChannelSasl) -> None:
        """The SASL login; a refusal is a ``WireError``."""
        peer = f"broker {self.endpoint.broker_id}"
        mechanism = sasl_client(sasl.mechanism, sasl.username, sasl.password)
        try:
            lifetime_ms = await client.login(mechanism, peer=peer)
        except SaslLoginError as exc:
            raise WireError(str(exc)) from exc
        except SaslClientError as exc:
            raise WireError(f"{peer}: {exc}") from exc
        self._renew_at = (
            asyncio.get_running_loop().time() + lifetime_ms * _REAUTHENTICATE_AT / _MS_PER_S
            if lifetime_ms > 0
            else None
        )

    async def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        client, self._client = self._client, None
        self._renew_at = None
        if client is not None:
            await client.close()


EndpointLookup = Callable[[int], BrokerEndpoint | None]
"""A broker's endpoint on the inter-broker listener, by broker id (None: not live)."""


@dataclass(frozen=True, slots=True)
class ChannelSettings:
    """How this broker's channels to the others connect: the client id they send, the
    request timeout, and the inter-broker listener's TLS and SASL login (None: none)."""

    client_id: str
    timeout_ms: int
    ssl_context: ssl.SSLContext | None = None
    sasl: ChannelSasl | None = None


class BrokerChannels:
    """One ``BrokerChannel`` per broker, opened on first use and made anew when the
    broker's endpoint changes; ``drop`` closes one after a failed request (the next
    request reconnects)."""

    def __init__(self, endpoints: EndpointLookup, settings: ChannelSettings) -> None:
        self._endpoints = endpoints
        self._settings = settings
        self._channels: dict[int, BrokerChannel] = {}

    def get(self, broker_id: int) -> BrokerChannel:
        """The channel to ``broker_id``; ``ConnectionError`` if it is not registered."""
        endpoint = self._endpoints(broker_id)
        if endpoint is None:
            raise ConnectionError(f"broker {broker_id} is not registered")
        channel = self._channels.get(broker_id)
        if channel is None or channel.endpoint != endpoint:
            settings = self._settings
            channel = BrokerChannel(
                endpoint,
                client_id=settings.client_id,
                timeout_ms=settings.timeout_ms,
                ssl_context=settings.ssl_context,
                sasl=settings.sasl,
            )
            self._channels[broker_id] = channel
        return channel

    async def drop(self, broker_id: int) -> None:
        """Close the channel to ``broker_id``, if one is open."""
        channel = self._channels.pop(broker_id, None)
        if channel is not None:
            await channel.close()

    async def close(self) -> None:
        """Close every channel."""
        for broker_id in list(self._channels):
            await self.drop(broker_id)


class KafkaFetchTransport:
    """Follower fetches as Fetch requests, one ``BrokerChannel`` per leader."""

    def __init__(self, channels: BrokerChannels) -> None:
        self._channels = channels

    async def fetch(
        self, leader_id: int, request: FollowerFetchRequest
    ) -> dict[TopicPartition, FollowerFetchResult]:
        """Send ``request`` to ``leader_id`` and return its answer per partition."""
        by_topic: dict[str, list[FollowerFetchPartitionData]] = {}
        for p in request.partitions:
            by_topic.setdefault(p.topic_partition.topic, []).append(
                (
                    p.topic_partition.partition,
                    p.leader_epoch,
                    p.fetch_offset,
                    p.log_start_offset,
                    p.max_bytes,
                )
            )

        def encode(correlation_id: int, client_id: str) -> bytes:
            return encode_follower_fetch_request(
                correlation_id,
                client_id=client_id,
                replica_id=request.replica_id,
                max_wait_ms=request.max_wait_ms,
                min_bytes=request.min_bytes,
                max_bytes=request.max_bytes,
                topics=list(by_topic.items()),
            )

        body = await self._channels.get(leader_id).request_encoded(
            ApiKey.FETCH, FOLLOWER_FETCH_VERSION, encode
        )
        return {
            TopicPartition(topic.topic, p.partition_index): FollowerFetchResult(
                error_code=int(p.error_code),
                high_watermark=int(p.high_watermark),
                log_start_offset=int(p.log_start_offset),
                records=p.records,
            )
            for topic in body.responses
            for p in topic.partitions
        }

    async def end_offsets_for_epochs(
        self, leader_id: int, replica_id: int, epochs: Mapping[TopicPartition, tuple[int, int]]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """OffsetsForLeaderEpoch to ``leader_id``: where each partition's epoch ends."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, (current_leader_epoch, leader_epoch) in epochs.items():
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": current_leader_epoch,
                    "leader_epoch": leader_epoch,
                }
            )
        body = await self._channels.get(leader_id).request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            OFFSETS_FOR_LEADER_EPOCH_VERSION,
            {
                "replica_id": replica_id,
                "topics": [
                    {"topic": topic, "partitions": partitions}
                    for topic, partitions in by_topic.items()
                ],
            },
        )
        return {
            TopicPartition(topic.topic, p.partition): EpochEndOffset(
                int(p.error_code), int(p.leader_epoch), int(p.end_offset)
            )
            for topic in body.topics
            for p in topic.partitions
        }

    async def disconnect(self, leader_id: int) -> None:
        """Close the connection to ``leader_id``."""
        await self._channels.drop(leader_id)

    async def close(self) -> None:
        """Close every connection."""
        await self._channels.close()


class KafkaTxnMarkerTransport:
    """The transaction coordinator's ``MarkerTransport``: WriteTxnMarkers v1 requests,
    one ``BrokerChannel`` per destination broker (one request at a time on each)."""

    def __init__(self, channels: BrokerChannels) -> None:
        self._channels = channels

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> dict[int, dict[TopicPartition, int]]:
        """Send ``markers`` to ``broker_id``; ``{producer_id: {tp: error code}}``.

        A failed request closes the channel (the next one reconnects) and raises.
        """
        entries = []
        for marker in markers:
            by_topic: dict[str, list[int]] = {}
            for tp in marker.partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            entries.append(
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.commit,
                    "topics": [
                        {"name": topic, "partition_indexes": partitions}
                        for topic, partitions in by_topic.items()
                    ],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            )
        try:
            body = await self._channels.get(broker_id).request(
                ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, {"markers": entries}
            )
        except BaseException:
            await self._channels.drop(broker_id)
            raise
        results: dict[int, dict[TopicPartition, int]] = {}
        for marker_result in body.markers:
            answer = results.setdefault(int(marker_result.producer_id), {})
            for topic in marker_result.topics:
                for p in topic.partitions:
                    answer[TopicPartition(topic.name, int(p.partition_index))] = int(p.error_code)
        return results

    async def close(self) -> None:
        """Close every connection."""
        await self._channels.close()
