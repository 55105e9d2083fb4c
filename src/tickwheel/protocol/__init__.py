"""The Kafka wire protocol, sans-IO: bytes in, kio entities out, and back.

No sockets and no event loop in the protocol logic (the model is h11; the two client
shells below are the only I/O, kept in their own modules): the server reads a frame and
hands its bytes to ``decode_request``, which refuses what breaks the schema
(``InvalidRequestError``, carrying the INVALID_REQUEST answer where the API has one);
a handler reads the request as the newest version it knows (``DecodedRequest.body_as``)
and builds its response at that version, both typed; ``convert`` carries an entity
between versions, and ``encode_response`` makes the frame. Fetch
responses are the exception: ``encode_fetch_response`` writes them by hand as chunks,
so record bytes go from the log to the socket without passing through an encoder;
Produce, the request a ``linger.ms=0`` producer sends once per message, has its own
length check and ``encode_produce_response`` (``_produce``), written for the hot path.
Both write the leader hints of KIP-951 (``LeaderHints``, ``_leader_hints``).
``with_throttle_time`` raises an encoded answer's ``throttle_time_ms`` (a request-time
quota is known only once the handler is done).

The client side is here too: ``ClientConnection`` frames requests, matches correlation
ids and negotiates versions from the broker's ApiVersions answer, still without I/O;
``SaslLogin`` is a client's SASL login, also sans-IO; ``BlockingClient`` (a blocking
socket) and ``AsyncClient`` (asyncio streams), both with TLS, are the two shells,
which only move bytes. ``ApiKey`` names every API key, ``CoordinatorType``
FindCoordinator's key types.

Everything but the clients is pure or cached, safe from any thread; a client (its
``ClientConnection``, ``SaslLogin`` and shell) belongs to its connection's one thread
or task.
"""

from tickwheel.protocol._api_keys import ApiKey
from tickwheel.protocol._build import build_entity
from tickwheel.protocol._client import (
    ClientConnection,
    CorrelationError,
    Encoder,
    Response,
    highest_common_version,
)
from tickwheel.protocol._client_asyncio import AsyncClient
from tickwheel.protocol._client_blocking import BlockingClient
from tickwheel.protocol._codec import (
    API_VERSIONS_KEY,
    NO_THROTTLE,
    DecodedRequest,
    VersionRange,
    decode_request,
    encode_api_versions_fallback,
    encode_request,
    encode_response,
    error_response,
    invalid_request_response,
    request_header_bytes,
)
from tickwheel.protocol._coordinator_type import CoordinatorType
from tickwheel.protocol._errors import (
    FrameTooLargeError,
    InvalidRequestError,
    MalformedFrameError,
    ProtocolError,
    TlsHandshakeError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from tickwheel.protocol._fetch import (
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    FOLLOWER_FETCH_VERSION,
    FetchPartitionData,
    FetchResponseFrame,
    FetchTopicData,
    FollowerFetchPartitionData,
    RecordsSource,
    encode_fetch_response,
    encode_follower_fetch_request,
)
from tickwheel.protocol._framing import (
    SIZE_PREFIX_BYTES,
    RequestKey,
    peek_request_key,
    read_frame_size,
    size_prefix,
    uvarint,
)
from tickwheel.protocol._leader_hints import (
    LEADER_HINT_ERRORS,
    NO_LEADER_HINTS,
    LeaderHints,
    NodeEndpoint,
)
from tickwheel.protocol._parts import (
    array_item_class,
    encode_entity,
    encode_response_with_array,
)
from tickwheel.protocol._produce import PartitionAnswer, TopicAnswer, encode_produce_response
from tickwheel.protocol._sasl_login import SaslClient, SaslLogin, SaslLoginError
from tickwheel.protocol._schemas import reader_for, request_schema, response_schema
from tickwheel.protocol._throttle import with_throttle_time
from tickwheel.protocol._topic_id import decode_topic_id, encode_topic_id
from tickwheel.protocol._versions import convert, default_entity

__all__ = [
    "API_VERSIONS_KEY",
    "FETCH_MAX_VERSION",
    "FETCH_MIN_VERSION",
    "FOLLOWER_FETCH_VERSION",
    "LEADER_HINT_ERRORS",
    "NO_LEADER_HINTS",
    "NO_THROTTLE",
    "SIZE_PREFIX_BYTES",
    "ApiKey",
    "AsyncClient",
    "BlockingClient",
    "ClientConnection",
    "CoordinatorType",
    "CorrelationError",
    "DecodedRequest",
    "Encoder",
    "FetchPartitionData",
    "FetchResponseFrame",
    "FetchTopicData",
    "FollowerFetchPartitionData",
    "FrameTooLargeError",
    "InvalidRequestError",
    "LeaderHints",
    "MalformedFrameError",
    "NodeEndpoint",
    "PartitionAnswer",
    "ProtocolError",
    "RecordsSource",
    "RequestKey",
    "Response",
    "SaslClient",
    "SaslLogin",
    "SaslLoginError",
    "TlsHandshakeError",
    "TopicAnswer",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "VersionRange",
    "array_item_class",
    "build_entity",
    "convert",
    "decode_request",
    "decode_topic_id",
    "default_entity",
    "encode_api_versions_fallback",
    "encode_entity",
    "encode_fetch_response",
    "encode_follower_fetch_request",
    "encode_produce_response",
    "encode_request",
    "encode_response",
    "encode_response_with_array",
    "encode_topic_id",
    "error_response",
    "highest_common_version",
    "invalid_request_response",
    "peek_request_key",
    "read_frame_size",
    "reader_for",
    "request_header_bytes",
    "request_schema",
    "response_schema",
    "size_prefix",
    "uvarint",
    "with_throttle_time",
]
