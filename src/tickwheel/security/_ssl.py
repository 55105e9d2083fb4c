"""TLS from Kafka's ``ssl.*`` settings: an ``SSLContext`` and the principal of a peer.

``SslSettings.from_properties`` reads Kafka's names (with the listener's
``listener.name.<listener>.ssl.*`` overrides already applied by the caller):

- ``ssl.keystore.type`` must be ``PEM`` (Kafka's default is JKS): the standard
  library's ``ssl`` reads PEM only, so a JKS or PKCS12 store is refused with the
  command that converts it. The key store is ``ssl.keystore.location`` (one PEM file
  holding the private key and the certificate chain) or inline
  ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``; ``ssl.key.password``
  decrypts an encrypted key.
- ``ssl.truststore.type`` ``PEM``: ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``; without one, the system's CAs.
- ``ssl.client.auth`` ``none`` / ``requested`` / ``required`` (server side).
- ``ssl.enabled.protocols`` (``TLSv1.2,TLSv1.3``) becomes the context's minimum and
  maximum version: OpenSSL takes a range, so a list with a gap enables the gap too.
- ``ssl.cipher.suites``: OpenSSL's names for TLS 1.2 suites (``ECDHE-RSA-AES128-GCM-SHA256``);
  TLS 1.3 names (``TLS_AES_128_GCM_SHA256``) are accepted but Python 3.11 cannot restrict
  TLS 1.3 suites, which are all AEAD.
- ``ssl.endpoint.identification.algorithm``: ``https`` (Kafka's default) checks the
  peer's host name when this broker is the client (inter-broker); empty turns it off.

``server_context`` is what a listener wraps accepted sockets with; ``client_context``
what this broker connects to other brokers with, presenting its own key store as its
client certificate.

The principal of a TLS client (Kafka's ``DefaultKafkaPrincipalBuilder``): its
certificate's subject as an RFC 2253 distinguished name (``CN=alice,OU=eng,O=example``,
the most specific part first, as Java's ``X500Principal.getName()``), mapped by
``ssl.principal.mapping.rules`` (``PrincipalMapper``); without a certificate,
``ANONYMOUS``. Attribute types without an RFC 2253 keyword keep OpenSSL's long name
(``emailAddress=...``), where Java writes the dotted OID and the DER value in hex.

Concurrency: building contexts reads files, once at start-up; a built context and a
``PrincipalMapper`` are immutable and safe anywhere.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwheel.security._principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

PEM = "PEM"
CLIENT_AUTH_NONE = "none"
CLIENT_AUTH_REQUESTED = "requested"
CLIENT_AUTH_REQUIRED = "required"
_CLIENT_AUTH_MODES = {
    CLIENT_AUTH_NONE: ssl.CERT_NONE,
    CLIENT_AUTH_REQUESTED: ssl.CERT_OPTIONAL,
    CLIENT_AUTH_REQUIRED: ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_HTTPS = "https"
DEFAULT_PRINCIPAL_MAPPING_RULES = "DEFAULT"
SSL_PREFIX = "ssl."
_CONVERT_HINT = (
    "tickwheel reads PEM stores only: convert it, e.g. "
    "`keytool -importkeystore -srckeystore store.jks -destkeystore store.p12 "
    "-deststoretype PKCS12` then `openssl pkcs12 -in store.p12 -out store.pem` "
    "(add -nodes to leave the key unencrypted, else set ssl.key.password), "
    "and set {setting}=PEM"
)


class SslConfigError(ValueError):
    """An ``ssl.*`` setting that cannot give a TLS context or a principal mapping."""


# -- settings --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SslSettings:
    """Kafka's ``ssl.*`` settings of one listener (or of the inter-broker client); the
    private key and its password stay out of the repr."""

    keystore_type: str = "JKS"
    keystore_location: str = ""
    keystore_key: str = field(default="", repr=False)
    keystore_certificate_chain: str = ""
    key_password: str = field(default="", repr=False)
    truststore_type: str = "JKS"
    truststore_location: str = ""
    truststore_certificates: str = ""
    client_auth: str = CLIENT_AUTH_NONE
    enabled_protocols: str = "TLSv1.2,TLSv1.3"
    cipher_suites: str = ""
    endpoint_identification_algorithm: str = _HTTPS
    principal_mapping_rules: str = DEFAULT_PRINCIPAL_MAPPING_RULES

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> SslSettings:
        """The settings among ``properties`` (``ssl.keystore.location`` ...); others ignored."""
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            value = properties.get(SSL_PREFIX + name.replace("_", "."))
            if value is not None:
                values[name] = value.strip()
        return cls(**values)

    @property
    def has_keystore(self) -> bool:
        """Whether a key store is configured (a file or inline PEM)."""
        return bool(self.keystore_location or self.keystore_key or self.keystore_certificate_chain)

    def server_context(self) -> ssl.SSLContext:
        """The context a TLS listener serves with; ``SslConfigError`` names what is wrong."""
        mode = _CLIENT_AUTH_MODES.get(self.client_auth.lower())
        if mode is None:
            raise SslConfigError(
                f"ssl.client.auth={self.client_auth!r} is not one of none, requested, required"
            )
        if not self.has_keystore:
            raise SslConfigError(
                "a TLS listener needs a key store: set ssl.keystore.location (a PEM file with "
                "the private key and certificate chain) or ssl.keystore.key and "
                "ssl.keystore.certificate.chain"
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._configure(context)
        context.verify_mode = mode
        if mode != ssl.CERT_NONE:
            self._load_truststore(context, ssl.Purpose.CLIENT_AUTH)
        return context

    def client_context(self) -> ssl.SSLContext:
        """The context this broker connects to other brokers with (its key store, if
        any, is its client certificate)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = self.endpoint_identification_algorithm.lower() == _HTTPS
        self._configure(context)
        self._load_truststore(context, ssl.Purpose.SERVER_AUTH)
        return context

    def principal_mapper(self) -> PrincipalMapper:
        """``ssl.principal.mapping.rules`` parsed."""
        return PrincipalMapper(self.principal_mapping_rules)

    def _configure(self, context: ssl.SSLContext) -> None:
        low, high = self._protocol_range()
        context.minimum_version, context.maximum_version = low, high
        self._set_ciphers(context)
        if self.has_keystore:
            self._load_keystore(context)

    def _protocol_range(self) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
        names = [p.strip() for p in self.enabled_protocols.split(",") if p.strip()]
        unknown = [name for name in names if name not in _TLS_VERSIONS]
        if not names or unknown:
            raise SslConfigError(
                f"ssl.enabled.protocols={self.enabled_protocols!r}: name protocols among "
                f"{', '.join(_TLS_VERSIONS)}"
            )
        versions = [_TLS_VERSIONS[name] for name in names]
        return min(versions), max(versions)

    def _set_ciphers(self, context: ssl.SSLContext) -> None:
        suites = [s.strip() for s in self.cipher_suites.split(",") if s.strip()]
        if not suites:
            return
        tls13 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.3"}
        tls12 = [s for s in suites if s not in tls13]
        if not tls12:
            return
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise SslConfigError(
                f"ssl.cipher.suites={self.cipher_suites!r}: OpenSSL knows none of "
                f"{', '.join(tls12)} (TLS 1.2 suites take OpenSSL's names, such as "
                "ECDHE-RSA-AES128-GCM-SHA256)"
            ) from None

    def _load_keystore(self, context: ssl.SSLContext) -> None:
        if self.keystore_type.upper() != PEM:
            raise SslConfigError(
                f"ssl.keystore.type={self.keystore_type}: "
                + _CONVERT_HINT.format(setting="ssl.keystore.type")
            )
        if self.keystore_location:
            if self.keystore_key or self.keystore_certificate_chain:
                raise SslConfigError(
                    "set either ssl.keystore.location or ssl.keystore.key with "
                    "ssl.keystore.certificate.chain, not both"
                )
            self._load_cert_chain(context, self.keystore_location, "ssl.keystore.location")
            return
        if not (self.keystore_key and self.keystore_certificate_chain):
            raise SslConfigError(
                "ssl.keystore.key and ssl.keystore.certificate.chain go together: set both"
            )
        # load_cert_chain reads files only: the inline PEM goes through a private file.
        with tempfile.TemporaryDirectory(prefix="tickwheel-keystore-") as directory:
            path = os.path.join(directory, "keystore.pem")
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(
                    _pem_block(self.keystore_key) + _pem_block(self.keystore_certificate_chain)
                )
            self._load_cert_chain(context, path, "ssl.keystore.key")

    def _load_cert_chain(self, context: ssl.SSLContext, path: str, setting: str) -> None:
        """Load the key store at ``path`` (``setting`` tells where it came from)."""
        try:
            # Always a password, if only an empty one: with None, OpenSSL would prompt
            # on the terminal for an encrypted key.
            context.load_cert_chain(path, password=self.key_password)
        except FileNotFoundError:
            raise SslConfigError(f"{setting}: no key store at {path}") from None
        except (OSError, ssl.SSLError) as exc:
            raise SslConfigError(
                f"{setting}: cannot load a private key and its certificate chain ({exc}); "
                "the key store must be PEM with the key and its certificates, and an "
                "encrypted key needs the right ssl.key.password"
            ) from None

    def _load_truststore(self, context: ssl.SSLContext, purpose: ssl.Purpose) -> None:
        if not (self.truststore_location or self.truststore_certificates):
            context.load_default_certs(purpose)
            return
        if self.truststore_type.upper() != PEM:
            raise SslConfigError(
                f"ssl.truststore.type={self.truststore_type}: "
                + _CONVERT_HINT.format(setting="ssl.truststore.type")
            )
        try:
            if self.truststore_location:
                context.load_verify_locations(cafile=self.truststore_location)
            else:
                context.load_verify_locations(cadata=self.truststore_certificates)
        except (OSError, ssl.SSLError) as exc:
            where = self.truststore_location or "ssl.truststore.certificates"
            raise SslConfigError(f"cannot read the trust store {where}: {exc}") from None


def _pem_block(text: str) -> str:
    return text.strip() + "\n"


# -- principals ------------------------------------------------------------------------


# OpenSSL's long names of the attribute types RFC 2253 gives a keyword (section 2.3).
_RFC2253_KEYWORDS = {
    "commonName": "CN",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_SPECIAL = frozenset(',+"\\<>;')


def _escape_rfc2253(value: str) -> str:
    escaped = "".join("\\" + c if c in _SPECIAL else c for c in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def distinguished_name(subject: Any) -> str:
    """The RFC 2253 form of a subject as ``SSLSocket.getpeercert()`` gives it (a tuple
    of RDNs, each a tuple of ``(type, value)`` pairs, the least specific first)."""
    rdns = [
        "+".join(
            f"{_RFC2253_KEYWORDS.get(name, name)}={_escape_rfc2253(value)}" for name, value in rdn
        )
        for rdn in reversed(subject)
    ]
    return ",".join(rdns)


# Kafka's rule grammar (SslPrincipalMapper): DEFAULT, or RULE:pattern/replacement/ with
# an optional L or U; '\' escapes inside pattern and replacement.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_RULE_PARSER = re.compile(_RULE)


class NoMatchingRuleError(ValueError):
    """No ``ssl.principal.mapping.rules`` rule maps a distinguished name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        groups = self.pattern.groups
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m, groups), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


def _java_replacement(replacement: str, match: re.Match[str], groups: int) -> str:
    """``replacement`` expanded as Java's ``Matcher.appendReplacement`` does: ``\\x`` is
    x, ``$n`` group n (the longest number that names a group); as Kafka does, a ``$n``
    beyond the groups is the literal text."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            number = int(replacement[i + 1])
            while j < len(replacement) and replacement[j].isdigit():
                longer = number * 10 + int(replacement[j])
                if longer > groups:
                    break
                number, j = longer, j + 1
            if number > groups:
                out.append(replacement[i:j])
            else:
                out.append(match.group(number) or "")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: distinguished name -> principal name.

    Rules are tried in order; the first whose pattern matches the whole name gives
    the name (``DEFAULT`` gives the distinguished name itself). Built once; immutable.
    """

    def __init__(self, rules: str) -> None:
        parsed = (_parse_rule(text) for text in _split_rules(rules))
        # Empty rules (",,") are skipped, as Kafka does.
        self.rules = tuple(rule for rule in parsed if rule is not None)

    def name(self, distinguished: str) -> str:
        """The principal name of ``distinguished``; ``NoMatchingRuleError`` if no rule applies."""
        for rule in self.rules:
            mapped = rule.apply(distinguished)
            if mapped is not None:
                return mapped
        raise NoMatchingRuleError(f"no rule of ssl.principal.mapping.rules maps {distinguished}")

    def principal(self, peer_certificate: Mapping[str, Any] | None) -> KafkaPrincipal:
        """The principal of a TLS peer whose verified certificate is ``peer_certificate``
        (``getpeercert()``): ANONYMOUS without one."""
        if not peer_certificate or "subject" not in peer_certificate:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.name(distinguished_name(peer_certificate["subject"])))

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.rules))}]"


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse_rule(text: str) -> _Rule | None:
    match = _RULE_PARSER.match(text)
    if match is None or match.end() != len(text):
        rest = "" if match is None else text[match.end() :]
        raise SslConfigError(
            f"ssl.principal.mapping.rules: invalid rule {text!r}"
            + (f", unmatched {rest!r}" if rest else "")
            + " (a rule is DEFAULT or RULE:pattern/replacement/ with an optional L or U)"
        )
    if match.group(1) is not None:
        return _Rule(None)
    if match.group(2) is None:
        return None
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise SslConfigError(
            f"ssl.principal.mapping.rules: rule {text!r} has a bad pattern: {exc}"
        ) from None
    return _Rule(pattern, match.group(3), match.group(4))
