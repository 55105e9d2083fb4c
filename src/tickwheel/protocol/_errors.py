"""The protocol layer's one error type, and why a request (or, for a client, a
response) could not be read.

A ``ProtocolError`` means a frame cannot be served as sent. Most of them mean the
bytes on the connection cannot be trusted any more: the server logs it and closes
that connection, as Kafka does. ``InvalidRequestError`` is the exception: its frame
was read whole, so the connection may go on; it carries the INVALID_REQUEST (42)
answer when the API's response can say so. Errors that belong in a response body are
Kafka error codes, never exceptions of this module.

Stateless; safe from any thread.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A frame that cannot be served as sent."""


class FrameTooLargeError(ProtocolError):
    """A size prefix above ``socket.request.max.bytes``."""


class TlsHandshakeError(ProtocolError):
    """A TLS handshake record where a size prefix belongs: a client speaking SSL."""


class MalformedFrameError(ProtocolError):
    """A size prefix too small to hold even a request header (or negative), or a
    response frame that ends before its header or body does."""


class UnknownApiKeyError(ProtocolError):
    """A request for an API this broker does not implement."""


class UnsupportedVersionError(ProtocolError):
    """A request at a version this broker did not advertise."""


class InvalidRequestError(ProtocolError):
    """A request of a known API and version that breaks its schema (Kafka's
    InvalidRequestException): bytes that do not decode, a null where the schema has
    no null, a negative array length.

    ``response`` is the whole answer frame, INVALID_REQUEST in the response's
    top-level error code, when the API's response at that version has one; None
    when it has not, and the connection must close.
    """

    def __init__(self, message: str, response: bytes | None) -> None:
        super().__init__(message)
        self.response = response
