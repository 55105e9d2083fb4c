"""Deterministic fault injection: make the broker fail on purpose, on its own clock.

A broker has one ``FaultPlan`` (``broker.faults``). A test adds rules to it
(``FaultRule``, or plain values through ``parse_rule``): which requests (API, version,
topic, partition, group, client, principal, listener) and what happens to them (an
error answered as Kafka answers it, a delayed answer, a closed connection, a dropped
request or answer, a throttle). ``add`` returns a ``FaultHandle`` that counts the
requests its rule hit and takes the rule out again.

The room sits below ``server/``: the dispatcher consults the plan for each request
while it is armed and carries the hit out through ``FaultEffects``; this package
imports only ``protocol`` and ``security`` (the connection's session) and knows no
socket, handler or timer. Delays are waits on the broker's timing wheel, so a
``ManualClock`` moves them.

Modules: ``_rules`` (a rule and its parsing), ``_shape`` (where any API's topics and
partitions are), ``_answers`` (error answers in Kafka's shape), ``_index`` (rules by
topic and client id), ``_plan`` (matching, applying, counting), ``_client`` (the plan
of a broker in another process, over its HTTP endpoint), ``_catalogue`` (the errors
Kafka answers to each API clients recover through, and where: ``INJECTABLE``).
"""

from tickwheel.faults._answers import Answer, AnswerShapeError, error_answer
from tickwheel.faults._catalogue import (
    INJECTABLE,
    ErrorPlace,
    InjectableApi,
    injectable_errors_table,
)
from tickwheel.faults._client import FaultEndpointClient, FaultEndpointError
from tickwheel.faults._plan import FaultEffects, FaultHandle, FaultHit, FaultPlan
from tickwheel.faults._rules import (
    FaultKind,
    FaultPhase,
    FaultRule,
    FaultRuleError,
    parse_api,
    parse_error,
    parse_rule,
)

__all__ = [
    "INJECTABLE",
    "Answer",
    "AnswerShapeError",
    "ErrorPlace",
    "FaultEffects",
    "FaultEndpointClient",
    "FaultEndpointError",
    "FaultHandle",
    "FaultHit",
    "FaultKind",
    "FaultPhase",
    "FaultPlan",
    "FaultRule",
    "FaultRuleError",
    "InjectableApi",
    "error_answer",
    "injectable_errors_table",
    "parse_api",
    "parse_error",
    "parse_rule",
]
