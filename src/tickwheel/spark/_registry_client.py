"""A small client of a Confluent-compatible schema registry, for the driver and executors.

The source and sink need four calls of the registry's REST API (v1): a subject's latest
version (``GET /subjects/{s}/versions/latest``, the source's reader schema, on the
driver), a schema by id (``GET /schemas/ids/{id}``, each record's writer schema, on the
executors), and registering (``POST /subjects/{s}/versions``) or looking up
(``POST /subjects/{s}``) the sink's schema, on the driver. They are JSON round trips
through the standard library (``json_call``): confluent-kafka's ``SchemaRegistryClient``
would bring httpx, authlib, cachetools and attrs into every executor for the same four
requests. Each URL of ``schema.registry.url`` is tried in turn until one answers;
``schema.registry.basic.auth.user.info`` (``user:password``) is sent as HTTP basic
authentication and ``schema.registry.ssl.ca.location`` verifies an https registry.

A registry never changes the schema behind an id, so each process keeps every schema
it fetched by id (``schema_by_id``) for its life: a Spark worker asks once per id,
however many records and tasks carry it. Ids not found are not kept. The cache is as
large as the number of schema ids the process met, which a registry keeps small.

Errors are ``SparkKafkaError``\\s naming the registry, the subject or id, and the
registry's own error code and message; only a missing id or schema is answered as None,
so the caller can name the record that carried it.

Concurrency: the cache is guarded by a lock (two threads missing the same id may both
fetch it; both get the same schema); the calls are otherwise stateless.
"""

from __future__ import annotations

import base64
import ssl
import threading
import urllib.parse
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

from tickwheel._json_http import HttpStatusError, json_call
from tickwheel.spark._errors import SparkKafkaError
from tickwheel.spark._options import RegistryOptions

AVRO_TYPE: Final = "AVRO"
# Confluent's clients wait 10 s per request by default.
REQUEST_TIMEOUT_S: Final = 10.0
_CONTENT_TYPE: Final = "application/vnd.schemaregistry.v1+json"
# Confluent's error codes for a subject, version or schema that is not there.
_NOT_FOUND_CODES: Final = frozenset({40401, 40402, 40403})


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry holds it: its id, text and type (``AVRO``, ``JSON``,
    ``PROTOBUF``), and its version under the subject it was asked by, if any."""

    schema_id: int
    text: str
    schema_type: str
    version: int | None = None


_cache_lock = threading.Lock()
_schemas_by_id: dict[tuple[RegistryOptions, int], RegisteredSchema] = {}


def latest_version(registry: RegistryOptions, subject: str) -> RegisteredSchema:
    """The latest version of ``subject``; raises ``SparkKafkaError`` if it has none."""
    answer = _request(registry, "GET", f"/subjects/{_quoted(subject)}/versions/latest")
    if answer is None:
        raise SparkKafkaError(
            f"subject {subject!r} has no schema in the schema registry {_names(registry)}"
        )
    return _registered(answer, subject)


def schema_by_id(registry: RegistryOptions, schema_id: int) -> RegisteredSchema | None:
    """The schema registered with ``schema_id``, or None when the registry has none."""
    key = (registry, schema_id)
    with _cache_lock:
        cached = _schemas_by_id.get(key)
    if cached is not None:
        return cached
    answer = _request(registry, "GET", f"/schemas/ids/{schema_id}")
    if answer is None:
        return None
    found = RegisteredSchema(
        schema_id=schema_id,
        text=str(answer["schema"]),
        schema_type=str(answer.get("schemaType", AVRO_TYPE)),
    )
    _refuse_references(answer, f"schema id {schema_id}")
    with _cache_lock:
        _schemas_by_id[key] = found
    return found


def register(registry: RegistryOptions, subject: str, text: str) -> int:
    """Register the Avro schema ``text`` under ``subject`` (or find it there); its id."""
    answer = _request(registry, "POST", f"/subjects/{_quoted(subject)}/versions", {"schema": text})
    if answer is None:
        raise SparkKafkaError(f"the schema registry {_names(registry)} refused {subject!r}")
    return int(answer["id"])


def lookup(registry: RegistryOptions, subject: str, text: str) -> int | None:
    """The id of the Avro schema ``text`` under ``subject``, or None if not registered."""
    answer = _request(registry, "POST", f"/subjects/{_quoted(subject)}", {"schema": text})
    return None if answer is None else int(answer["id"])


def _registered(answer: dict[str, Any], subject: str) -> RegisteredSchema:
    _refuse_references(answer, f"subject {subject!r}")
    return RegisteredSchema(
        schema_id=int(answer["id"]),
        text=str(answer["schema"]),
        schema_type=str(answer.get("schemaType", AVRO_TYPE)),
        version=int(answer["version"]),
    )


def _refuse_references(answer: dict[str, Any], what: str) -> None:
    if answer.get("references"):
        raise SparkKafkaError(
            f"{what} refers to other subjects' schemas (references), which the Spark"
            " source and sink do not follow"
        )


def _request(
    registry: RegistryOptions, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The JSON answer of the first URL that answers, or None for Confluent's
    not-found codes; raises ``SparkKafkaError`` for any other refusal, or none answering."""
    headers = {"Accept": _CONTENT_TYPE}
    if body is not None:
        headers["Content-Type"] = _CONTENT_TYPE
    if registry.user_info is not None:
        token = base64.b64encode(registry.user_info.encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    context = None
    if registry.ca_location is not None:
        context = ssl.create_default_context(cafile=registry.ca_location)
    failures: list[str] = []
    for url in registry.urls:
        try:
            answer: dict[str, Any] = json_call(
                url.rstrip("/") + path,
                method,
                body,
                headers=headers,
                timeout_s=REQUEST_TIMEOUT_S,
                context=context,
            )
        except HttpStatusError as refusal:
            _raise_unless_not_found(url, method, path, refusal)
            return None
        except (OSError, ValueError) as exc:
            failures.append(f"{url}: {getattr(exc, 'reason', exc)}")
        else:
            return answer
    raise SparkKafkaError(f"no schema registry answered {method} {path}: {'; '.join(failures)}")


def _raise_unless_not_found(url: str, method: str, path: str, refusal: HttpStatusError) -> None:
    """Raise ``SparkKafkaError`` for a refusal other than Confluent's not-found."""
    document = refusal.document if isinstance(refusal.document, dict) else {}
    code = document.get("error_code", refusal.status)
    message = document.get("message", refusal.reason)
    if refusal.status != HTTPStatus.NOT_FOUND or code not in _NOT_FOUND_CODES:
        raise SparkKafkaError(
            f"the schema registry {url} refused {method} {path}: {message} (error {code})"
        )


def _quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def _names(registry: RegistryOptions) -> str:
    return ", ".join(registry.urls)
