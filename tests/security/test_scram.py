"""SCRAM against RFC 7677's SHA-256 example, and tickwheel's client against its server."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwheel.security import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    SaslAuthenticationError,
    SaslClientError,
    ScramClient,
    ScramCredential,
    ScramServer,
    credential_from_string,
    credential_to_string,
)
from tickwheel.security._scram import b64decode

# RFC 7677, section 3.
USER, PASSWORD = "user", "pencil"
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> ScramCredential:
    return SCRAM_SHA_256.credential(PASSWORD, iterations=4096, salt=SALT)


def test_server_answers_rfc_7677() -> None:
    credential = _rfc_credential()
    server = ScramServer(
        SCRAM_SHA_256,
        lambda user, mechanism: credential if user == USER else None,
        nonce_factory=lambda: SERVER_NONCE,
    )
    assert server.evaluate(CLIENT_FIRST) == SERVER_FIRST
    assert not server.complete
    assert server.evaluate(CLIENT_FINAL) == SERVER_FINAL
    assert server.complete
    assert server.username == USER


def test_client_sends_rfc_7677() -> None:
    client = ScramClient(SCRAM_SHA_256.name, USER, PASSWORD, nonce_factory=lambda: CLIENT_NONCE)
    assert client.initial_response() == CLIENT_FIRST
    assert client.evaluate(SERVER_FIRST) == CLIENT_FINAL
    assert client.evaluate(SERVER_FINAL) is None


def test_client_refuses_a_wrong_server_signature_and_e() -> None:
    client = ScramClient(SCRAM_SHA_256.name, USER, PASSWORD, nonce_factory=lambda: CLIENT_NONCE)
    client.evaluate(SERVER_FIRST)
    with pytest.raises(SaslClientError):
        client.evaluate(b"v=" + b"A" * 44)
    other = ScramClient(SCRAM_SHA_256.name, USER, PASSWORD, nonce_factory=lambda: CLIENT_NONCE)
    with pytest.raises(SaslClientError, match="unknown-user"):
        other.evaluate(b"e=unknown-user")


@pytest.mark.parametrize("iterations", [MIN_ITERATIONS - 1, 1, MAX_ITERATIONS + 1, 10**9])
def test_client_refuses_iterations_outside_kafkas_bounds(iterations: int) -> None:
    """Before PBKDF2: a billion iterations would take minutes."""
    client = ScramClient(SCRAM_SHA_256.name, USER, PASSWORD, nonce_factory=lambda: CLIENT_NONCE)
    client.initial_response()
    server_first = SERVER_FIRST.replace(b"i=4096", b"i=%d" % iterations)
    with pytest.raises(SaslClientError, match="iterations"):
        client.evaluate(server_first)


def test_credential_text_round_trips() -> None:
    credential = _rfc_credential()
    text = credential_to_string(credential)
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert credential_from_string(text) == credential
    assert PASSWORD not in text


def _exchange(server: ScramServer, client: ScramClient) -> None:
    token: bytes | None = client.initial_response()
    while token is not None:
        challenge = server.evaluate(token)
        token = client.evaluate(challenge)


names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1
)


@settings(max_examples=25)
@given(
    mechanism=st.sampled_from([SCRAM_SHA_256, SCRAM_SHA_512]),
    username=names,
    password=names,
    wrong=names,
    salt=st.binary(min_size=1, max_size=32),
)
def test_client_and_server_agree(
    mechanism: object, username: str, password: str, wrong: str, salt: bytes
) -> None:
    assert mechanism in (SCRAM_SHA_256, SCRAM_SHA_512)
    scram = SCRAM_SHA_256 if mechanism is SCRAM_SHA_256 else SCRAM_SHA_512
    credential = scram.credential(password, iterations=MIN_ITERATIONS, salt=salt)
    store = {(username, scram.name): credential}

    def lookup(user: str, name: str) -> ScramCredential | None:
        return store.get((user, name))

    server = ScramServer(scram, lookup)
    _exchange(server, ScramClient(scram.name, username, password))
    assert server.complete
    assert server.username == username
    if wrong != password:
        with pytest.raises(SaslAuthenticationError):
            _exchange(ScramServer(scram, lookup), ScramClient(scram.name, username, wrong))


def test_server_refuses_unknown_user_bad_nonce_and_extensions() -> None:
    credential = _rfc_credential()

    def lookup(user: str, name: str) -> ScramCredential | None:
        return credential if user == USER else None

    with pytest.raises(SaslAuthenticationError):
        ScramServer(SCRAM_SHA_256, lookup).evaluate(b"n,,n=nobody,r=abc")
    with pytest.raises(SaslAuthenticationError):
        ScramServer(SCRAM_SHA_256, lookup).evaluate(b"n,,n=user,r=abc,tokenauth=true")
    with pytest.raises(SaslAuthenticationError):
        ScramServer(SCRAM_SHA_256, lookup).evaluate(b"n,a=other,n=user,r=abc")
    server = ScramServer(SCRAM_SHA_256, lookup, nonce_factory=lambda: SERVER_NONCE)
    server.evaluate(CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationError, match="nonce"):
        server.evaluate(CLIENT_FINAL.replace(b"r=rOpr", b"r=xOpr"))
    weak = SCRAM_SHA_256.credential(PASSWORD, iterations=1000, salt=SALT)
    with pytest.raises(SaslAuthenticationError, match="Iterations"):
        ScramServer(SCRAM_SHA_256, lambda u, m: weak).evaluate(CLIENT_FIRST)


@pytest.mark.parametrize(
    "token",
    [b"", b"\xff\xfe", b"n,,", b"x,,n=user,r=a", b"n,,r=a,n=user", b"n,,n=us=er,r=a", b",,,,"],
)
def test_malformed_client_first_is_an_authentication_failure(token: bytes) -> None:
    credential = _rfc_credential()
    with pytest.raises(SaslAuthenticationError):
        ScramServer(SCRAM_SHA_256, lambda u, m: credential).evaluate(token)
