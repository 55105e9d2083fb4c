"""The fault plan over HTTP beside /metrics: off by default, loopback only, super users
only under an authorizer, a bad rule answered 400 with the field named."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from server.wire import WireClient
from tickwheel.security import SCRAM_SHA_256, credential_to_string
from tickwheel.server import BackgroundBroker, BrokerConfig, ConfigError

pytestmark = pytest.mark.integration

HEARTBEAT = 12
HEARTBEAT_REQUEST = {"group_id": "g", "generation_id": 1, "member_id": "m"}


def call(
    broker: BackgroundBroker,
    method: str,
    path: str,
    body: object = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.metrics_port}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers=headers or {},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, json.loads(refused.read())


@pytest.fixture
def tickwheel_broker_properties() -> dict[str, str]:
    return {"tickwheel.metrics.port": "0", "tickwheel.faults.endpoint.enable": "true"}


def test_rules_are_added_listed_and_removed_over_http(tickwheel_broker: BackgroundBroker) -> None:
    status, added = call(
        tickwheel_broker, "POST", "/faults", {"api": "Heartbeat", "error": "REBALANCE_IN_PROGRESS"}
    )
    assert (status, added["rule"], added["hits"]) == (
        201,
        "Heartbeat error REBALANCE_IN_PROGRESS",
        0,
    )
    client = WireClient(tickwheel_broker.bootstrap_servers)
    try:
        answer = client.call(HEARTBEAT, 4, HEARTBEAT_REQUEST)
        assert answer.error_code == ErrorCode.rebalance_in_progress
        assert call(tickwheel_broker, "GET", "/faults") == (200, [{**added, "hits": 1}])
        assert call(tickwheel_broker, "DELETE", f"/faults/{added['id']}")[0] == 200
        assert call(tickwheel_broker, "DELETE", f"/faults/{added['id']}")[0] == 404
        assert client.call(HEARTBEAT, 4, HEARTBEAT_REQUEST).error_code != (
            ErrorCode.rebalance_in_progress
        )
        call(tickwheel_broker, "POST", "/faults", {"api": "Fetch", "kind": "delay", "delay_ms": 5})
        assert call(tickwheel_broker, "DELETE", "/faults") == (200, [])
        assert not tickwheel_broker.faults.armed
    finally:
        client.close()


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"api": "Heartbeet", "error": "NOT_COORDINATOR"}, "field 'api': unknown API 'Heartbeet'"),
        ({"api": "Heartbeat", "error": "NOT_A_COORDINATOR"}, "field 'error': unknown error"),
        ({"api": "Heartbeat", "error": 16, "tpoic": "t"}, "field 'tpoic': not a fault rule field"),
        (["Heartbeat"], "the body must be a JSON object of rule fields"),
    ],
)
def test_a_bad_rule_is_answered_400_with_the_reason(
    tickwheel_broker: BackgroundBroker, body: object, reason: str
) -> None:
    status, answer = call(tickwheel_broker, "POST", "/faults", body)
    assert status == 400
    assert reason in answer["error"]


def test_the_endpoint_is_off_by_default(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "tickwheel.metrics.port": "0",
        }
    )
    with BackgroundBroker(config) as broker:
        url = f"http://127.0.0.1:{broker.metrics_port}/faults"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(url, method="POST", data=b"{}"))
        refused.value.close()
        assert refused.value.code == 400
        assert not broker.faults.armed


def test_the_endpoint_needs_the_metrics_port(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tickwheel\.faults\.endpoint\.enable needs"):
        BrokerConfig.from_properties(
            {"log.dirs": str(tmp_path), "tickwheel.faults.endpoint.enable": "true"}
        )


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_under_an_authorizer_only_a_super_user_may_add_rules(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "tickwheel.metrics.port": "0",
            "tickwheel.faults.endpoint.enable": "true",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        }
    )
    with BackgroundBroker(config) as broker:
        for user in ("admin", "bob"):
            secret = credential_to_string(SCRAM_SHA_256.credential(f"{user}-secret"))
            broker.call(lambda b, u=user, s=secret: b.context.users.apply(u, {"SCRAM-SHA-256": s}))
        rule = {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}
        assert call(broker, "POST", "/faults", rule)[0] == 401
        assert call(broker, "POST", "/faults", rule, basic("admin", "wrong"))[0] == 401
        status, answer = call(broker, "POST", "/faults", rule, basic("bob", "bob-secret"))
        assert (status, answer) == (403, {"error": "User:bob is not a super user (super.users)"})
        assert not broker.faults.armed
        assert call(broker, "POST", "/faults", rule, basic("admin", "admin-secret"))[0] == 201
        assert broker.faults.armed
