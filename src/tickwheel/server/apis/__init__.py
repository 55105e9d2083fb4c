"""The API handlers, one module per Kafka API key, and the table the broker serves.

``API_SPECS`` lists every API this broker answers with the versions it handles;
``SUPPORTED_VERSIONS`` is the same as a map for the decoder, and
``ADVERTISED_VERSIONS`` what the ApiVersions response lists (Produce from 0, as Kafka
4 does, though versions 0-2 are refused).

The consumer-group APIs (``_groups``) go to the group coordinator,
the transaction APIs (``_transactions``) to the transaction coordinator, and
FindCoordinator (``_find_coordinator``) to either by key type; the share-group APIs
(``_share``) to the share-group coordinator and the share-partition manager; SASL
logins (``_sasl``) to the connection's authenticator, and SCRAM credentials
(``_scram_credentials``) to the broker's ``UserConfigs``. ``leader_hints`` gives Produce,
Fetch and the fault plan's injected errors the KIP-951 hints of a leader error.

Concurrency: handlers run on the broker's event-loop thread.
"""

from tickwheel.protocol import VersionRange
from tickwheel.server.apis._acls import ACL_SPECS
from tickwheel.server.apis._alter_configs import ALTER_CONFIGS
from tickwheel.server.apis._api_versions import API_VERSIONS
from tickwheel.server.apis._client_quotas import CLIENT_QUOTA_SPECS
from tickwheel.server.apis._common import ApiSpec, CloseConnectionError, Handler, Response
from tickwheel.server.apis._create_partitions import CREATE_PARTITIONS
from tickwheel.server.apis._create_topics import CREATE_TOPICS
from tickwheel.server.apis._delete_records import DELETE_RECORDS
from tickwheel.server.apis._delete_topics import DELETE_TOPICS
from tickwheel.server.apis._describe_cluster import DESCRIBE_CLUSTER
from tickwheel.server.apis._describe_configs import DESCRIBE_CONFIGS
from tickwheel.server.apis._describe_producers import DESCRIBE_PRODUCERS
from tickwheel.server.apis._describe_topic_partitions import DESCRIBE_TOPIC_PARTITIONS
from tickwheel.server.apis._elect_leaders import ELECT_LEADERS
from tickwheel.server.apis._feature_gate import feature_gated
from tickwheel.server.apis._fetch import FETCH
from tickwheel.server.apis._find_coordinator import FIND_COORDINATOR
from tickwheel.server.apis._groups import GROUP_SPECS
from tickwheel.server.apis._incremental_alter_configs import INCREMENTAL_ALTER_CONFIGS
from tickwheel.server.apis._init_producer_id import INIT_PRODUCER_ID
from tickwheel.server.apis._leader_hints import leader_hints
from tickwheel.server.apis._list_offsets import LIST_OFFSETS
from tickwheel.server.apis._log_dirs import LOG_DIR_SPECS
from tickwheel.server.apis._metadata import METADATA
from tickwheel.server.apis._offsets_for_leader_epoch import OFFSETS_FOR_LEADER_EPOCH
from tickwheel.server.apis._partition_reassignments import PARTITION_REASSIGNMENT_SPECS
from tickwheel.server.apis._produce import PRODUCE
from tickwheel.server.apis._sasl import SASL_SPECS
from tickwheel.server.apis._scram_credentials import SCRAM_CREDENTIAL_SPECS
from tickwheel.server.apis._share import SHARE_SPECS
from tickwheel.server.apis._share_admin import SHARE_ADMIN_SPECS
from tickwheel.server.apis._share_state import SHARE_STATE_SPECS
from tickwheel.server.apis._transactions import TRANSACTION_SPECS
from tickwheel.server.apis._update_features import UPDATE_FEATURES
from tickwheel.server.apis._write_txn_markers import WRITE_TXN_MARKERS

API_SPECS: tuple[ApiSpec, ...] = (
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    *GROUP_SPECS,
    FIND_COORDINATOR,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    DELETE_RECORDS,
    INIT_PRODUCER_ID,
    *TRANSACTION_SPECS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    OFFSETS_FOR_LEADER_EPOCH,
    *LOG_DIR_SPECS,
    ELECT_LEADERS,
    DESCRIBE_CLUSTER,
    INCREMENTAL_ALTER_CONFIGS,
    *PARTITION_REASSIGNMENT_SPECS,
    WRITE_TXN_MARKERS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TOPIC_PARTITIONS,
    UPDATE_FEATURES,
    *SHARE_SPECS,
    *SHARE_ADMIN_SPECS,
    *SHARE_STATE_SPECS,
    *ACL_SPECS,
    *SASL_SPECS,
    *SCRAM_CREDENTIAL_SPECS,
    *CLIENT_QUOTA_SPECS,
)
# The consumer group and share group APIs answer only while their feature is on.
API_SPECS = feature_gated(API_SPECS)
SUPPORTED_VERSIONS: dict[int, VersionRange] = {spec.api_key: spec.versions for spec in API_SPECS}
ADVERTISED_VERSIONS: dict[int, VersionRange] = {spec.api_key: spec.advertised for spec in API_SPECS}

__all__ = [
    "ADVERTISED_VERSIONS",
    "API_SPECS",
    "PRODUCE",
    "SUPPORTED_VERSIONS",
    "ApiSpec",
    "CloseConnectionError",
    "Handler",
    "Response",
    "leader_hints",
]
