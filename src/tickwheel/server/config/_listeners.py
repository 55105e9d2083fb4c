"""Named listeners: ``listeners``, ``listener.security.protocol.map``, ``advertised.listeners``.

Kafka names each listener (``CLIENT://0.0.0.0:9093``); the map gives each name its
security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), and a listener named after
a protocol needs no entry (Kafka's default map is each protocol to itself).
``advertised.listeners`` tells clients where each listener is reached, by the same
names; a listener it does not name is advertised at its bound address.
``inter.broker.listener.name`` (or, without it, the listener whose protocol is
``security.inter.broker.protocol``) is the one other brokers connect to.

Concurrency: pure functions over immutable values, safe anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from tickwheel.security import PLAINTEXT, SECURITY_PROTOCOLS

DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
"""Kafka's default ``listener.security.protocol.map``."""


class ListenerError(ValueError):
    """A listener setting that does not parse or does not add up."""


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """One listener: its name, its security protocol, and where it binds (port 0: any)."""

    name: str
    security_protocol: str
    host: str
    port: int


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` as a map from listener name to security protocol."""
    protocols: dict[str, str] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = entry.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ListenerError(
                f"listener.security.protocol.map entry {entry!r} is not NAME:PROTOCOL"
            )
        if protocol not in SECURITY_PROTOCOLS:
            raise ListenerError(
                f"listener {name} maps to {protocol!r}, not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        protocols[name] = protocol
    return protocols


def _parse_endpoints(text: str, setting: str) -> list[tuple[str, str, int]]:
    endpoints: list[tuple[str, str, int]] = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, address = entry.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not name:
            raise ListenerError(f"{setting} entry {entry!r} is not NAME://host:port")
        if not colon or not port.isdigit():
            raise ListenerError(f"{setting} entry {entry!r} has no port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        endpoints.append((name.upper(), host, int(port)))
    names = [name for name, _, _ in endpoints]
    if len(set(names)) != len(names):
        raise ListenerError(f"{setting} names a listener twice: {text!r}")
    return endpoints


def parse_listeners(listeners: str, protocol_map: str) -> tuple[ListenerSpec, ...]:
    """The listeners ``listeners`` declares, each with its protocol from ``protocol_map``."""
    protocols = parse_protocol_map(protocol_map)
    specs: list[ListenerSpec] = []
    for name, host, port in _parse_endpoints(listeners, "listeners"):
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerError(
                f"listener {name} has no security protocol in listener.security.protocol.map"
            )
        specs.append(ListenerSpec(name, protocol, host or "0.0.0.0", port))
    if not specs:
        raise ListenerError("listeners names no listener")
    ports = [spec.port for spec in specs if spec.port]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"two listeners bind the same port: {listeners!r}")
    return tuple(specs)


def parse_advertised(advertised: str) -> dict[str, tuple[str, int]]:
    """``advertised.listeners`` as a map from listener name to host and port (0: bound)."""
    return {
        name: (host, port)
        for name, host, port in _parse_endpoints(advertised, "advertised.listeners")
    }


def inter_broker_listener(
    specs: tuple[ListenerSpec, ...], listener_name: str, security_protocol: str
) -> ListenerSpec:
    """The listener other brokers use.

    The one ``inter.broker.listener.name`` names; else the one named after
    ``security.inter.broker.protocol`` (Kafka's rule), else the first with that protocol.
    With neither set (empty), Kafka's default PLAINTEXT listener, else the first listener:
    a single node with only a secured listener starts.
    """
    by_name = {spec.name: spec for spec in specs}
    if listener_name:
        spec = by_name.get(listener_name.upper())
        if spec is None:
            raise ListenerError(f"inter.broker.listener.name {listener_name} is not in listeners")
        return spec
    if not security_protocol:
        return by_name.get(PLAINTEXT, specs[0])
    protocol = security_protocol.upper()
    named = by_name.get(protocol)
    if named is not None and named.security_protocol == protocol:
        return named
    for spec in specs:
        if spec.security_protocol == protocol:
            return spec
    raise ListenerError(f"no listener has security.inter.broker.protocol {protocol}")
