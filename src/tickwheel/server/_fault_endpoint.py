"""``FaultEndpoint``: the broker's fault plan over HTTP, beside ``/metrics``.

Tests in any language drive the plan (``tickwheel.faults``) through four routes on
the metrics port, JSON in and out:

- ``GET /faults``: the rules, each ``{"id", "rule", "hits"}``;
- ``POST /faults`` with a rule's fields (``{"api": "Produce", "error":
  "NOT_LEADER_OR_FOLLOWER", "count": 3}``): 201 and the new rule; a bad rule is 400
  with the reason, which names the field;
- ``DELETE /faults/ID``: the rule out (404 if it is not in the plan);
- ``DELETE /faults``: every rule out; service is normal from the next request.

It is off unless ``tickwheel.faults.endpoint.enable=true``, and even then answers only
clients on a loopback address (403 otherwise), since it makes the broker fail on
demand. Under an authorizer (``authorizer.class.name``) a request must also log in
with HTTP Basic credentials of a user with SCRAM credentials on the broker, and that
``User:`` principal must be one of ``super.users`` (401 without valid credentials, 403
for anyone else), as Kafka lets only super users past every ACL.

Concurrency: on the broker's event loop, like the metrics server.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from tickwheel.faults import FaultHandle, FaultPlan, FaultRuleError
from tickwheel.security import (
    AclAuthorizer,
    BasicCredentialsError,
    BasicLogin,
    ScramCredentials,
    basic_credentials,
)

FAULTS_PATH: Final = "/faults"
ENDPOINT_PROPERTY: Final = "tickwheel.faults.endpoint.enable"
_USER_PREFIX: Final = "User:"


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """An HTTP status and a JSON body."""

    status: int
    body: object

    def encoded(self) -> bytes:
        """The body as JSON text, newline-terminated."""
        return json.dumps(self.body).encode() + b"\n"


def _rule_json(handle: FaultHandle) -> dict[str, object]:
    return {"id": handle.rule_id, "rule": handle.rule.describe(), "hits": handle.hits}


def _error(status: int, reason: str) -> HttpAnswer:
    return HttpAnswer(status, {"error": reason})


class FaultEndpoint:
    """Answers ``/faults`` requests for one broker's ``FaultPlan``."""

    def __init__(
        self,
        plan: FaultPlan,
        authorizer: Callable[[], AclAuthorizer | None],
        credentials: ScramCredentials,
    ) -> None:
        self._plan = plan
        self._authorizer = authorizer
        self._login = BasicLogin(credentials.lookup)

    def answer(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, peer_host: str
    ) -> HttpAnswer:
        """The answer to one request (``path`` under ``/faults``)."""
        refusal = self._refusal(headers, peer_host)
        if refusal is not None:
            return refusal
        rest = path[len(FAULTS_PATH) :].strip("/")
        if method == "GET" and not rest:
            return HttpAnswer(200, [_rule_json(handle) for handle in self._plan.handles])
        if method == "POST" and not rest:
            return self._add(body)
        if method == "DELETE" and not rest:
            self._plan.clear()
            return HttpAnswer(200, [])
        if method == "DELETE":
            return self._remove(rest)
        return _error(405, f"{method} {path} is not a fault endpoint route")

    def _add(self, body: bytes) -> HttpAnswer:
        try:
            values = json.loads(body or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return _error(400, f"the body is not JSON: {exc}")
        if not isinstance(values, dict):
            return _error(400, "the body must be a JSON object of rule fields")
        try:
            handle = self._plan.add(**values)
        except FaultRuleError as exc:
            return _error(400, str(exc))
        return HttpAnswer(201, _rule_json(handle))

    def _remove(self, rule_id: str) -> HttpAnswer:
        handle = self._plan.get(int(rule_id)) if rule_id.isdigit() else None
        if handle is None:
            return _error(404, f"no fault rule {rule_id}")
        handle.remove()
        return HttpAnswer(200, _rule_json(handle))

    def _refusal(self, headers: Mapping[str, str], peer_host: str) -> HttpAnswer | None:
        try:
            loopback = ipaddress.ip_address(peer_host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            return _error(403, "the fault endpoint answers loopback clients only")
        authorizer = self._authorizer()
        if authorizer is None:
            return None
        user = self._basic_user(headers.get("authorization"))
        if user is None:
            return _error(401, "log in with the Basic credentials of a SCRAM user")
        if f"{_USER_PREFIX}{user}" not in authorizer.super_users:
            return _error(403, f"User:{user} is not a super user (super.users)")
        return None

    def _basic_user(self, authorization: str | None) -> str | None:
        """The user whose Basic credentials match their SCRAM credential, if any."""
        try:
            user, password = basic_credentials(authorization)
        except BasicCredentialsError:
            return None
        return user if self._login.verify(user, password) else None
