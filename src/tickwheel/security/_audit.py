"""The authorizer's audit trail: one line per decision on ``kafka.authorizer.logger``.

Kafka's wording, so log tooling written for Kafka reads it::

    Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on
    resource = Topic:LITERAL:orders for request = Produce with resourceRefCount = 1

A denial the client asked for is logged at INFO, an allowed access at DEBUG; a decision
that only filters what a client sees (the topics of a Metadata request for all topics)
goes to DEBUG either way, as Kafka sends it to TRACE.

Concurrency: the standard ``logging`` module; safe anywhere.
"""

from __future__ import annotations

import logging

from tickwheel.security._acl import AclOperation, ResourcePattern
from tickwheel.security._session import Session

AUTHORIZER_LOGGER = "kafka.authorizer.logger"
_log = logging.getLogger(AUTHORIZER_LOGGER)


def log_decision(
    session: Session,
    request_name: str,
    operation: AclOperation,
    pattern: ResourcePattern,
    *,
    allowed: bool,
    ref_count: int = 1,
    log_if_denied: bool = True,
) -> None:
    """Write the audit line of one decision at the level Kafka writes it."""
    level = logging.INFO if not allowed and log_if_denied else logging.DEBUG
    if not _log.isEnabledFor(level):
        return
    _log.log(
        level,
        "Principal = %s is %s operation = %s from host = %s on resource = %s "
        "for request = %s with resourceRefCount = %d",
        session.principal,
        "Allowed" if allowed else "Denied",
        operation.name,
        session.client_host,
        pattern,
        request_name,
        ref_count,
    )
