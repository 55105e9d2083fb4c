"""UpdateFeatures (key 57, KIP-584): ``kafka-features.sh upgrade`` / ``downgrade``.

Changes the cluster's finalized feature levels (``_features``), all or none: each
update is checked as Kafka's controller checks it (``plan_update``), and the first one
refused fails the request with INVALID_UPDATE_VERSION and Kafka's message ("The update
failed for all features since the following feature had an error: ..."), no per-feature
results. ``validate_only`` (v1+) checks without changing anything. v0's
``allow_downgrade`` reads as a safe downgrade, its absence as an upgrade, as Kafka reads
it. Under an authorizer the principal needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED). Any broker answers: Kafka 4 clients send this request to
any broker (which forwards it to its controller); here the broker writes the levels
itself, conditionally on their epoch (``BrokerState.update_features``). An update not
settled within the request's ``timeout_ms`` answers REQUEST_TIMED_OUT; a registry file
that cannot be written, KAFKA_STORAGE_ERROR.

Answered with v1's classes, whose per-feature results v2 drops: from v2 a success is
the top-level error code alone (Kafka's change in v2), below it each feature asked is
listed with no error.

Concurrency: runs on the broker's event-loop thread, like every handler.
"""

from __future__ import annotations

from typing import Final

from kio.schema.errors import ErrorCode
from kio.schema.update_features.v0.request import UpdateFeaturesRequest as UpdateFeaturesRequestV0
from kio.schema.update_features.v1.response import UpdatableFeatureResult, UpdateFeaturesResponse
from kio.schema.update_features.v2.request import UpdateFeaturesRequest

from tickwheel.protocol import NO_THROTTLE, ApiKey, DecodedRequest, VersionRange
from tickwheel.security import AclOperation
from tickwheel.server._authorization import authorize_cluster
from tickwheel.server._context import BrokerContext
from tickwheel.server._features import FeatureUpdate, FeatureUpdateError, UpgradeType
from tickwheel.server.apis._common import ApiSpec, Response, reply, to_ms

_ALL_FAILED: Final = "The update failed for all features since the following feature had an error: "


def _updates(request: DecodedRequest) -> tuple[FeatureUpdate, ...]:
    if request.api_version == 0:
        return tuple(
            FeatureUpdate(
                u.feature,
                u.max_version_level,
                UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE,
            )
            for u in request.body_as(UpdateFeaturesRequestV0).feature_updates
        )
    return tuple(
        FeatureUpdate(u.feature, u.max_version_level, u.upgrade_type)
        for u in request.body_as(UpdateFeaturesRequest).feature_updates
    )


def _refusal(request: DecodedRequest, error_code: ErrorCode, message: str) -> Response:
    return reply(
        request,
        UpdateFeaturesResponse(
            throttle_time=NO_THROTTLE, error_code=error_code, error_message=message, results=()
        ),
    )


async def handle_update_features(context: BrokerContext, request: DecodedRequest) -> Response:
    """Finalize the asked levels, or refuse them all."""
    body = request.body_as(UpdateFeaturesRequest)
    updates = _updates(request)
    if not authorize_cluster(context, request, AclOperation.ALTER):
        return _refusal(
            request, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        )
    try:
        await context.update_features(
            updates, validate_only=body.validate_only, timeout_ms=to_ms(body.timeout)
        )
    except FeatureUpdateError as exc:
        return _refusal(request, ErrorCode.invalid_update_version, _ALL_FAILED + str(exc))
    except TimeoutError as exc:
        return _refusal(request, ErrorCode.request_timed_out, str(exc))
    except OSError as exc:
        return _refusal(
            request, ErrorCode.kafka_storage_error, f"cannot record the features: {exc}"
        )
    return reply(
        request,
        UpdateFeaturesResponse(
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            error_message=None,
            results=tuple(
                UpdatableFeatureResult(
                    feature=u.feature, error_code=ErrorCode.none, error_message=None
                )
                for u in updates
            ),
        ),
    )


UPDATE_FEATURES = ApiSpec(
    ApiKey.UPDATE_FEATURES, "UpdateFeatures", VersionRange(0, 2), handle_update_features
)
