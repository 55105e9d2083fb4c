"""The defence tier: one client cannot stop the broker for the others.

Each scenario of ``tickwheel.bench._defences`` runs against a ``tickwheel serve`` of its
own with the default configuration (plus the scenario's limit): while the attack stands,
a new client's ApiVersions is answered within 500 ms, an existing confluent-kafka
producer's acks=all record is acknowledged within 2 s, the broker's peak RSS stays
within its baseline + 400 MiB, no traceback is logged, and the scenario's own facts hold
(the connection closed at once, the flood taken at its rate and refused nowhere, ...).
"""

from __future__ import annotations

import pytest

from tickwheel.bench._defences import SCENARIOS, TARGETS, run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.defence]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_other_clients_do_not_notice(scenario: str) -> None:
    result = run_scenario(scenario)
    assert result.facts, "every scenario checks facts of its own"
    assert result.met, (TARGETS, result)
