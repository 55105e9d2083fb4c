"""Cached lookup of kio's request and response classes by API key and version.

kio resolves a schema by importing its module (about 12 µs, and ~3 s to import every
module), so each class is looked up once and kept; only the versions a caller asks
for are ever imported.

The caches are ``functools.cache``: safe from any thread.
"""

from __future__ import annotations

import functools

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.serial.writers import Writer
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

from tickwheel.protocol._errors import UnknownApiKeyError


@functools.cache
def request_schema(api_key: int, api_version: int) -> type[RequestPayload]:
    """kio's request class for ``api_key`` at ``api_version``."""
    try:
        return load_request_schema(api_key, api_version)
    except KioIndexError as exc:
        raise UnknownApiKeyError(f"no schema for api_key={api_key} v{api_version}") from exc


@functools.cache
def response_schema(api_key: int, api_version: int) -> type[ResponsePayload]:
    """kio's response class for ``api_key`` at ``api_version``."""
    try:
        return load_response_schema(api_key, api_version)
    except KioIndexError as exc:
        raise UnknownApiKeyError(f"no schema for api_key={api_key} v{api_version}") from exc


@functools.cache
def reader_for(cls: type[Entity]) -> Reader[Entity]:
    """kio's decoder for ``cls``, built once."""
    return entity_reader(cls)


@functools.cache
def writer_for(cls: type[Entity]) -> Writer[Entity]:
    """kio's encoder for ``cls``, built once."""
    return entity_writer(cls)
