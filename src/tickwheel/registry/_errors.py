"""``RegistryError``: a refusal of the registry, as Confluent's REST API words it.

Every refusal carries the HTTP status and the finer ``error_code`` of Confluent Schema
Registry's JSON error body (``{"error_code": 40401, "message": "..."}``); the HTTP layer
turns one into that body and nothing else. The constructors below are the refusals the
registry makes, named as Confluent's ``Errors`` class names them.

Immutable values; safe from any thread.
"""

from __future__ import annotations

HTTP_BAD_REQUEST = 400
HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
HTTP_UNPROCESSABLE = 422
HTTP_SERVER_ERROR = 500


class RegistryError(Exception):
    """A request the registry refuses: ``status`` (HTTP) and ``error_code`` (Confluent)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        """Confluent's JSON error body."""
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(HTTP_NOT_FOUND, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND, 40402, f"Version {version} not found for subject '{subject}'."
    )


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(HTTP_NOT_FOUND, 40403, detail)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND,
        40404,
        f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently",
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND,
        40405,
        f"Subject '{subject}' was not deleted first before being permanently deleted",
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted. "
        "Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first "
        "before being permanently deleted",
    )


def subject_config_not_found(subject: str) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND, 40408, f"Subject '{subject}' does not have subject-level compatibility"
    )


def subject_mode_not_found(subject: str) -> RegistryError:
    return RegistryError(
        HTTP_NOT_FOUND, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def incompatible_schema(reasons: list[str]) -> RegistryError:
    detail = "; ".join(reasons)
    return RegistryError(
        HTTP_CONFLICT,
        HTTP_CONFLICT,
        f"Schema being registered is incompatible with an earlier schema: {detail}",
    )


def invalid_schema(reason: str) -> RegistryError:
    return RegistryError(HTTP_UNPROCESSABLE, 42201, f"Invalid schema: {reason}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        HTTP_UNPROCESSABLE,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        HTTP_UNPROCESSABLE, 42203, f"Invalid compatibility level. Valid values are: {level}"
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(HTTP_UNPROCESSABLE, 42204, f"Invalid mode. Valid values are: {mode}")


def operation_not_permitted(reason: str) -> RegistryError:
    return RegistryError(HTTP_UNPROCESSABLE, 42205, reason)


def unprocessable(reason: str) -> RegistryError:
    """A body that is JSON but not the request's shape (a field missing or mistyped)."""
    return RegistryError(HTTP_UNPROCESSABLE, HTTP_UNPROCESSABLE, reason)


def bad_request(reason: str) -> RegistryError:
    """A body that is not JSON at all."""
    return RegistryError(HTTP_BAD_REQUEST, HTTP_BAD_REQUEST, reason)


def store_error(reason: str) -> RegistryError:
    return RegistryError(HTTP_SERVER_ERROR, 50001, f"Error in the backend datastore: {reason}")


HTTP_UNAUTHORIZED = 401
HTTP_FORBIDDEN = 403


def unauthenticated(reason: str) -> RegistryError:
    return RegistryError(HTTP_UNAUTHORIZED, HTTP_UNAUTHORIZED, f"Unauthorized: {reason}")


def forbidden(principal: str, operation: str) -> RegistryError:
    return RegistryError(
        HTTP_FORBIDDEN, 40301, f"User {principal} is denied operation {operation} on the registry"
    )
