"""``json_call``: one JSON request over HTTP with the standard library, for the project's
small REST clients (the schema registry's, from the command line and from Spark; the
fault endpoint's).

A call sends ``body`` (if any) as JSON with the caller's headers and returns the decoded
JSON answer. A refusal (an HTTP error status) raises ``HttpStatusError`` carrying the status,
the answer's text and its JSON document when it has one, so each client words the
refusal in its own API's terms (Confluent's ``error_code``/``message``, the fault
endpoint's ``error``). A server that does not answer raises ``OSError`` (``URLError`` is
one); an answer that is not JSON raises ``ValueError``.

Concurrency: no state; safe from any thread.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any


class HttpStatusError(Exception):
    """The server answered ``status``; ``document`` is its answer decoded as JSON, or
    None when the answer is not JSON, and ``text`` the answer as text."""

    def __init__(self, status: int, reason: str, text: str, document: object) -> None:
        super().__init__(f"HTTP {status}: {text.strip() or reason}")
        self.status = status
        self.reason = reason
        self.text = text
        self.document = document


def json_call(
    url: str,
    method: str,
    body: object = None,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    context: ssl.SSLContext | None = None,
) -> Any:
    """The decoded JSON answer of ``method url`` with ``body`` sent as JSON."""
    request = urllib.request.Request(
        url,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers=dict(headers),
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        with refused:
            text = refused.read().decode(errors="replace")
        try:
            document: object = json.loads(text)
        except ValueError:
            document = None
        raise HttpStatusError(refused.code, str(refused.reason), text, document) from None
