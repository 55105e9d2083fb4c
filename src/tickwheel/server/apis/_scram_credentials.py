"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51).

What ``kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=..]'`` and an admin
client's ``alter_user_scram_credentials`` send: the client salts the password itself
(``salted_password`` is PBKDF2's output), and the broker keeps the salted keys
(``security._scram_admin`` applies Kafka's checks and builds them; ``UserConfigs``
writes them to the users file or ZooKeeper, and only then applies them). Each user gets
one result; a user whose change could not be stored (the users file, ZooKeeper) gets
UNKNOWN_SERVER_ERROR and keeps the credentials it had. Describe
lists each credential's mechanism and iterations, never its keys. Under an authorizer,
describing needs DESCRIBE on the cluster (else the whole answer is
CLUSTER_AUTHORIZATION_FAILED) and altering needs ALTER (else each user's result is).

Both handlers are written against v0's classes, the only version served.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

import logging

from kio.schema.alter_user_scram_credentials.v0.request import AlterUserScramCredentialsRequest
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
)
from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import (
    AclOperation,
    Deletion,
    Upsertion,
    UserResult,
    describe_credentials,
    plan_alterations,
)
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server.apis._common import ApiSpec, Response, reply

_log = logging.getLogger(__name__)


async def handle_describe_user_scram_credentials(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Each named user's credentials (every user's when none is named)."""
    body = request.body_as(DescribeUserScramCredentialsRequest)
    if not authorize_cluster(context, request, AclOperation.DESCRIBE):
        return reply(
            request,
            DescribeUserScramCredentialsResponse(
                throttle_time=NO_THROTTLE,
                error_code=ErrorCode.cluster_authorization_failed,
                error_message=None,
                results=(),
            ),
        )
    users = None if body.users is None else [user.name for user in body.users]
    described = describe_credentials(users, context.users.credentials.all_configs())
    results = tuple(
        DescribeUserScramCredentialsResult(
            user=answer.user,
            error_code=answer.error_code,
            error_message=answer.error_message,
            credential_infos=tuple(
                CredentialInfo(mechanism=i8(info.mechanism), iterations=i32(info.iterations))
                for info in answer.credentials
            ),
        )
        for answer in described
    )
    return reply(
        request,
        DescribeUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            results=results,
        ),
    )


async def handle_alter_user_scram_credentials(
    context: BrokerContext, request: DecodedRequest
) -> Response:
    """Delete and set credentials, per user all or nothing."""
    body = request.body_as(AlterUserScramCredentialsRequest)
    if not authorize_cluster(context, request, AclOperation.ALTER):
        names = dict.fromkeys([u.name for u in body.upsertions] + [d.name for d in body.deletions])
        refused = tuple(
            AlterUserScramCredentialsResult(
                user=name, error_code=ErrorCode.cluster_authorization_failed, error_message=None
            )
            for name in names
        )
        return reply(
            request, AlterUserScramCredentialsResponse(throttle_time=NO_THROTTLE, results=refused)
        )
    results, to_write = plan_alterations(
        [
            Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
            for u in body.upsertions
        ],
        [Deletion(d.name, d.mechanism) for d in body.deletions],
        context.users.credentials.configs,
    )
    written: dict[str, UserResult] = {}
    for user, configs in to_write.items():
        try:
            await context.users.alter(user, configs)
        except Exception as exc:  # any failure to store (file, ZooKeeper) is this user's error
            # The exception alone: the configs hold salted keys, never logged.
            _log.error(
                "could not store the SCRAM credentials of user %s: %s: %s",
                user,
                type(exc).__name__,
                exc,
            )
            message = f"could not store the credentials: {type(exc).__name__}"
            written[user] = UserResult(user, ErrorCode.unknown_server_error, message)
    answered = (written.get(result.user, result) for result in results)
    return reply(
        request,
        AlterUserScramCredentialsResponse(
            throttle_time=NO_THROTTLE,
            results=tuple(
                AlterUserScramCredentialsResult(
                    user=result.user,
                    error_code=result.error_code,
                    error_message=result.error_message,
                )
                for result in answered
            ),
        ),
    )


DESCRIBE_USER_SCRAM_CREDENTIALS = ApiSpec(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    "DescribeUserScramCredentials",
    VersionRange(0, 0),
    handle_describe_user_scram_credentials,
)
ALTER_USER_SCRAM_CREDENTIALS = ApiSpec(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    "AlterUserScramCredentials",
    VersionRange(0, 0),
    handle_alter_user_scram_credentials,
)
SCRAM_CREDENTIAL_SPECS = (DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS)
