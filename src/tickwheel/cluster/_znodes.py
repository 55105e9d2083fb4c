"""Kafka's classic ZooKeeper layout: the paths and the JSON of each znode.

Brokers and tools written for Kafka's ZooKeeper mode read the same documents:

==========================================  ===========================================
``/brokers/ids/<id>`` (ephemeral)           a live broker: every listener's endpoint
``/brokers/topics/<topic>``                 replica assignment ``{"partitions": {..}}``,
                                            and the adding and removing replicas of
                                            partitions being reassigned
``/brokers/topics/<t>/partitions/<p>/state``  leader, leader_epoch, isr, controller_epoch;
                                            KIP-966's ELR and last known ELR
``/config/topics/<topic>``                  the topic's config overrides
``/config/brokers/<id>``, ``<default>``     dynamic configs of a broker, of all brokers
``/config/groups/<group>``                  a group's config overrides (KIP-848/932)
``/config/users/<user>``                    a user's config: SCRAM credentials, quotas
``/config/users/<user>/clients/<client>``   quotas of a user's client id
``/config/clients/<client>``                quotas of a client id (``<default>``: all)
``/config/changes/config_change_<seq>``     a config changed: ``{"entity_path": ..}``
``/controller`` (ephemeral)                 the broker acting as controller
``/controller_epoch``                       how many controllers there have been
``/cluster/id``                             the cluster id
``/latest_producer_id_block``               the last block of producer ids handed out
``/feature``                                the finalized feature levels (KIP-584)
==========================================  ===========================================

Kafka's ZooKeeper mode has no eligible leader replicas; a partition state carries
them under ``eligible_leader_replicas`` and ``last_known_elr`` (KRaft's
``PartitionRecord`` names), written only when not empty, so a state without them is
the document Kafka writes and Kafka's readers, which ignore unknown keys, read ours. A
broker's registration says whether its last shutdown was clean
(``previous_broker_epoch``: the broker epoch its clean shutdown marker held, -1 for
none; KRaft's ``BrokerRegistrationRequest`` field).

A partition state's znode *version* travels with the decoded ``LeaderAndIsr``, since
every change of a partition state is a write conditional on it.

Pure functions and constants; safe from any thread. Decoding raises ``ZnodeError``
for a document that is not what the layout says.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tickwheel.log import NO_BROKER_EPOCH
from tickwheel.replica import LeaderAndIsr

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
TOPIC_CONFIGS_PATH = "/config/topics"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
FEATURE_PATH = "/feature"
_FEATURE_ZNODE_V1 = 1
_FEATURE_ZNODE_V2 = 2
_FEATURES_ENABLED = 1
BROKER_CONFIGS_PATH = "/config/brokers"
GROUP_CONFIGS_PATH = "/config/groups"
USER_CONFIGS_PATH = "/config/users"
CLIENT_CONFIGS_PATH = "/config/clients"
_CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
"""Each change notification is a persistent sequential node with this prefix."""
TOPIC_ENTITY = "topics"
BROKER_ENTITY = "brokers"
GROUP_ENTITY = "groups"
USER_ENTITY = "users"
CLIENT_ENTITY = "clients"
USER_CLIENTS = "clients"
"""The child of ``/config/users/<user>`` under which its client ids' quotas are kept."""
DEFAULT_BROKER_ENTITY = "<default>"
"""The broker entity whose configs are every broker's dynamic defaults."""
PERSISTENT_PATHS = (
    BROKER_IDS_PATH,
    TOPICS_PATH,
    TOPIC_CONFIGS_PATH,
    BROKER_CONFIGS_PATH,
    GROUP_CONFIGS_PATH,
    USER_CONFIGS_PATH,
    CLIENT_CONFIGS_PATH,
    CONFIG_CHANGES_PATH,
    "/cluster",
)
"""Paths every broker makes sure exist at start-up (Kafka's ``makeSurePersistentPathsExists``)."""

_BROKER_VERSION = 5
_TOPIC_VERSION = 3
_STATE_VERSION = 1
_CONFIG_VERSION = 1
_CONFIG_CHANGE_VERSION = 2
_CONTROLLER_VERSION = 1
_CLUSTER_ID_VERSION = "1"
_PRODUCER_ID_BLOCK_VERSION = 1
_PLAINTEXT = "PLAINTEXT"
_NO_JMX_PORT = -1
_MS_PER_S = 1000
_ELR = "eligible_leader_replicas"
_LAST_KNOWN_ELR = "last_known_elr"


class ZnodeError(ValueError):
    """A znode whose contents do not follow Kafka's layout."""


def broker_path(broker_id: int) -> str:
    """The ephemeral registration of broker ``broker_id``."""
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    """The replica assignment of ``topic``."""
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    """The parent of ``topic``'s partition znodes."""
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    """The znode of one partition (parent of its state)."""
    return f"{partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    """The leader and ISR of one partition."""
    return f"{partition_path(topic, partition)}/state"


def topic_config_path(topic: str) -> str:
    """The config overrides of ``topic``."""
    return f"{TOPIC_CONFIGS_PATH}/{topic}"


def entity_type_path(entity_type: str) -> str:
    """The parent of every config of one entity type (its children are the names)."""
    return f"{_CONFIG_PATH}/{entity_type}"


def entity_config_path(entity_type: str, name: str) -> str:
    """The config of an entity: ``topics``/``<topic>``, ``brokers``/``<id>`` or
    ``groups``/``<group>``."""
    return f"{entity_type_path(entity_type)}/{name}"


def sanitize_user(user: str) -> str:
    """A user name as its znode is named (Kafka's ``Sanitizer``: everything but letters,
    digits and ``. - _`` percent-encoded as UTF-8, as Java's URLEncoder with ``*`` and
    space as ``%2A`` and ``%20``; Python's ``quote`` also keeps ``~``, which Java's
    URLEncoder encodes as ``%7E``)."""
    return urllib.parse.quote(user, safe="").replace("~", "%7E")


def desanitize_user(znode_name: str) -> str:
    """The user name a ``/config/users`` child stands for."""
    return urllib.parse.unquote(znode_name)


def config_change_path() -> str:
    """The prefix of a new change notification (ZooKeeper appends the sequence)."""
    return f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"


def config_change_sequence(child: str) -> int | None:
    """The sequence number of a ``/config/changes`` child, or None if it is not one."""
    if not child.startswith(CONFIG_CHANGE_PREFIX):
        return None
    digits = child[len(CONFIG_CHANGE_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def encode_config_change(entity_type: str, name: str) -> bytes:
    """A change notification naming the entity whose config changed."""
    return _encode_json({"version": _CONFIG_CHANGE_VERSION, "entity_path": f"{entity_type}/{name}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """The (entity type, entity name) a change notification names."""
    entity_path = _decode_json(data, "config change notification").get("entity_path")
    if not isinstance(entity_path, str) or "/" not in entity_path:
        raise ZnodeError(f"config change notification names no entity: {entity_path!r}")
    entity_type, _, name = entity_path.partition("/")
    return entity_type, name


def _now_ms() -> int:
    return int(time.time() * _MS_PER_S)


def _decode_json(data: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZnodeError(f"{what} is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ZnodeError(f"{what} is not a JSON object")
    return document


def _encode_json(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        raise ZnodeError(f"{what} is not a list of broker ids")
    return tuple(value)


# -- brokers ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker as reached on one of its listeners (Kafka's ``Node``)."""

    broker_id: int
    host: str
    port: int
    listener_name: str = _PLAINTEXT
    security_protocol: str = _PLAINTEXT

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """What ``/brokers/ids/<id>`` says of a live broker: its endpoint on each listener,
    in the order of its ``listeners``."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    previous_broker_epoch: int = NO_BROKER_EPOCH
    """The epoch of the incarnation before this one if it shut down cleanly, else -1."""

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        """The broker's endpoint on the listener named, or None if it has no such listener."""
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker(registration: BrokerRegistration) -> bytes:
    """The registration a broker writes to ``/brokers/ids/<id>`` (version 5).

    Every listener is in ``endpoints`` (``NAME://host:port``) with its protocol in
    ``listener_security_protocol_map``; the top-level host and port, for older readers,
    are the first PLAINTEXT endpoint's, else null and -1 (as Kafka writes them).
    """
    endpoints = registration.endpoints
    plaintext = next((e for e in endpoints if e.security_protocol == _PLAINTEXT), None)
    return _encode_json(
        {
            "features": {},
            "listener_security_protocol_map": {
                e.listener_name: e.security_protocol for e in endpoints
            },
            "endpoints": [
                f"{e.listener_name}://{_host_in_uri(e.host)}:{e.port}" for e in endpoints
            ],
            "jmx_port": _NO_JMX_PORT,
            "port": -1 if plaintext is None else plaintext.port,
            "host": None if plaintext is None else plaintext.host,
            "version": _BROKER_VERSION,
            "timestamp": str(_now_ms()),
            "previous_broker_epoch": registration.previous_broker_epoch,
        }
    )


def _host_in_uri(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decode_broker(broker_id: int, data: bytes) -> BrokerRegistration:
    """Every endpoint a registration advertises.

    A listener missing from ``listener_security_protocol_map`` (registrations before
    version 4 have none) is named after its protocol; a registration with no
    ``endpoints`` (version 1) is its top-level host and port, on PLAINTEXT.
    """
    document = _decode_json(data, f"broker {broker_id}")
    protocols = document.get("listener_security_protocol_map") or {}
    if not isinstance(protocols, dict):
        raise ZnodeError(f"broker {broker_id} has a malformed listener_security_protocol_map")
    endpoints = []
    for endpoint in document.get("endpoints") or ():
        name, sep, address = str(endpoint).partition("://")
        host, colon, port = address.rpartition(":")
        if not (sep and name and colon and port.isdigit()):
            raise ZnodeError(f"broker {broker_id} has a malformed endpoint {endpoint!r}")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        protocol = str(protocols.get(name, name))
        endpoints.append(BrokerEndpoint(broker_id, host, int(port), name, protocol))
    previous_epoch = document.get("previous_broker_epoch", NO_BROKER_EPOCH)
    if not isinstance(previous_epoch, int):
        raise ZnodeError(f"broker {broker_id} has a malformed previous_broker_epoch")
    if endpoints:
        return BrokerRegistration(broker_id, tuple(endpoints), previous_epoch)
    legacy_host, legacy_port = document.get("host"), document.get("port")
    if isinstance(legacy_host, str) and isinstance(legacy_port, int):
        return BrokerRegistration(
            broker_id, (BrokerEndpoint(broker_id, legacy_host, legacy_port),), previous_epoch
        )
    raise ZnodeError(f"broker {broker_id} registers no endpoint")


# -- topics ----------------------------------------------------------------------------


def new_topic_id() -> str:
    """A random topic id, in Kafka's URL-safe base64 form without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """A topic's id and the replicas of each partition, preferred leader first; for a
    partition being reassigned, its replicas are the target's and the original's
    (Kafka's ``RS = TRS + ORS``), and ``adding``/``removing`` name the replicas the
    reassignment adds and removes."""

    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str = ""
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def encode_topic(assignment: TopicAssignment) -> bytes:
    """The document at ``/brokers/topics/<topic>``."""
    document: dict[str, Any] = {
        "partitions": {
            str(p): list(replicas) for p, replicas in sorted(assignment.partitions.items())
        },
        "adding_replicas": _replica_map(assignment.adding),
        "removing_replicas": _replica_map(assignment.removing),
        "version": _TOPIC_VERSION,
    }
    if assignment.topic_id:
        document["topic_id"] = assignment.topic_id
    return _encode_json(document)


def _replica_map(replicas: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
    return {str(p): list(ids) for p, ids in sorted(replicas.items()) if ids}


def _decode_replica_map(topic: str, raw: Any, what: str) -> dict[int, tuple[int, ...]]:
    if not isinstance(raw, dict):
        raise ZnodeError(f"topic {topic} has no {what}")
    try:
        return {
            int(p): _int_list(replicas, f"topic {topic} {what} of partition {p}")
            for p, replicas in raw.items()
        }
    except ValueError as exc:
        raise ZnodeError(f"topic {topic} has a bad partition: {exc}") from None


def decode_topic(topic: str, data: bytes) -> TopicAssignment:
    """A topic's assignment from its znode (older versions have no adding or removing
    replicas: none are)."""
    document = _decode_json(data, f"topic {topic}")
    return TopicAssignment(
        _decode_replica_map(topic, document.get("partitions"), "partitions"),
        str(document.get("topic_id") or ""),
        _decode_replica_map(topic, document.get("adding_replicas") or {}, "adding_replicas"),
        _decode_replica_map(topic, document.get("removing_replicas") or {}, "removing_replicas"),
    )


def encode_topic_config(configs: Mapping[str, str]) -> bytes:
    """The document at ``/config/topics/<topic>`` (and ``/config/brokers/<entity>``)."""
    return _encode_json({"version": _CONFIG_VERSION, "config": dict(sorted(configs.items()))})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    """A topic's config overrides (or a broker entity's dynamic configs)."""
    config = _decode_json(data, f"config of topic {topic}").get("config") or {}
    if not isinstance(config, dict):
        raise ZnodeError(f"config of topic {topic} is not an object")
    return {str(k): str(v) for k, v in config.items()}


# -- partition state -------------------------------------------------------------------


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    """The document at ``.../partitions/<p>/state`` (the version is the znode's own)."""
    document: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": _STATE_VERSION,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.elr:
        document[_ELR] = list(state.elr)
    if state.last_known_elr:
        document[_LAST_KNOWN_ELR] = list(state.last_known_elr)
    return _encode_json(document)


def decode_partition_state(what: str, data: bytes, zk_version: int) -> LeaderAndIsr:
    """A partition's ``LeaderAndIsr``, carrying the znode version it was read at."""
    document = _decode_json(data, what)
    fields = {name: document.get(name) for name in ("leader", "leader_epoch", "controller_epoch")}
    if not all(isinstance(v, int) for v in fields.values()):
        raise ZnodeError(f"{what} lacks leader, leader_epoch or controller_epoch")
    return LeaderAndIsr(
        leader=int(document["leader"]),
        leader_epoch=int(document["leader_epoch"]),
        isr=_int_list(document.get("isr"), f"{what} isr"),
        controller_epoch=int(document["controller_epoch"]),
        version=zk_version,
        elr=_int_list(document.get(_ELR, []), f"{what} {_ELR}"),
        last_known_elr=_int_list(document.get(_LAST_KNOWN_ELR, []), f"{what} {_LAST_KNOWN_ELR}"),
    )


# -- controller and cluster id ---------------------------------------------------------


def encode_controller(broker_id: int) -> bytes:
    """The document at ``/controller``."""
    return _encode_json(
        {"version": _CONTROLLER_VERSION, "brokerid": broker_id, "timestamp": str(_now_ms())}
    )


def decode_controller(data: bytes) -> int:
    """The controller's broker id."""
    broker_id = _decode_json(data, "controller").get("brokerid")
    if not isinstance(broker_id, int):
        raise ZnodeError("controller has no brokerid")
    return broker_id


def encode_cluster_id(cluster_id: str) -> bytes:
    """The document at ``/cluster/id``."""
    return _encode_json({"version": _CLUSTER_ID_VERSION, "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    """The cluster id."""
    cluster_id = _decode_json(data, "cluster id").get("id")
    if not isinstance(cluster_id, str) or not cluster_id:
        raise ZnodeError("cluster id has no id")
    return cluster_id


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Producer ids ``first .. last`` (inclusive), handed to one broker."""

    broker_id: int
    first: int
    last: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    """The document at ``/latest_producer_id_block`` (Kafka writes the ids as strings)."""
    return _encode_json(
        {
            "version": _PRODUCER_ID_BLOCK_VERSION,
            "broker": block.broker_id,
            "block_start": str(block.first),
            "block_end": str(block.last),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    """The last producer id block handed out."""
    document = _decode_json(data, "producer id block")
    try:
        return ProducerIdBlock(
            int(document["broker"]), int(document["block_start"]), int(document["block_end"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ZnodeError(f"producer id block is malformed: {exc!r}") from None


def encode_features(levels: Mapping[str, int]) -> bytes:
    """``/feature`` as Kafka's ZooKeeper-mode controller writes it (``FeatureZNode``
    version 2, status enabled): each finalized feature's ``max_version_level``, the
    features at level 0 left out. The znode's version is the finalized epoch."""
    return _encode_json(
        {
            "version": _FEATURE_ZNODE_V2,
            "status": _FEATURES_ENABLED,
            "features": {
                name: {"max_version_level": level}
                for name, level in sorted(levels.items())
                if level > 0
            },
        }
    )


def decode_features(data: bytes) -> dict[str, int]:
    """The finalized levels in ``/feature`` (version 1 or 2, as Kafka reads them); a
    disabled znode (status 0) finalizes nothing."""
    document = _decode_json(data, "/feature")
    version, status = document.get("version"), document.get("status")
    if version not in (_FEATURE_ZNODE_V1, _FEATURE_ZNODE_V2):
        raise ZnodeError(f"/feature has an unsupported version {version!r}")
    if status not in (0, _FEATURES_ENABLED):
        raise ZnodeError(f"/feature has a malformed status {status!r}")
    features = document.get("features")
    if not isinstance(features, dict):
        raise ZnodeError("/feature has no features map")
    levels = {}
    for name, info in features.items():
        level = info.get("max_version_level") if isinstance(info, dict) else None
        if not isinstance(level, int) or level < 1:
            raise ZnodeError(f"/feature: {name} has no max_version_level >= 1")
        levels[str(name)] = level
    return levels if status == _FEATURES_ENABLED else {}


def parse_int_children(children: Sequence[str]) -> list[int]:
    """The numeric children of a znode (broker ids, partition ids), sorted."""
    return sorted(int(child) for child in children if child.isdigit())
