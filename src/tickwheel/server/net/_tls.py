"""TLS of the broker's listeners and of its connections to other brokers, from its config.

A listener whose protocol is SSL or SASL_SSL serves TLS with the ``ssl.*`` settings as
that listener sees them (``listener.name.<listener>.ssl.*`` overriding the broker-wide
ones, as Kafka does); ``ListenerTls`` holds its server context and the principal
mapping of its clients' certificates (an SSL listener's principals; on SASL_SSL, SASL
names them). As in Kafka (KIP-684), a SASL_SSL listener asks
for client certificates only when ``ssl.client.auth`` is set for that listener by name:
SASL is what authenticates its clients. The inter-broker client uses the inter-broker
listener's settings, its key store being its client certificate.

Errors in these settings are ``ConfigError``s raised while the broker starts.

Concurrency: built once at start-up; the results are immutable.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tickwheel.security import (
    SASL_SSL,
    SSL,
    SSL_PREFIX,
    KafkaPrincipal,
    PrincipalMapper,
    SslConfigError,
    SslSettings,
    listener_prefix,
)
from tickwheel.server.config._broker import BrokerConfig, ConfigError
from tickwheel.server.config._listeners import ListenerSpec

TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
"""The security protocols that run over TLS."""
_CLIENT_AUTH = "ssl.client.auth"


@dataclass(frozen=True, slots=True)
class ListenerTls:
    """What a TLS listener serves with: its context and its clients' principal mapping."""

    context: ssl.SSLContext
    mapper: PrincipalMapper

    def principal(self, peer_certificate: Mapping[str, Any] | None) -> KafkaPrincipal:
        """The principal of a client whose verified certificate is ``peer_certificate``."""
        return self.mapper.principal(peer_certificate)


def _settings(config: BrokerConfig, spec: ListenerSpec) -> SslSettings:
    properties = {
        name: value
        for name, value in config.listener_view(spec.name).items()
        if name.startswith(SSL_PREFIX)
    }
    own_client_auth = f"{listener_prefix(spec.name)}{_CLIENT_AUTH}"
    if spec.security_protocol == SASL_SSL and own_client_auth not in config.listener_properties:
        properties.pop(_CLIENT_AUTH, None)
    return SslSettings.from_properties(properties)


def listener_tls(config: BrokerConfig, spec: ListenerSpec) -> ListenerTls | None:
    """The TLS of listener ``spec``; None for a listener without TLS."""
    if spec.security_protocol not in TLS_PROTOCOLS:
        return None
    settings = _settings(config, spec)
    try:
        return ListenerTls(settings.server_context(), settings.principal_mapper())
    except SslConfigError as exc:
        raise ConfigError(f"listener {spec.name}: {exc}") from None


def inter_broker_ssl_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The context this broker connects to others with; None when the inter-broker
    listener has no TLS."""
    spec = config.inter_broker_listener()
    if spec.security_protocol not in TLS_PROTOCOLS:
        return None
    try:
        return _settings(config, spec).client_context()
    except SslConfigError as exc:
        raise ConfigError(f"inter-broker listener {spec.name}: {exc}") from None
