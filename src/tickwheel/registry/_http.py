"""The registry's REST API (Confluent Schema Registry v1), served with aiohttp.

aiohttp runs on the broker's own event loop, so a handler calls the ``SchemaRegistry``
directly. Routes are Confluent's: ``/subjects`` and their versions, ``/schemas/ids/...``,
``/config`` and ``/mode`` (global and per subject), ``/compatibility/subjects/...``.
Bodies are read as JSON whatever their content type (clients send
``application/vnd.schemaregistry.v1+json``) and answered in that type.

Every request is authenticated and authorized first (``RegistryAccess``: 401 with a
``WWW-Authenticate`` challenge, 403). Every refusal is Confluent's JSON error body with
its HTTP status: a ``RegistryError`` as raised, a body that is not JSON 400 (error_code
400), a body of the wrong shape 422, an unknown path 404 and a wrong method 405 (their
status as the error_code), and any other failure 500 (50001) with the cause logged,
never a traceback in the answer.

``RegistryServer`` binds its sockets in ``start`` (port 0 takes a free port; ``ports``
tells which) and closes them in ``stop``; an ``https`` listener serves TLS with the
context it is given (the broker's ``ssl.*`` settings).

Concurrency: event-loop thread only.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Middleware

from tickwheel.registry import _errors as errors
from tickwheel.registry._access import RegistryAccess
from tickwheel.registry._avro import AVRO
from tickwheel.registry._json_schema import JSON
from tickwheel.registry._records import SchemaValue
from tickwheel.registry._registry import SchemaRegistry, SchemaRequest, request_references

_log = logging.getLogger(__name__)
T = TypeVar("T")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
LISTENERS_PROPERTY = "schema.registry.listeners"
_SCHEMA_TYPES = [AVRO, JSON]
_CHALLENGE = 'Basic realm="tickwheel schema registry"'
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RegistryListenerError(ValueError):
    """``schema.registry.listeners`` names something the registry cannot serve."""


@dataclass(frozen=True, slots=True)
class RegistryListener:
    """One ``http://HOST:PORT`` or ``https://HOST:PORT`` of ``schema.registry.listeners``."""

    host: str
    port: int
    tls: bool = False


def parse_listeners(value: str) -> list[RegistryListener]:
    """The listeners of a ``schema.registry.listeners`` value (empty: the registry is off)."""
    listeners: list[RegistryListener] = []
    for entry in filter(None, (part.strip() for part in value.split(","))):
        url = urlsplit(entry)
        try:
            port = url.port
        except ValueError:
            port = None
        if url.scheme not in ("http", "https") or port is None or url.path not in ("", "/"):
            raise RegistryListenerError(
                f"{LISTENERS_PROPERTY}: '{entry}' is not http://HOST:PORT or https://HOST:PORT"
            )
        listeners.append(RegistryListener(url.hostname or "0.0.0.0", port, url.scheme == "https"))
    return listeners


def _json(body: object, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=CONTENT_TYPE)


def _changes(request: web.Request) -> bool:
    """Whether ``request`` changes the registry (a lookup or a check is a POST that reads)."""
    if request.method in ("PUT", "DELETE"):
        return True
    return (
        request.method == "POST"
        and request.path.startswith("/subjects/")
        and request.path.endswith("/versions")
    )


def _middleware(access: RegistryAccess) -> Middleware:
    """The middleware that authenticates, authorizes, and answers every refusal as JSON."""

    @web.middleware
    async def errors_as_json(request: web.Request, handler: _Handler) -> web.StreamResponse:
        try:
            principal = access.principal(request.headers.get("Authorization"))
            access.check(principal, request.remote or "", write=_changes(request))
            return await handler(request)
        except errors.RegistryError as exc:
            answer = _json(exc.body(), exc.status)
            if exc.status == errors.HTTP_UNAUTHORIZED:
                answer.headers["WWW-Authenticate"] = _CHALLENGE
            return answer
        except web.HTTPException as exc:
            return _json(
                {"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status
            )
        except Exception:  # the last defence: a failure is logged, never sent as a traceback
            _log.exception("schema registry: %s %s failed", request.method, request.path)
            failure = errors.store_error("internal error")
            return _json(failure.body(), failure.status)

    return errors_as_json


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    try:
        document = json.loads(raw) if raw.strip() else None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise errors.bad_request(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise errors.unprocessable("the body must be a JSON object")
    return document


async def _schema_request(request: web.Request) -> SchemaRequest:
    body = await _body(request)
    schema = body.get("schema")
    if not isinstance(schema, str):
        raise errors.unprocessable("the field 'schema' is required and must be a string")
    schema_type = body.get("schemaType") or AVRO
    if not isinstance(schema_type, str):
        raise errors.unprocessable("the field 'schemaType' must be a string")
    references = body.get("references") or []
    if not isinstance(references, list):
        raise errors.unprocessable("the field 'references' must be a list")
    schema_id, version = body.get("id"), body.get("version")
    for name, given in (("id", schema_id), ("version", version)):
        if given is not None and (not isinstance(given, int) or isinstance(given, bool)):
            raise errors.unprocessable(f"the field '{name}' must be an integer")
    return SchemaRequest(
        schema, schema_type.upper(), request_references(references), schema_id, version
    )


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


def _listing(request: web.Request, listed: Callable[[bool], list[T]]) -> list[T]:
    """What a listing's ``deleted`` and ``deletedOnly`` (or ``deleted_only``) ask for."""
    if _flag(request, "deletedOnly") or _flag(request, "deleted_only"):
        live = set(listed(False))
        return [item for item in listed(True) if item not in live]
    return listed(_flag(request, "deleted"))


def _page(request: web.Request, items: list[T]) -> list[T]:
    """The ``offset``/``limit`` page of ``items`` (a negative limit: all after offset)."""
    try:
        offset = int(request.query.get("offset", "0"))
        limit = int(request.query.get("limit", "-1"))
    except ValueError:
        raise errors.unprocessable("offset and limit must be integers") from None
    offset = max(offset, 0)
    return items[offset:] if limit < 0 else items[offset : offset + limit]


def _schema_id(request: web.Request) -> int:
    text = request.match_info["id"]
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found(f"Schema {text} not found") from None


def _schema_fields(value: SchemaValue) -> dict[str, object]:
    fields: dict[str, object] = {"schema": value.schema}
    if value.schema_type != AVRO:
        fields["schemaType"] = value.schema_type
    if value.references:
        fields["references"] = [reference.as_json() for reference in value.references]
    return fields


def _version_body(value: SchemaValue) -> dict[str, object]:
    return {
        "subject": value.subject,
        "version": value.version,
        "id": value.schema_id,
        **_schema_fields(value),
    }


def _subject(request: web.Request) -> str:
    return request.match_info["subject"]


def _routes(registry: SchemaRegistry) -> list[web.RouteDef]:
    """``/subjects`` and ``/schemas``: the schemas and their versions."""

    async def root(request: web.Request) -> web.Response:
        return _json({})

    async def schema_types(request: web.Request) -> web.Response:
        return _json(_SCHEMA_TYPES)

    async def schema_by_id(request: web.Request) -> web.Response:
        return _json(_schema_fields(registry.schema(_schema_id(request))))

    async def schema_text_by_id(request: web.Request) -> web.Response:
        return web.Response(text=registry.schema(_schema_id(request)).schema)

    async def id_versions(request: web.Request) -> web.Response:
        pairs = registry.id_versions(_schema_id(request), deleted=_flag(request, "deleted"))
        return _json([{"subject": subject, "version": version} for subject, version in pairs])

    async def id_subjects(request: web.Request) -> web.Response:
        pairs = registry.id_versions(_schema_id(request), deleted=_flag(request, "deleted"))
        return _json(sorted({subject for subject, _ in pairs}))

    async def subjects(request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        listed = _listing(request, lambda deleted: registry.subjects(deleted=deleted))
        return _json(_page(request, [subject for subject in listed if subject.startswith(prefix)]))

    async def versions(request: web.Request) -> web.Response:
        subject = _subject(request)
        listed = _listing(request, lambda deleted: registry.versions(subject, deleted=deleted))
        return _json(_page(request, listed))

    async def version(request: web.Request) -> web.Response:
        value = registry.version(
            _subject(request), request.match_info["version"], deleted=_flag(request, "deleted")
        )
        return _json(_version_body(value))

    async def version_schema(request: web.Request) -> web.Response:
        value = registry.version(
            _subject(request), request.match_info["version"], deleted=_flag(request, "deleted")
        )
        return web.Response(text=value.schema)

    async def referenced_by(request: web.Request) -> web.Response:
        return _json(registry.referenced_by(_subject(request), request.match_info["version"]))

    async def register(request: web.Request) -> web.Response:
        value = await registry.register(
            _subject(request), await _schema_request(request), normalize=_flag(request, "normalize")
        )
        return _json({"id": value.schema_id})

    async def lookup(request: web.Request) -> web.Response:
        value = registry.lookup(
            _subject(request),
            await _schema_request(request),
            normalize=_flag(request, "normalize"),
            deleted=_flag(request, "deleted"),
        )
        return _json(_version_body(value))

    async def delete_subject(request: web.Request) -> web.Response:
        deleted = await registry.delete_subject(
            _subject(request), permanent=_flag(request, "permanent")
        )
        return _json(deleted)

    async def delete_version(request: web.Request) -> web.Response:
        deleted = await registry.delete_version(
            _subject(request), request.match_info["version"], permanent=_flag(request, "permanent")
        )
        return _json(deleted)

    return [
        web.get("/", root),
        web.get("/schemas/types", schema_types),
        web.get("/schemas/ids/{id}", schema_by_id),
        web.get("/schemas/ids/{id}/schema", schema_text_by_id),
        web.get("/schemas/ids/{id}/versions", id_versions),
        web.get("/schemas/ids/{id}/subjects", id_subjects),
        web.get("/subjects", subjects),
        web.post("/subjects/{subject}", lookup),
        web.delete("/subjects/{subject}", delete_subject),
        web.get("/subjects/{subject}/versions", versions),
        web.post("/subjects/{subject}/versions", register),
        web.get("/subjects/{subject}/versions/{version}", version),
        web.delete("/subjects/{subject}/versions/{version}", delete_version),
        web.get("/subjects/{subject}/versions/{version}/schema", version_schema),
        web.get("/subjects/{subject}/versions/{version}/referencedby", referenced_by),
    ]


def _settings_routes(registry: SchemaRegistry) -> list[web.RouteDef]:
    """``/config``, ``/mode`` and ``/compatibility``: levels, modes and checks."""

    async def get_config(request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is None or _flag(request, "defaultToGlobal"):
            level = registry.compatibility(subject)
        else:
            level = registry.subject_compatibility(subject)
        return _json({"compatibilityLevel": level.value})

    async def put_config(request: web.Request) -> web.Response:
        body = await _body(request)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str):
            raise errors.unprocessable("the field 'compatibility' is required and must be a string")
        chosen = await registry.set_compatibility(request.match_info.get("subject"), level.upper())
        return _json({"compatibility": chosen.value})

    async def delete_config(request: web.Request) -> web.Response:
        previous = await registry.delete_compatibility(request.match_info.get("subject"))
        return _json({"compatibilityLevel": previous.value})

    async def get_mode(request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        if subject is None or _flag(request, "defaultToGlobal"):
            return _json({"mode": registry.mode(subject)})
        return _json({"mode": registry.subject_mode(subject)})

    async def put_mode(request: web.Request) -> web.Response:
        body = await _body(request)
        mode = body.get("mode")
        if not isinstance(mode, str):
            raise errors.unprocessable("the field 'mode' is required and must be a string")
        return _json(
            {"mode": await registry.set_mode(request.match_info.get("subject"), mode.upper())}
        )

    async def delete_mode(request: web.Request) -> web.Response:
        return _json({"mode": await registry.delete_mode(_subject(request))})

    async def compatibility(request: web.Request) -> web.Response:
        reasons = registry.check_compatibility(
            _subject(request), request.match_info.get("version"), await _schema_request(request)
        )
        body: dict[str, object] = {"is_compatible": not reasons}
        if _flag(request, "verbose"):
            body["messages"] = reasons
        return _json(body)

    return [
        web.get("/config", get_config),
        web.put("/config", put_config),
        web.delete("/config", delete_config),
        web.get("/config/{subject}", get_config),
        web.put("/config/{subject}", put_config),
        web.delete("/config/{subject}", delete_config),
        web.get("/mode", get_mode),
        web.put("/mode", put_mode),
        web.get("/mode/{subject}", get_mode),
        web.put("/mode/{subject}", put_mode),
        web.delete("/mode/{subject}", delete_mode),
        web.post("/compatibility/subjects/{subject}/versions", compatibility),
        web.post("/compatibility/subjects/{subject}/versions/{version}", compatibility),
    ]


class RegistryServer:
    """The REST API of ``registry`` on ``listeners``."""

    def __init__(
        self,
        registry: SchemaRegistry,
        listeners: list[RegistryListener],
        *,
        access: RegistryAccess,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        app = web.Application(middlewares=[_middleware(access)])
        app.add_routes(_routes(registry))
        app.add_routes(_settings_routes(registry))
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        self._listeners = listeners
        self._tls = tls
        self.ports: list[int] = []

    async def start(self) -> None:
        """Bind every listener and serve (``RegistryListenerError`` if one cannot be bound)."""
        await self._runner.setup()
        for listener in self._listeners:
            try:
                sock = socket.create_server((listener.host, listener.port), reuse_port=False)
            except OSError as exc:
                raise RegistryListenerError(
                    f"{LISTENERS_PROPERTY}: cannot listen on {listener.host}:{listener.port}: "
                    f"{exc.strerror or exc}"
                ) from exc
            self.ports.append(sock.getsockname()[1])
            context = self._tls if listener.tls else None
            await web.SockSite(self._runner, sock, ssl_context=context).start()

    async def stop(self) -> None:
        """Close the listeners and the connections."""
        await self._runner.cleanup()
