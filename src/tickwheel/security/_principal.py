"""``KafkaPrincipal``: who a connection authenticated as, in Kafka's ``Type:name`` form.

A connection starts as ``ANONYMOUS`` (``User:ANONYMOUS``, Kafka's principal for a
PLAINTEXT or unauthenticated SSL connection); SASL authentication makes it
``User:<username>``, a client certificate ``User:<mapped DN>``. ACLs and
``super.users`` name principals the same way (``User:alice``, ``User:*``).

Concurrency: immutable values, safe anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"
WILDCARD_NAME = "*"


class PrincipalError(ValueError):
    """A principal string that is not ``Type:name``."""


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal: its type (``User``) and name."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """The principal ``text`` names (``User:alice``); ``PrincipalError`` if malformed."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise PrincipalError(f"a principal is Type:name, got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
"""The principal of a connection that did not authenticate."""
