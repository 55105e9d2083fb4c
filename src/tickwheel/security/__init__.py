"""Authentication and authorization: who a connection is and what it may do.

``server/`` calls this room before and around dispatch (DESIGN.md §10); it imports
nothing above ``protocol/``. The modules:

- ``_principal`` -- ``KafkaPrincipal`` (``User:alice``) and ``ANONYMOUS``;
- ``_ssl`` -- ``SslSettings`` (an ``SSLContext`` from Kafka's ``ssl.*`` settings) and
  ``PrincipalMapper`` (a TLS client's principal from its certificate);
- ``_session`` -- ``Session``, the principal, client host and listener of the connection
  a request came on, read by handlers through ``current_session``.

Concurrency: see each module; everything runs on the broker's event loop.
"""

from tickwheel.security._acl import (
    ANY_BINDING,
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tickwheel.security._audit import AUTHORIZER_LOGGER
from tickwheel.security._authorizer import (
    ACL_AUTHORIZER_NAMES,
    AclAuthorizer,
    Action,
    authorizer_for,
    parse_super_users,
)
from tickwheel.security._principal import (
    ANONYMOUS,
    USER_TYPE,
    WILDCARD_NAME,
    KafkaPrincipal,
    PrincipalError,
)
from tickwheel.security._session import (
    PLAINTEXT,
    SASL_PLAINTEXT,
    SASL_SSL,
    SECURITY_PROTOCOLS,
    SSL,
    Session,
    current_session,
    current_session_or_none,
    enter_session,
)
from tickwheel.security._ssl import (
    NoMatchingRuleError,
    PrincipalMapper,
    SslConfigError,
    SslSettings,
    distinguished_name,
)

__all__ = [
    "ACL_AUTHORIZER_NAMES",
    "ANONYMOUS",
    "ANY_BINDING",
    "AUTHORIZER_LOGGER",
    "CLUSTER_NAME",
    "PLAINTEXT",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SECURITY_PROTOCOLS",
    "SSL",
    "USER_TYPE",
    "WILDCARD_HOST",
    "WILDCARD_NAME",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AclAuthorizer",
    "AclBinding",
    "AclBindingFilter",
    "AclError",
    "AclOperation",
    "AclPermissionType",
    "Action",
    "KafkaPrincipal",
    "NoMatchingRuleError",
    "PatternType",
    "PrincipalError",
    "PrincipalMapper",
    "ResourcePattern",
    "ResourceType",
    "Session",
    "SslConfigError",
    "SslSettings",
    "authorizer_for",
    "current_session",
    "current_session_or_none",
    "distinguished_name",
    "enter_session",
    "parse_super_users",
]
