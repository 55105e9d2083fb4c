"""Kafka's rules for AlterUserScramCredentials and DescribeUserScramCredentials.

``plan_alterations`` checks a request as Kafka's ``alterUserScramCredentials`` does and
says what to write: per user, one result, and for the users that passed every check
their new config (credentials from the salted passwords the client sent; the password
itself never travels). The checks, in Kafka's order, each failing the whole user:

1. an empty name: UNACCEPTABLE_CREDENTIAL "Username must not be empty";
2. an unknown mechanism: UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism";
3. an upsertion with fewer than 4096 or more than 16384 iterations:
   UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many iterations";
4. the same (user, mechanism) twice in the request, deletions and upsertions together:
   DUPLICATE_RESOURCE;
5. a deletion of a credential the user does not have: RESOURCE_NOT_FOUND.

``describe_credentials`` answers a describe: every user with a SCRAM credential when no
user is named (sorted), else each named user once -- RESOURCE_NOT_FOUND for an empty
name or a user without credentials, DUPLICATE_RESOURCE for a name given twice.

The handler reads and writes the configs through the server's store (a file or
ZooKeeper); this module only decides.

Concurrency: pure functions, safe anywhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from tickwheel.security._scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    SCRAM_MECHANISMS_BY_TYPE,
    ScramError,
    credential_from_string,
    credential_to_string,
)

EMPTY_USERNAME = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


@dataclass(frozen=True, slots=True)
class Upsertion:
    """Set ``name``'s credential for the mechanism of type ``mechanism``."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class Deletion:
    """Remove ``name``'s credential for the mechanism of type ``mechanism``."""

    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class UserResult:
    """The outcome for one user."""

    user: str
    error_code: ErrorCode
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    """One credential of a described user: Kafka's mechanism type and the iterations."""

    mechanism: int
    iterations: int


@dataclass(frozen=True, slots=True)
class DescribedUser:
    """A described user: its credentials, or why not."""

    user: str
    error_code: ErrorCode
    error_message: str | None
    credentials: tuple[CredentialInfo, ...] = ()


def _upsertion_error(upsertion: Upsertion) -> UserResult | None:
    if not upsertion.name:
        return UserResult("", ErrorCode.unacceptable_credential, EMPTY_USERNAME)
    if upsertion.mechanism not in SCRAM_MECHANISMS_BY_TYPE:
        return UserResult(upsertion.name, ErrorCode.unsupported_sasl_mechanism, UNKNOWN_MECHANISM)
    if upsertion.iterations > MAX_ITERATIONS:
        return UserResult(upsertion.name, ErrorCode.unacceptable_credential, "Too many iterations")
    if upsertion.iterations < MIN_ITERATIONS:
        return UserResult(upsertion.name, ErrorCode.unacceptable_credential, "Too few iterations")
    return None


def _deletion_error(deletion: Deletion) -> UserResult | None:
    if not deletion.name:
        return UserResult("", ErrorCode.unacceptable_credential, EMPTY_USERNAME)
    if deletion.mechanism not in SCRAM_MECHANISMS_BY_TYPE:
        return UserResult(deletion.name, ErrorCode.unsupported_sasl_mechanism, UNKNOWN_MECHANISM)
    return None


def _invalid_users(
    upsertions: Sequence[Upsertion], deletions: Sequence[Deletion]
) -> dict[str, UserResult]:
    results: dict[str, UserResult] = {}
    for upsertion in upsertions:
        if (error := _upsertion_error(upsertion)) is not None:
            results.setdefault(error.user, error)
    for deletion in deletions:
        if (error := _deletion_error(deletion)) is not None:
            results.setdefault(error.user, error)
    return results


def plan_alterations(
    upsertions: Sequence[Upsertion],
    deletions: Sequence[Deletion],
    current: Callable[[str], Mapping[str, str]],
) -> tuple[list[UserResult], dict[str, dict[str, str]]]:
    """The results of every user in the request, and the new config of each user to write
    (``current(user)`` is the user's config now). A user to write gets its success
    result only once the caller has written it; its entry here says NONE."""
    results = _invalid_users(upsertions, deletions)
    changes: list[Upsertion | Deletion] = [*upsertions, *deletions]
    pairs = Counter(
        (change.name, change.mechanism) for change in changes if change.name not in results
    )
    for (user, _), count in pairs.items():
        if count > 1:
            results.setdefault(
                user,
                UserResult(
                    user,
                    ErrorCode.duplicate_resource,
                    "A user credential cannot be altered twice in the same request",
                ),
            )
    configs: dict[str, dict[str, str]] = {}
    for user, _ in pairs:
        if user not in results:
            configs.setdefault(user, dict(current(user)))
    for deletion in deletions:
        user_configs = configs.get(deletion.name)
        if user_configs is None:
            continue
        if user_configs.pop(SCRAM_MECHANISMS_BY_TYPE[deletion.mechanism].name, None) is None:
            results[deletion.name] = UserResult(
                deletion.name,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
    for upsertion in upsertions:
        user_configs = configs.get(upsertion.name)
        if user_configs is None:
            continue
        scram = SCRAM_MECHANISMS_BY_TYPE[upsertion.mechanism]
        user_configs[scram.name] = credential_to_string(
            scram.credential_from_salted(
                upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
        )
    to_write = {user: cfg for user, cfg in configs.items() if user not in results}
    for user in to_write:
        results[user] = UserResult(user, ErrorCode.none)
    return list(results.values()), to_write


def _credential_infos(configs: Mapping[str, str]) -> tuple[CredentialInfo, ...]:
    infos: list[CredentialInfo] = []
    for mechanism in SCRAM_MECHANISMS.values():
        text = configs.get(mechanism.name)
        if text is not None:
            infos.append(
                CredentialInfo(mechanism.type_code, credential_from_string(text).iterations)
            )
    return tuple(infos)


def _described(user: str, configs: Mapping[str, str], explicit: bool) -> DescribedUser | None:
    try:
        infos = _credential_infos(configs)
    except ScramError as exc:
        return DescribedUser(user, ErrorCode.unknown_server_error, str(exc))
    if infos:
        return DescribedUser(user, ErrorCode.none, None, infos)
    if not explicit:
        return None
    return DescribedUser(
        user,
        ErrorCode.resource_not_found,
        f"Attempt to describe a user credential that does not exist: {user}",
    )


def describe_credentials(
    users: Sequence[str] | None, all_configs: Mapping[str, Mapping[str, str]]
) -> list[DescribedUser]:
    """The described users (every user with a credential when ``users`` is None or empty)."""
    if not users:
        found = (_described(user, all_configs[user], False) for user in sorted(all_configs))
        return [described for described in found if described is not None]
    counts = Counter(users)
    answers: list[DescribedUser] = []
    for user in dict.fromkeys(users):
        if not user:
            answers.append(DescribedUser(user, ErrorCode.resource_not_found, EMPTY_USERNAME))
        elif counts[user] > 1:
            answers.append(
                DescribedUser(
                    user,
                    ErrorCode.duplicate_resource,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}",
                )
            )
        else:
            described = _described(user, all_configs.get(user, {}), True)
            assert described is not None
            answers.append(described)
    return answers
