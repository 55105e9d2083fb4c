"""``FaultEndpointClient``: a broker's fault plan driven over its HTTP endpoint.

The client side of the ``/faults`` routes a broker serves beside ``/metrics`` when
``tickwheel.faults.endpoint.enable=true``: what ``tickwheel fault`` and
``LocalCluster`` (whose brokers are other processes) use. Standard library only (one
JSON request per call, ``json_call``). A refusal raises ``FaultEndpointError``
with the endpoint's status and reason (a bad rule's reason names the field); an
endpoint that does not answer raises it too, saying so.

Concurrency: no state but the address; safe from any thread.
"""

from __future__ import annotations

import base64
import urllib.error
from typing import Any, Final

from tickwheel._json_http import HttpStatusError, json_call

_TIMEOUT_S: Final = 10.0


class FaultEndpointError(Exception):
    """The endpoint refused a call (``status``), or did not answer (``status`` 0)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}" if status else reason)
        self.status = status


class FaultEndpointClient:
    """Calls one broker's ``/faults`` endpoint at ``url`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, url: str, *, user: str | None = None, password: str = "") -> None:
        self.url = url.rstrip("/")
        self._headers = {"Content-Type": "application/json"}
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"

    def add(self, **rule: object) -> dict[str, Any]:
        """Add the rule ``rule`` describes; the endpoint's view of it (``id``, ``rule``)."""
        added: dict[str, Any] = self._call("POST", "/faults", rule)
        return added

    def rules(self) -> list[dict[str, Any]]:
        """The rules in the plan, each with its ``id``, ``rule`` and ``hits``."""
        listed: list[dict[str, Any]] = self._call("GET", "/faults")
        return listed

    def remove(self, rule_id: int) -> dict[str, Any]:
        """Take rule ``rule_id`` out; the rule as it was."""
        removed: dict[str, Any] = self._call("DELETE", f"/faults/{rule_id}")
        return removed

    def clear(self) -> None:
        """Take every rule out."""
        self._call("DELETE", "/faults")

    def _call(self, method: str, path: str, body: object = None) -> Any:
        try:
            return json_call(
                self.url + path, method, body, headers=self._headers, timeout_s=_TIMEOUT_S
            )
        except HttpStatusError as refused:
            document = refused.document
            if isinstance(document, dict) and "error" in document:
                reason = str(document["error"])
            else:
                reason = refused.text.strip() or refused.reason
            raise FaultEndpointError(refused.status, reason) from None
        except OSError as exc:
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            message = f"no fault endpoint answered at {self.url}: {cause}"
            raise FaultEndpointError(0, message) from None
