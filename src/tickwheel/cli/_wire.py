"""Raw Kafka requests for the verbs no client library offers: one blocking connection.

Most admin verbs go through confluent-kafka; the transaction verbs need
ListTransactions, DescribeTransactions and DescribeProducers, which no Python client
exposes, so ``Connection`` speaks the protocol itself through ``tickwheel.protocol``'s
``BlockingClient``: a TCP socket to one broker, one request at a time, framing,
correlation and kio's encoding being the protocol layer's. It uses nothing of the
broker's, so it works against any Kafka.

Versions are negotiated as Kafka's clients do: the first request on a connection is
ApiVersions v0 (every broker answers it), and each later request goes at the highest
version in both the caller's ``Api`` range and the broker's; a broker that serves none
of them is a one-line ``CommandError`` naming the API, never a closed socket. A caller
reads only the fields its whole range shares.

Kafka writes -1 for "no time" in some timestamp fields (DescribeTransactions' start
time of an id with no transaction yet), which kio refuses to read as a datetime; so
responses are decoded with ``lenient``'s copy of kio's classes, in which every
``datetime_i64`` field is nullable and -1 reads as None.

Every failure the user should see (no broker at an address, no answer within
``TIMEOUT_S``, a connection closed mid-answer) is a ``CommandError``; the error codes
inside a response are the caller's to judge. Each wait shows ``progress`` as the
AdminClient waits do.

Concurrency: a ``Connection`` belongs to one thread (the command's); nothing is shared.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar, get_args, get_origin

from tickwheel.cli._client import TIMEOUT_S, CommandError
from tickwheel.cli._progress import progress
from tickwheel.protocol import (
    BlockingClient,
    ProtocolError,
    VersionRange,
    highest_common_version,
    response_schema,
)

CLIENT_ID = "tickwheel-cli"
_T = TypeVar("_T")
_WAITING = "waiting for the broker"
_TIMESTAMP = "datetime_i64"
# What kio's readers look up on an entity class besides its fields.
_KIO_CLASS_VARS = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")


@dataclass(frozen=True, slots=True)
class Api:
    """A request the CLI sends: its key, Kafka's name for it and the versions it can use."""

    key: int
    name: str
    versions: VersionRange


def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as a host and a port."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CommandError(f"expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


class Connection:
    """One blocking connection to a broker; ``request`` sends one request at a time."""

    def __init__(self, host: str, port: int) -> None:
        """Connect to ``host:port`` and ask which API versions it serves."""
        self.address = f"{host}:{port}"
        try:
            with progress(_WAITING):
                self._client = BlockingClient(
                    host,
                    port,
                    client_id=CLIENT_ID,
                    timeout_s=TIMEOUT_S,
                    response_class=_lenient_response,
                )
        except OSError as exc:
            raise CommandError(f"cannot reach {self.address}: {_reason(exc)}") from exc
        self._wait(self._client.ask_versions)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self._client.close()

    def version(self, api: Api) -> int:
        """The highest version of ``api`` both sides speak; CommandError if none."""
        served = self._client.protocol.served(api.key)
        wanted = api.versions
        if served is None:
            raise CommandError(f"the broker at {self.address} does not serve {api.name}")
        highest = highest_common_version(served, wanted)
        if highest is None:
            raise CommandError(
                f"the broker at {self.address} serves {api.name} "
                f"v{served.min_version}-{served.max_version}, "
                f"this command speaks v{wanted.min_version}-{wanted.max_version}"
            )
        return highest

    def request(self, api: Api, values: dict[str, Any]) -> Any:
        """Send ``api`` built from ``values`` (fields its version lacks are dropped);
        returns kio's response body."""
        version = self.version(api)
        return self._wait(lambda: self._client.call(api.key, version, values))

    def _wait(self, exchange: Callable[[], _T]) -> _T:
        """Run ``exchange`` showing ``progress``, its failures as CommandErrors."""
        try:
            with progress(_WAITING):
                return exchange()
        except TimeoutError as exc:
            raise CommandError(
                f"no answer from the broker at {self.address} within {TIMEOUT_S:g} s"
            ) from exc
        except OSError as exc:
            raise CommandError(f"lost the broker at {self.address}: {_reason(exc)}") from exc
        except ProtocolError as exc:
            raise CommandError(f"the broker at {self.address} answered wrongly: {exc}") from exc


def _lenient_response(api_key: int, api_version: int) -> Any:
    """kio's response class of ``api_key`` at ``api_version``, made ``lenient``."""
    return lenient(response_schema(api_key, api_version))


def _lenient_type(field_type: Any, kafka_type: object) -> Any:
    """``field_type`` with its entity classes made lenient, and nullable if a timestamp."""
    if get_origin(field_type) is tuple:
        (inner, _) = get_args(field_type)
        return tuple[_lenient_type(inner, kafka_type), ...]  # type: ignore[misc]
    if dataclasses.is_dataclass(field_type):
        return lenient(field_type)  # type: ignore[arg-type]
    if kafka_type == _TIMESTAMP and get_origin(field_type) is not types.UnionType:
        return field_type | None
    return field_type


@functools.cache
def lenient(cls: type[Any]) -> type[Any]:
    """A copy of kio's entity class ``cls`` whose ``datetime_i64`` fields are nullable,
    at every depth, so Kafka's -1 "no time" reads as None instead of failing."""
    fields = []
    for field in dataclasses.fields(cls):
        keywords: dict[str, Any] = {"metadata": field.metadata}
        if field.default is not dataclasses.MISSING:
            keywords["default"] = field.default
        if field.default_factory is not dataclasses.MISSING:
            keywords["default_factory"] = field.default_factory
        field_type = _lenient_type(field.type, field.metadata.get("kafka_type"))
        fields.append((field.name, field_type, dataclasses.field(**keywords)))
    class_vars = {name: getattr(cls, name) for name in _KIO_CLASS_VARS if hasattr(cls, name)}
    return dataclasses.make_dataclass(
        cls.__name__, fields, namespace=class_vars, frozen=True, slots=True, kw_only=True
    )


def _reason(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def connect_bootstrap(servers: str) -> Connection:
    """A connection to the first of ``servers`` (``HOST:PORT[,HOST:PORT...]``) that answers."""
    failure: CommandError | None = None
    for address in servers.split(","):
        try:
            return Connection(*split_address(address.strip()))
        except CommandError as exc:
            failure = exc
    assert failure is not None  # str.split always yields at least one address
    raise failure
