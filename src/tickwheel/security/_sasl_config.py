"""What a SASL listener accepts: its mechanisms, its PLAIN users, its session lifetime.

Kafka configures each listener with properties that may carry the listener's prefix
``listener.name.<listener, lower case>.``; the prefixed one wins:

- ``sasl.enabled.mechanisms`` (Kafka's default ``GSSAPI``). tickwheel serves PLAIN,
  SCRAM-SHA-256 and SCRAM-SHA-512; the enabled mechanisms are those of the list this
  broker serves, in the list's order, and the others (GSSAPI, OAUTHBEARER) are
  ignored with a warning. A SASL listener left with none does not start: with Kafka's
  default (GSSAPI alone) set the property.
- the JAAS line of a mechanism, ``listener.name.<l>.<mechanism, lower case>.sasl.jaas.config``
  as Kafka reads it, else ``sasl.jaas.config``: for PLAIN, ``PlainLoginModule`` with
  its ``user_<name>="<password>"`` options (the users PLAIN accepts); for any
  mechanism, ``username``/``password`` are this broker's own identity when it connects
  to another broker (``client_credentials``).
- ``connections.max.reauth.ms`` (KIP-368; 0, Kafka's default, means sessions do not
  expire), also per mechanism (``listener.name.<l>.scram-sha-256.connections.max.reauth.ms``):
  a client that authenticated with SaslAuthenticate v1 or later is told the session
  lifetime, and every session on the listener must re-authenticate within it.

SCRAM users are not here: their credentials are managed through the admin API
(``_scram_credentials``).

Concurrency: immutable values built at start-up, safe anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tickwheel.security._jaas import PLAIN_LOGIN_MODULE, JaasError, single_login_module
from tickwheel.security._plain import PLAIN
from tickwheel.security._scram import SCRAM_MECHANISMS

_log = logging.getLogger(__name__)

SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
"""The SASL mechanisms tickwheel serves."""
ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
JAAS_CONFIG = "sasl.jaas.config"
MAX_REAUTH_MS = "connections.max.reauth.ms"

PropertyLookup = Callable[[str], str | None]
"""A property's value for one listener (its prefixed value first), or None."""


class SaslConfigError(ValueError):
    """A SASL setting that does not parse or leaves a listener without a mechanism."""


LISTENER_PREFIX = "listener.name."
"""What every listener's own property name starts with."""


def listener_prefix(listener_name: str) -> str:
    """Kafka's prefix of a listener's own properties (``listener.name.sasl_plaintext.``)."""
    return f"{LISTENER_PREFIX}{listener_name.lower()}."


def jaas_line(lookup: PropertyLookup, mechanism: str) -> str | None:
    """The JAAS line of ``mechanism`` on the lookup's listener, if any."""
    return lookup(f"{mechanism.lower()}.{JAAS_CONFIG}") or lookup(JAAS_CONFIG)


def client_credentials(
    lookup: PropertyLookup, listener_name: str, mechanism: str
) -> tuple[str, str]:
    """The ``username`` and ``password`` of ``mechanism``'s JAAS line on the listener:
    how this broker authenticates to the others (``SaslConfigError`` without them)."""
    text = jaas_line(lookup, mechanism)
    if not text:
        raise SaslConfigError(
            f"listener {listener_name}: no sasl.jaas.config for inter-broker {mechanism}"
        )
    try:
        options = single_login_module(text).options
    except JaasError as exc:
        raise SaslConfigError(f"listener {listener_name} {mechanism}: {exc}") from exc
    username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise SaslConfigError(
            f"listener {listener_name}: the {mechanism} JAAS line has no username and password "
            "for inter-broker connections"
        )
    return username, password


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    """One SASL listener's mechanisms, PLAIN users and session lifetime."""

    listener_name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    """Each mechanism's session lifetime (0 or absent: sessions do not expire)."""

    @classmethod
    def from_properties(cls, listener_name: str, lookup: PropertyLookup) -> SaslListenerConfig:
        """The listener's settings from its properties; ``SaslConfigError`` if unusable."""
        listed = [
            name.strip().upper()
            for name in (lookup(ENABLED_MECHANISMS) or "GSSAPI").split(",")
            if name.strip()
        ]
        ignored = [name for name in listed if name not in SUPPORTED_MECHANISMS]
        if ignored:
            _log.warning(
                "listener %s: ignoring SASL mechanisms tickwheel does not serve: %s",
                listener_name,
                ", ".join(ignored),
            )
        mechanisms = tuple(dict.fromkeys(name for name in listed if name in SUPPORTED_MECHANISMS))
        if not mechanisms:
            raise SaslConfigError(
                f"listener {listener_name}: sasl.enabled.mechanisms ({', '.join(listed)}) names "
                f"no mechanism tickwheel serves ({', '.join(SUPPORTED_MECHANISMS)})"
            )
        plain_users: dict[str, str] = {}
        if PLAIN in mechanisms:
            text = jaas_line(lookup, PLAIN)
            if not text:
                raise SaslConfigError(
                    f"listener {listener_name}: PLAIN is enabled but there is no "
                    f"{listener_prefix(listener_name)}plain.sasl.jaas.config"
                )
            try:
                entry = single_login_module(text)
            except JaasError as exc:
                raise SaslConfigError(f"listener {listener_name} PLAIN: {exc}") from exc
            if entry.login_module != PLAIN_LOGIN_MODULE:
                raise SaslConfigError(
                    f"listener {listener_name}: PLAIN needs {PLAIN_LOGIN_MODULE}, "
                    f"got {entry.login_module}"
                )
            plain_users = entry.users()
        max_reauth_ms = {mechanism: _reauth_ms(lookup, mechanism) for mechanism in mechanisms}
        return cls(listener_name, mechanisms, plain_users, max_reauth_ms)


def _reauth_ms(lookup: PropertyLookup, mechanism: str) -> int:
    """``connections.max.reauth.ms`` for ``mechanism``: its own
    (``<mechanism>.connections.max.reauth.ms``, KIP-368), else the listener's."""
    name = f"{mechanism.lower()}.{MAX_REAUTH_MS}"
    raw = lookup(name) or lookup(MAX_REAUTH_MS) or "0"
    try:
        return max(0, int(raw))
    except ValueError:
        raise SaslConfigError(f"{MAX_REAUTH_MS}={raw!r} is not an integer") from None
