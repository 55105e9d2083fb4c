"""Kafka's rules for altering and describing SCRAM credentials."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tickwheel.security import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    Deletion,
    Upsertion,
    credential_from_string,
    describe_credentials,
    plan_alterations,
)

SALT = b"salt"


def _upsert(name: str, mechanism: int = 1, iterations: int = 4096) -> Upsertion:
    salted = SCRAM_SHA_256.salted_password("pw", SALT, iterations)
    return Upsertion(name, mechanism, iterations, SALT, salted)


def test_upsert_stores_a_salted_credential() -> None:
    results, to_write = plan_alterations([_upsert("alice")], [], lambda user: {"quota": "1"})
    assert [(r.user, r.error_code) for r in results] == [("alice", ErrorCode.none)]
    configs = to_write["alice"]
    assert configs["quota"] == "1", "other user configs are kept"
    stored = credential_from_string(configs[SCRAM_SHA_256.name])
    assert stored == SCRAM_SHA_256.credential("pw", iterations=4096, salt=SALT)


def test_kafkas_errors() -> None:
    existing = {"carol": {SCRAM_SHA_512.name: "x"}}
    results, to_write = plan_alterations(
        [
            _upsert(""),
            _upsert("bob", mechanism=7),
            _upsert("few", iterations=4095),
            _upsert("many", iterations=16385),
            _upsert("dup"),
            _upsert("carol"),
        ],
        [Deletion("dup", 1), Deletion("dave", 2)],
        lambda user: existing.get(user, {}),
    )
    by_user = {r.user: (r.error_code, r.error_message) for r in results}
    assert by_user[""] == (ErrorCode.unacceptable_credential, "Username must not be empty")
    assert by_user["bob"] == (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    assert by_user["few"] == (ErrorCode.unacceptable_credential, "Too few iterations")
    assert by_user["many"] == (ErrorCode.unacceptable_credential, "Too many iterations")
    assert by_user["dup"][0] == ErrorCode.duplicate_resource
    assert by_user["dave"][0] == ErrorCode.resource_not_found
    assert by_user["carol"][0] == ErrorCode.none
    assert set(to_write) == {"carol"}


def test_describe() -> None:
    stored = {
        "alice": {SCRAM_SHA_256.name: "salt=AA==,stored_key=AA==,server_key=AA==,iterations=8192"},
        "quota-only": {"producer_byte_rate": "1024"},
    }
    (alice,) = describe_credentials(None, stored)
    assert alice.user == "alice"
    assert [(c.mechanism, c.iterations) for c in alice.credentials] == [(1, 8192)]
    answers = describe_credentials(["alice", "nobody", "", "twice", "twice"], stored)
    assert [(a.user, a.error_code) for a in answers] == [
        ("alice", ErrorCode.none),
        ("nobody", ErrorCode.resource_not_found),
        ("", ErrorCode.resource_not_found),
        ("twice", ErrorCode.duplicate_resource),
    ]


def test_the_salted_password_stays_out_of_the_repr() -> None:
    upsertion = Upsertion("alice", 1, 4096, SALT, b"salted-secret")
    assert "salted-secret" not in repr(upsertion)
