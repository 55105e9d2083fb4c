"""Raw AlterClientQuotas and DescribeClientQuotas requests for the quota tests."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from .wire import WireClient

DESCRIBE, ALTER = 48, 49


def alter_quotas(
    client: WireClient,
    entity: list[tuple[str, str | None]],
    ops: list[tuple[str, float | None]],
    *,
    validate_only: bool = False,
) -> Any:
    """One AlterClientQuotas entry (value None: remove the key); its answer."""
    body = client.call(
        ALTER,
        1,
        {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [{"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops],
                }
            ],
            "validate_only": validate_only,
        },
    )
    return body.entries[0]


def describe_quotas(
    client: WireClient, components: list[tuple[str, int, str | None]], *, strict: bool = False
) -> Any:
    """A DescribeClientQuotas of ``components`` (entity type, match type, match)."""
    return client.call(
        DESCRIBE,
        1,
        {
            "components": [
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            "strict": strict,
        },
    )


def described_quotas(body: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """A DescribeClientQuotas answer's entries: the quotas by entity."""
    assert body.error_code == ErrorCode.none, body.error_message
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: float(v.value) for v in entry.values
        }
        for entry in body.entries
    }
