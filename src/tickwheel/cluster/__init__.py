"""Multi-broker clusters coordinated through Apache ZooKeeper, in Kafka's classic layout.

A broker configured with ``zookeeper.connect`` runs a ``ClusterNode``: it registers
in ZooKeeper, watches the brokers, topics and partition states (``_znodes`` gives
the layout and its JSON, the same as Kafka's ZooKeeper mode), keeps a
``MetadataCache``, and makes this broker leader or follower of its replicas, with
the replica layer's fetchers and ISR manager doing the replication. New topics get
replicas as Kafka's ``AdminUtils`` assigns them (``assign_replicas``); the controller
moves replicas between brokers as Kafka's reassignments do (``ReplicaAssignment``).

For users and tests: ``ZooKeeperServer`` runs Debian's ZooKeeper standalone, and
``LocalCluster`` runs it with N broker processes on loopback (``tickwheel cluster``).

Sits between ``tickwheel.replica`` (which it drives) and ``tickwheel.server`` (which
starts it); knows nothing of the API handlers.

Concurrency: ``ClusterNode`` lives on the broker's event loop (ZooKeeper calls in
worker threads); ``ZooKeeperServer`` and ``LocalCluster`` belong to one thread.
"""

from tickwheel.cluster._assignment import AssignmentError, assign_replicas
from tickwheel.cluster._channels import (
    INTER_BROKER_CHANNELS,
    REPLICA_FETCHER,
    SHARE_STATE,
    TXN_MARKERS,
    TXN_VERIFICATION,
    InterBrokerChannel,
)
from tickwheel.cluster._controller import Controller, ControllerSettings, ReassignmentResult
from tickwheel.cluster._election import ElectionError
from tickwheel.cluster._elr import ELR_FEATURE
from tickwheel.cluster._local import BrokerProcess, LocalCluster
from tickwheel.cluster._metadata import (
    NO_CONTROLLER,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from tickwheel.cluster._node import ClusterNode, ClusterSettings, InconsistentClusterIdError
from tickwheel.cluster._reassignment import ReplicaAssignment, invalid_target
from tickwheel.cluster._wire import (
    BrokerChannel,
    BrokerChannels,
    ChannelSasl,
    ChannelSettings,
    EndpointLookup,
    KafkaFetchTransport,
    KafkaTxnMarkerTransport,
    WireError,
)
from tickwheel.cluster._zk import (
    BrokerIdTakenError,
    ControllerMovedError,
    TopicExistsError,
    ZkClient,
    ZkSettings,
    split_connect,
)
from tickwheel.cluster._znodes import (
    BROKER_ENTITY,
    DEFAULT_BROKER_ENTITY,
    GROUP_ENTITY,
    TOPIC_ENTITY,
    USER_ENTITY,
    BrokerEndpoint,
    BrokerRegistration,
    TopicAssignment,
    ZnodeError,
    broker_path,
    decode_broker,
    decode_partition_state,
    decode_topic,
    encode_broker,
    encode_partition_state,
    encode_topic,
    partition_state_path,
    topic_path,
)
from tickwheel.cluster._zookeeper import ZooKeeperError, ZooKeeperServer, free_port

__all__ = [
    "BROKER_ENTITY",
    "DEFAULT_BROKER_ENTITY",
    "ELR_FEATURE",
    "GROUP_ENTITY",
    "INTER_BROKER_CHANNELS",
    "NO_CONTROLLER",
    "REPLICA_FETCHER",
    "SHARE_STATE",
    "TOPIC_ENTITY",
    "TXN_MARKERS",
    "TXN_VERIFICATION",
    "USER_ENTITY",
    "AssignmentError",
    "BrokerChannel",
    "BrokerChannels",
    "BrokerEndpoint",
    "BrokerIdTakenError",
    "BrokerProcess",
    "BrokerRegistration",
    "ChannelSasl",
    "ChannelSettings",
    "ClusterNode",
    "ClusterSettings",
    "Controller",
    "ControllerMovedError",
    "ControllerSettings",
    "ElectionError",
    "EndpointLookup",
    "InconsistentClusterIdError",
    "InterBrokerChannel",
    "KafkaFetchTransport",
    "KafkaTxnMarkerTransport",
    "LocalCluster",
    "MetadataCache",
    "PartitionMetadata",
    "ReassignmentResult",
    "ReplicaAssignment",
    "TopicAssignment",
    "TopicExistsError",
    "TopicMetadata",
    "WireError",
    "ZkClient",
    "ZkSettings",
    "ZnodeError",
    "ZooKeeperError",
    "ZooKeeperServer",
    "assign_replicas",
    "broker_path",
    "decode_broker",
    "decode_partition_state",
    "decode_topic",
    "encode_broker",
    "encode_partition_state",
    "encode_topic",
    "free_port",
    "invalid_target",
    "partition_state_path",
    "split_connect",
    "topic_path",
]
