"""The protocol layer's one error type, and why a request could not be read.

A ``ProtocolError`` means the bytes on a connection cannot be trusted any more; the
server logs it and closes that connection (Kafka does the same). Errors that belong
in a response body are Kafka error codes, never exceptions of this module.

Stateless; safe from any thread.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """A frame that cannot be answered: the connection that sent it must close."""


class FrameTooLargeError(ProtocolError):
    """A size prefix above ``socket.request.max.bytes``."""


class MalformedFrameError(ProtocolError):
    """A size prefix too small to hold even a request header (or negative)."""


class UnknownApiKeyError(ProtocolError):
    """A request for an API this broker does not implement."""


class UnsupportedVersionError(ProtocolError):
    """A request at a version this broker did not advertise."""


class UndecodableRequestError(ProtocolError):
    """A request whose header or body does not decode under its advertised schema."""
