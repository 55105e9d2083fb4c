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
    "ANONYMOUS",
    "PLAINTEXT",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SECURITY_PROTOCOLS",
    "SSL",
    "USER_TYPE",
    "WILDCARD_NAME",
    "KafkaPrincipal",
    "NoMatchingRuleError",
    "PrincipalError",
    "PrincipalMapper",
    "Session",
    "SslConfigError",
    "SslSettings",
    "current_session",
    "current_session_or_none",
    "distinguished_name",
    "enter_session",
]
