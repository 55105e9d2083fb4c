"""SCRAM (RFC 5802, RFC 7677): the mechanisms, the stored credential, the key formulas.

A SCRAM credential is what a server keeps instead of a password: a random salt, the
iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``, where ``SaltedPassword`` is
PBKDF2-HMAC over the password (``hashlib.pbkdf2_hmac``). With them the server checks a
client's proof and proves itself back, and a stolen credential does not give the
password. Kafka keeps a credential as the text ``salt=<b64>,stored_key=<b64>,
server_key=<b64>,iterations=<n>`` under the mechanism's name (``SCRAM-SHA-256``) in the
user's config (``credential_to_string`` / ``credential_from_string`` write and read it).

Both Kafka mechanisms are here, with Kafka's limits: 4096 iterations at least
(``ScramMechanism.minIterations``) and, for credentials made through the admin API, at
most 16384. The ``type`` byte is the one AlterUserScramCredentials and
DescribeUserScramCredentials carry (0 is Kafka's UNKNOWN).

The message helpers (``parse_attributes``, ``encode_saslname``/``decode_saslname``)
serve both the server (``_scram_server``) and the client (``_sasl_client``).

Concurrency: pure functions over immutable values, safe anywhere.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

MIN_ITERATIONS = 4096
"""Kafka's minimum for both SCRAM mechanisms."""
MAX_ITERATIONS = 16384
"""Kafka's maximum for a credential set through AlterUserScramCredentials."""
SALT_BYTES = 32
_CLIENT_KEY = b"Client Key"
_SERVER_KEY = b"Server Key"


class ScramError(ValueError):
    """A SCRAM message or stored credential that does not parse."""


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, its hash, and Kafka's type byte."""

    name: str
    hash_name: str
    type_code: int

    def digest(self, data: bytes) -> bytes:
        """H(data)."""
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        """HMAC(key, data)."""
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i): PBKDF2 with this mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        """HMAC(SaltedPassword, "Client Key")."""
        return self.hmac(salted_password, _CLIENT_KEY)

    def server_key(self, salted_password: bytes) -> bytes:
        """HMAC(SaltedPassword, "Server Key")."""
        return self.hmac(salted_password, _SERVER_KEY)

    def credential_from_salted(
        self, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """The stored credential for a salted password (what AlterUserScramCredentials
        sends: the client salts, the password never travels)."""
        return ScramCredential(
            salt=salt,
            stored_key=self.digest(self.client_key(salted_password)),
            server_key=self.server_key(salted_password),
            iterations=iterations,
        )

    def credential(
        self, password: str, *, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
    ) -> ScramCredential:
        """A new credential for ``password`` (a random salt unless one is given)."""
        salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
        return self.credential_from_salted(
            salt, self.salted_password(password, salt, iterations), iterations
        )


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
SCRAM_MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
"""The SCRAM mechanisms by SASL name."""
SCRAM_MECHANISMS_BY_TYPE = {m.type_code: m for m in SCRAM_MECHANISMS.values()}
"""The SCRAM mechanisms by Kafka's type byte (1: SHA-256, 2: SHA-512)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism: never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # The keys let an attacker impersonate the server: keep them out of logs.
        return f"ScramCredential(iterations={self.iterations})"


def b64encode(data: bytes) -> str:
    """Standard base64 text."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Standard base64 text as bytes; ``ScramError`` if it is not base64."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ScramError(f"not base64: {text[:16]!r}") from exc


def credential_to_string(credential: ScramCredential) -> str:
    """Kafka's text form of a credential (``ScramCredentialUtils.credentialToString``)."""
    return (
        f"salt={b64encode(credential.salt)},stored_key={b64encode(credential.stored_key)},"
        f"server_key={b64encode(credential.server_key)},iterations={credential.iterations}"
    )


def credential_from_string(text: str) -> ScramCredential:
    """A credential from Kafka's text form; ``ScramError`` if malformed."""
    fields = dict(part.partition("=")[::2] for part in text.split(","))
    try:
        return ScramCredential(
            salt=b64decode(fields["salt"]),
            stored_key=b64decode(fields["stored_key"]),
            server_key=b64decode(fields["server_key"]),
            iterations=int(fields["iterations"]),
        )
    except (KeyError, ValueError) as exc:
        raise ScramError(f"malformed SCRAM credential: {exc}") from exc


def xor(left: bytes, right: bytes) -> bytes:
    """Byte-wise exclusive or of two equally long strings."""
    if len(left) != len(right):
        raise ScramError("proof and signature differ in length")
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def parse_attributes(message: str) -> list[tuple[str, str]]:
    """A SCRAM message's ``a=value`` attributes, in order; ``ScramError`` if one is not."""
    attributes: list[tuple[str, str]] = []
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1 or not name.isalpha():
            raise ScramError(f"malformed SCRAM attribute {part[:32]!r}")
        attributes.append((name, value))
    return attributes


def encode_saslname(username: str) -> str:
    """A username as a SCRAM ``saslname`` (``=`` -> ``=3D``, ``,`` -> ``=2C``)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(saslname: str) -> str:
    """The username a ``saslname`` encodes; ``ScramError`` for a stray ``=``."""
    username = saslname.replace("=2C", ",").replace("=3D", "\x00")
    if "=" in username:
        raise ScramError("invalid '=' in a SCRAM username")
    return username.replace("\x00", "=")


def new_nonce() -> str:
    """A fresh random nonce (printable, without commas)."""
    return secrets.token_urlsafe(24)
