"""Authentication and authorization: who a connection is and what it may do.

``server/`` calls this room before and around dispatch (DESIGN.md §10); it imports
nothing above ``protocol/``. The modules:

- ``_principal`` -- ``KafkaPrincipal`` (``User:alice``) and ``ANONYMOUS``;
- ``_ssl`` -- ``SslSettings`` (an ``SSLContext`` from Kafka's ``ssl.*`` settings) and
  ``PrincipalMapper`` (a TLS client's principal from its certificate);
- ``_session`` -- ``Session``, the principal, client host and listener of the connection
  a request came on, read by handlers through ``current_session``.

SASL (PLAIN and SCRAM, with KIP-368 re-authentication):

- ``_jaas`` -- Kafka's ``sasl.jaas.config`` lines;
- ``_sasl_config`` -- a SASL listener's mechanisms, PLAIN users and session lifetime;
- ``_sasl_server`` -- what a mechanism's server side offers; ``_plain`` and
  ``_scram_server`` are the two;
- ``_scram`` -- the SCRAM mechanisms, the stored credential and its formulas;
- ``_scram_credentials`` -- every user's SCRAM credentials as this broker knows them;
- ``_scram_admin`` -- Kafka's rules for altering and describing them;
- ``_authenticator`` -- one connection's SASL state machine, current to the handlers;
- ``_sasl_client`` -- PLAIN and SCRAM from the client side (inter-broker connections).

Authorization (Kafka's ACL authorizer):

- ``_acl`` -- resource patterns, access control entries, bindings and their filters,
  with Kafka's codes and names;
- ``_acl_json`` -- a resource's ACLs in Kafka's JSON (the store's format);
- ``_authorizer`` -- ``AclAuthorizer``: ``super.users``, DENY before ALLOW, literal,
  prefixed and wildcard patterns, operation implications;
- ``_audit`` -- the ``kafka.authorizer.logger`` line of each decision.

Concurrency: see each module; everything runs on the broker's event loop.
"""

from tickwheel.protocol import SaslClient
from tickwheel.security._acl import (
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
    check_resource_name,
)
from tickwheel.security._acl_json import (
    decode_entries,
    encode_entries,
    entries_from_json,
    entries_to_json,
)
from tickwheel.security._audit import AUTHORIZER_LOGGER
from tickwheel.security._authenticator import (
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslServerAuthenticator,
    SaslState,
    current_authenticator,
    enter_authenticator,
)
from tickwheel.security._authorizer import (
    ACL_AUTHORIZER_NAMES,
    AclAuthorizer,
    Action,
    authorizer_for,
    parse_super_users,
)
from tickwheel.security._http_basic import (
    BasicCredentialsError,
    BasicLogin,
    CredentialLookup,
    basic_credentials,
)
from tickwheel.security._jaas import JaasEntry, JaasError, parse_jaas_config, single_login_module
from tickwheel.security._plain import PLAIN, PlainServer
from tickwheel.security._principal import (
    ANONYMOUS,
    USER_TYPE,
    WILDCARD_NAME,
    KafkaPrincipal,
    PrincipalError,
)
from tickwheel.security._sasl_client import (
    PlainClient,
    SaslClientError,
    ScramClient,
    sasl_client,
)
from tickwheel.security._sasl_config import (
    LISTENER_PREFIX,
    SUPPORTED_MECHANISMS,
    SaslConfigError,
    SaslListenerConfig,
    client_credentials,
    listener_prefix,
)
from tickwheel.security._sasl_server import SaslAuthenticationError, SaslServer
from tickwheel.security._scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    SCRAM_MECHANISMS_BY_TYPE,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramCredential,
    ScramError,
    ScramMechanism,
    credential_from_string,
    credential_to_string,
)
from tickwheel.security._scram_admin import (
    Deletion,
    DescribedUser,
    Upsertion,
    UserResult,
    describe_credentials,
    plan_alterations,
)
from tickwheel.security._scram_credentials import ScramCredentials
from tickwheel.security._scram_server import ScramServer
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
    SSL_PREFIX,
    NoMatchingRuleError,
    PrincipalMapper,
    SslConfigError,
    SslSettings,
    distinguished_name,
)

__all__ = [
    "ACL_AUTHORIZER_NAMES",
    "ANONYMOUS",
    "AUTHORIZER_LOGGER",
    "CLUSTER_NAME",
    "LISTENER_PREFIX",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "PLAIN",
    "PLAINTEXT",
    "SASL_AUTHENTICATE_KEY",
    "SASL_HANDSHAKE_KEY",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SCRAM_MECHANISMS",
    "SCRAM_MECHANISMS_BY_TYPE",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SECURITY_PROTOCOLS",
    "SSL",
    "SSL_PREFIX",
    "SUPPORTED_MECHANISMS",
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
    "BasicCredentialsError",
    "BasicLogin",
    "CredentialLookup",
    "Deletion",
    "DescribedUser",
    "JaasEntry",
    "JaasError",
    "KafkaPrincipal",
    "NoMatchingRuleError",
    "PatternType",
    "PlainClient",
    "PlainServer",
    "PrincipalError",
    "PrincipalMapper",
    "ResourcePattern",
    "ResourceType",
    "SaslAuthenticationError",
    "SaslClient",
    "SaslClientError",
    "SaslConfigError",
    "SaslListenerConfig",
    "SaslServer",
    "SaslServerAuthenticator",
    "SaslState",
    "ScramClient",
    "ScramCredential",
    "ScramCredentials",
    "ScramError",
    "ScramMechanism",
    "ScramServer",
    "Session",
    "SslConfigError",
    "SslSettings",
    "Upsertion",
    "UserResult",
    "authorizer_for",
    "basic_credentials",
    "check_resource_name",
    "client_credentials",
    "credential_from_string",
    "credential_to_string",
    "current_authenticator",
    "current_session",
    "current_session_or_none",
    "decode_entries",
    "describe_credentials",
    "distinguished_name",
    "encode_entries",
    "enter_authenticator",
    "enter_session",
    "entries_from_json",
    "entries_to_json",
    "listener_prefix",
    "parse_jaas_config",
    "parse_super_users",
    "plan_alterations",
    "sasl_client",
    "single_login_module",
]
