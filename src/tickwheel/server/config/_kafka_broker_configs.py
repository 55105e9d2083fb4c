"""Kafka's broker configs: every property Kafka's broker defines, its type, its default,
and whether it may change while the broker runs.

The table is Kafka 4's (read from its ``ServerConfigs``, ``KafkaConfig``,
``DynamicBrokerConfig`` and the ``*Configs`` classes): one line a config,
``name TYPE MODE [default]``, the default as DescribeConfigs shows it (a list joined with
commas; ``""`` the empty string; none: no default, described with a null value; an
indented line continues the default above it). MODE is
Kafka's update mode:

- ``read-only``: only in ``server.properties``; IncrementalAlterConfigs refuses it
  (INVALID_REQUEST, "Cannot update these configs dynamically");
- ``per-broker``: dynamic for one broker id only, not as a cluster-wide default;
- ``cluster-wide``: dynamic for one broker or as the cluster-wide default;
- ``listener``: a keystore/truststore setting, dynamic only under a listener prefix
  (``listener.name.<listener>.ssl.keystore.location``), per broker.

Kafka accepts a dynamic config it defines even where this broker has no use for it
(``sasl.kerberos.min.time.before.relogin``): such a value is stored, described and
kept across restarts, and changes nothing else. ``TOPIC_CONFIG_TYPES`` gives the types
of the topic configs (Kafka's ``LogConfig``), which DescribeConfigs reports as well.

``check_value`` parses a value as Kafka's ``ConfigDef`` parses its type: booleans
``true``/``false`` (any case), whole numbers within INT, SHORT or LONG, DOUBLE as
Java's ``Double.parseDouble``; STRING, LIST, CLASS and PASSWORD take any text.

Constants and pure functions; safe from any thread.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass


class ConfigType(enum.IntEnum):
    """Kafka's ``ConfigDef.Type`` as DescribeConfigs v3+ numbers it (``config_type``)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class UpdateMode(enum.Enum):
    """How a broker config may change while the broker runs (Kafka's "Update Mode")."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"
    PER_LISTENER = "listener"


@dataclass(frozen=True, slots=True)
class KafkaConfigKey:
    """One config Kafka's broker defines."""

    name: str
    type: ConfigType
    mode: UpdateMode
    default: str | None

    @property
    def dynamic(self) -> bool:
        """Whether IncrementalAlterConfigs may change it on a running broker."""
        return self.mode is not UpdateMode.READ_ONLY


_BROKER_TABLE = """
advertised.listeners STRING per-broker
alter.config.policy.class.name CLASS read-only
alter.log.dirs.replication.quota.window.num INT read-only 11
alter.log.dirs.replication.quota.window.size.seconds INT read-only 1
authorizer.class.name STRING read-only ""
auto.create.topics.enable BOOLEAN read-only true
auto.leader.rebalance.enable BOOLEAN read-only true
background.threads INT cluster-wide 10
broker.heartbeat.interval.ms INT read-only 2000
broker.id INT read-only -1
broker.id.generation.enable BOOLEAN read-only true
broker.rack STRING read-only
broker.session.timeout.ms INT read-only 9000
client.quota.callback.class CLASS read-only
compression.gzip.level INT cluster-wide -1
compression.lz4.level INT cluster-wide 9
compression.type STRING cluster-wide producer
compression.zstd.level INT cluster-wide 3
connection.failed.authentication.delay.ms INT read-only 100
connections.max.idle.ms LONG read-only 600000
connections.max.reauth.ms LONG read-only 0
control.plane.listener.name STRING read-only
controlled.shutdown.enable BOOLEAN read-only true
controlled.shutdown.max.retries INT read-only 3
controlled.shutdown.retry.backoff.ms LONG read-only 5000
controller.listener.names STRING read-only
controller.quorum.append.linger.ms INT read-only 25
controller.quorum.bootstrap.servers LIST read-only ""
controller.quorum.election.backoff.max.ms INT read-only 1000
controller.quorum.election.timeout.ms INT read-only 1000
controller.quorum.fetch.timeout.ms INT read-only 2000
controller.quorum.request.timeout.ms INT read-only 2000
controller.quorum.retry.backoff.ms INT read-only 20
controller.quorum.voters LIST read-only ""
controller.quota.window.num INT read-only 11
controller.quota.window.size.seconds INT read-only 1
controller.socket.timeout.ms INT read-only 30000
create.topic.policy.class.name CLASS read-only
default.replication.factor INT read-only 1
delegation.token.expiry.check.interval.ms LONG read-only 3600000
delegation.token.expiry.time.ms LONG read-only 86400000
delegation.token.max.lifetime.ms LONG read-only 604800000
delegation.token.secret.key PASSWORD read-only
delete.records.purgatory.purge.interval.requests INT read-only 1
delete.topic.enable BOOLEAN read-only true
early.start.listeners STRING read-only
eligible.leader.replicas.enable BOOLEAN read-only false
fetch.max.bytes INT read-only 57671680
fetch.purgatory.purge.interval.requests INT read-only 1000
follower.replication.throttled.rate LONG cluster-wide 9223372036854775807
group.consumer.assignors LIST read-only org.apache.kafka.coordinator.group.assignor.
    UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor
group.consumer.heartbeat.interval.ms INT read-only 5000
group.consumer.max.heartbeat.interval.ms INT read-only 15000
group.consumer.max.session.timeout.ms INT read-only 60000
group.consumer.max.size INT read-only 2147483647
group.consumer.migration.policy STRING read-only bidirectional
group.consumer.min.heartbeat.interval.ms INT read-only 5000
group.consumer.min.session.timeout.ms INT read-only 45000
group.consumer.session.timeout.ms INT read-only 45000
group.coordinator.append.linger.ms INT read-only 10
group.coordinator.new.enable BOOLEAN read-only true
group.coordinator.rebalance.protocols LIST read-only classic,consumer
group.coordinator.threads INT read-only 1
group.initial.rebalance.delay.ms INT read-only 3000
group.max.session.timeout.ms INT read-only 1800000
group.max.size INT read-only 2147483647
group.min.session.timeout.ms INT read-only 6000
group.share.delivery.count.limit INT read-only 5
group.share.enable BOOLEAN read-only false
group.share.heartbeat.interval.ms INT read-only 5000
group.share.max.groups SHORT read-only 10
group.share.max.heartbeat.interval.ms INT read-only 15000
group.share.max.record.lock.duration.ms INT read-only 60000
group.share.max.session.timeout.ms INT read-only 60000
group.share.max.size INT read-only 200
group.share.min.heartbeat.interval.ms INT read-only 5000
group.share.min.record.lock.duration.ms INT read-only 15000
group.share.min.session.timeout.ms INT read-only 45000
group.share.partition.max.record.locks INT read-only 200
group.share.record.lock.duration.ms INT read-only 30000
group.share.session.timeout.ms INT read-only 45000
initial.broker.registration.timeout.ms INT read-only 60000
inter.broker.listener.name STRING read-only
inter.broker.protocol.version STRING read-only 4.0-IV0
kafka.metrics.polling.interval.secs INT read-only 10
kafka.metrics.reporters LIST read-only ""
leader.imbalance.check.interval.seconds LONG read-only 300
leader.imbalance.per.broker.percentage INT read-only 10
leader.replication.throttled.rate LONG cluster-wide 9223372036854775807
listener.security.protocol.map STRING per-broker PLAINTEXT:PLAINTEXT,SSL:SSL,
    SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
listeners STRING per-broker PLAINTEXT://:9092
log.cleaner.backoff.ms LONG cluster-wide 15000
log.cleaner.dedupe.buffer.size LONG cluster-wide 134217728
log.cleaner.delete.retention.ms LONG cluster-wide 86400000
log.cleaner.enable BOOLEAN read-only true
log.cleaner.io.buffer.load.factor DOUBLE cluster-wide 0.9
log.cleaner.io.buffer.size INT cluster-wide 524288
log.cleaner.io.max.bytes.per.second DOUBLE cluster-wide 1.7976931348623157E308
log.cleaner.max.compaction.lag.ms LONG cluster-wide 9223372036854775807
log.cleaner.min.cleanable.ratio DOUBLE cluster-wide 0.5
log.cleaner.min.compaction.lag.ms LONG cluster-wide 0
log.cleaner.threads INT cluster-wide 1
log.cleanup.policy LIST cluster-wide delete
log.dir STRING read-only /tmp/kafka-logs
log.dir.failure.timeout.ms LONG read-only 30000
log.dirs STRING read-only
log.flush.interval.messages LONG cluster-wide 9223372036854775807
log.flush.interval.ms LONG cluster-wide
log.flush.offset.checkpoint.interval.ms INT read-only 60000
log.flush.scheduler.interval.ms LONG read-only 9223372036854775807
log.flush.start.offset.checkpoint.interval.ms INT read-only 60000
log.index.interval.bytes INT cluster-wide 4096
log.index.size.max.bytes INT cluster-wide 10485760
log.initial.task.delay.ms LONG read-only 30000
log.local.retention.bytes LONG cluster-wide -2
log.local.retention.ms LONG cluster-wide -2
log.message.downconversion.enable BOOLEAN cluster-wide true
log.message.format.version STRING read-only 3.0-IV1
log.message.timestamp.after.max.ms LONG cluster-wide 9223372036854775807
log.message.timestamp.before.max.ms LONG cluster-wide 9223372036854775807
log.message.timestamp.difference.max.ms LONG cluster-wide 9223372036854775807
log.message.timestamp.type STRING cluster-wide CreateTime
log.preallocate BOOLEAN cluster-wide false
log.retention.bytes LONG cluster-wide -1
log.retention.check.interval.ms LONG read-only 300000
log.retention.hours INT read-only 168
log.retention.minutes INT read-only
log.retention.ms LONG cluster-wide
log.roll.hours INT read-only 168
log.roll.jitter.hours INT read-only 0
log.roll.jitter.ms LONG cluster-wide
log.roll.ms LONG cluster-wide
log.segment.bytes INT cluster-wide 1073741824
log.segment.delete.delay.ms LONG cluster-wide 60000
max.connection.creation.rate INT cluster-wide 2147483647
max.connections INT cluster-wide 2147483647
max.connections.per.ip INT cluster-wide 2147483647
max.connections.per.ip.overrides STRING cluster-wide ""
max.incremental.fetch.session.cache.slots INT read-only 1000
max.request.partition.size.limit INT read-only 2000
message.max.bytes INT cluster-wide 1048588
metadata.log.dir STRING read-only
metadata.log.max.record.bytes.between.snapshots LONG read-only 20971520
metadata.log.max.snapshot.interval.ms LONG read-only 3600000
metadata.log.segment.bytes INT read-only 1073741824
metadata.log.segment.min.bytes INT read-only 8388608
metadata.log.segment.ms LONG read-only 604800000
metadata.max.idle.interval.ms INT read-only 500
metadata.max.retention.bytes LONG read-only 104857600
metadata.max.retention.ms LONG read-only 604800000
metric.reporters LIST cluster-wide JmxReporter
metrics.num.samples INT read-only 2
metrics.recording.level STRING read-only INFO
metrics.sample.window.ms LONG read-only 30000
min.insync.replicas INT cluster-wide 1
node.id INT read-only -1
num.io.threads INT cluster-wide 8
num.network.threads INT cluster-wide 3
num.partitions INT read-only 1
num.recovery.threads.per.data.dir INT cluster-wide 1
num.replica.alter.log.dirs.threads INT read-only
num.replica.fetchers INT cluster-wide 1
offset.metadata.max.bytes INT read-only 4096
offsets.commit.timeout.ms INT read-only 5000
offsets.load.buffer.size INT read-only 5242880
offsets.retention.check.interval.ms LONG read-only 600000
offsets.retention.minutes INT read-only 10080
offsets.topic.compression.codec INT read-only 0
offsets.topic.num.partitions INT read-only 50
offsets.topic.replication.factor SHORT read-only 3
offsets.topic.segment.bytes INT read-only 104857600
password.encoder.cipher.algorithm STRING read-only AES/CBC/PKCS5Padding
password.encoder.iterations INT read-only 4096
password.encoder.key.length INT read-only 128
password.encoder.keyfactory.algorithm STRING read-only
password.encoder.old.secret PASSWORD read-only
password.encoder.secret PASSWORD read-only
principal.builder.class CLASS per-broker org.apache.kafka.common.security.authenticator.
    DefaultKafkaPrincipalBuilder
process.roles LIST read-only ""
producer.id.expiration.check.interval.ms INT read-only 600000
producer.id.expiration.ms INT cluster-wide 86400000
producer.purgatory.purge.interval.requests INT read-only 1000
queued.max.request.bytes LONG read-only -1
queued.max.requests INT read-only 500
quota.window.num INT read-only 11
quota.window.size.seconds INT read-only 1
remote.fetch.max.wait.ms INT cluster-wide 500
remote.list.offsets.request.timeout.ms LONG cluster-wide 30000
remote.log.index.file.cache.total.size.bytes LONG cluster-wide 1073741824
remote.log.manager.copier.thread.pool.size INT read-only -1
remote.log.manager.copy.max.bytes.per.second LONG cluster-wide 9223372036854775807
remote.log.manager.copy.quota.window.num INT read-only 11
remote.log.manager.copy.quota.window.size.seconds INT read-only 1
remote.log.manager.expiration.thread.pool.size INT read-only -1
remote.log.manager.fetch.max.bytes.per.second LONG cluster-wide 9223372036854775807
remote.log.manager.fetch.quota.window.num INT read-only 11
remote.log.manager.fetch.quota.window.size.seconds INT read-only 1
remote.log.manager.task.interval.ms LONG read-only 30000
remote.log.manager.task.retry.backoff.max.ms LONG read-only 30000
remote.log.manager.task.retry.backoff.ms LONG read-only 500
remote.log.manager.task.retry.jitter DOUBLE read-only 0.2
remote.log.manager.thread.pool.size INT read-only 10
remote.log.metadata.custom.metadata.max.bytes INT read-only 128
remote.log.metadata.manager.class.name STRING read-only org.apache.kafka.server.log.remote.
    metadata.storage.TopicBasedRemoteLogMetadataManager
remote.log.metadata.manager.class.path STRING read-only
remote.log.metadata.manager.impl.prefix STRING read-only rlmm.config.
remote.log.metadata.manager.listener.name STRING read-only
remote.log.reader.max.pending.tasks INT read-only 100
remote.log.reader.threads INT read-only 10
remote.log.storage.manager.class.name STRING read-only
remote.log.storage.manager.class.path STRING read-only
remote.log.storage.manager.impl.prefix STRING read-only rsm.config.
remote.log.storage.system.enable BOOLEAN read-only false
replica.alter.log.dirs.io.max.bytes.per.second LONG cluster-wide 9223372036854775807
replica.fetch.backoff.ms INT read-only 1000
replica.fetch.max.bytes INT read-only 1048576
replica.fetch.min.bytes INT read-only 1
replica.fetch.response.max.bytes INT read-only 10485760
replica.fetch.wait.max.ms INT read-only 500
replica.high.watermark.checkpoint.interval.ms LONG read-only 5000
replica.lag.time.max.ms LONG read-only 30000
replica.selector.class STRING read-only
replica.socket.receive.buffer.bytes INT read-only 65536
replica.socket.timeout.ms INT read-only 30000
replication.quota.window.num INT read-only 11
replication.quota.window.size.seconds INT read-only 1
request.timeout.ms INT read-only 30000
reserved.broker.max.id INT read-only 1000
sasl.client.callback.handler.class CLASS read-only
sasl.enabled.mechanisms LIST per-broker GSSAPI
sasl.jaas.config PASSWORD per-broker
sasl.kerberos.kinit.cmd STRING per-broker /usr/bin/kinit
sasl.kerberos.min.time.before.relogin LONG per-broker 60000
sasl.kerberos.principal.to.local.rules LIST per-broker DEFAULT
sasl.kerberos.service.name STRING per-broker
sasl.kerberos.ticket.renew.jitter DOUBLE per-broker 0.05
sasl.kerberos.ticket.renew.window.factor DOUBLE per-broker 0.8
sasl.login.callback.handler.class CLASS read-only
sasl.login.class CLASS read-only
sasl.login.connect.timeout.ms INT read-only
sasl.login.read.timeout.ms INT read-only
sasl.login.refresh.buffer.seconds SHORT per-broker 300
sasl.login.refresh.min.period.seconds SHORT per-broker 60
sasl.login.refresh.window.factor DOUBLE per-broker 0.8
sasl.login.refresh.window.jitter DOUBLE per-broker 0.05
sasl.login.retry.backoff.max.ms LONG read-only 10000
sasl.login.retry.backoff.ms LONG read-only 100
sasl.mechanism.controller.protocol STRING read-only GSSAPI
sasl.mechanism.inter.broker.protocol STRING per-broker GSSAPI
sasl.oauthbearer.clock.skew.seconds INT read-only 30
sasl.oauthbearer.expected.audience LIST read-only
sasl.oauthbearer.expected.issuer STRING read-only
sasl.oauthbearer.jwks.endpoint.refresh.ms LONG read-only 3600000
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms LONG read-only 10000
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms LONG read-only 100
sasl.oauthbearer.jwks.endpoint.url STRING read-only
sasl.oauthbearer.scope.claim.name STRING read-only scope
sasl.oauthbearer.sub.claim.name STRING read-only sub
sasl.oauthbearer.token.endpoint.url STRING read-only
sasl.server.callback.handler.class CLASS read-only
sasl.server.max.receive.size INT read-only 524288
security.inter.broker.protocol STRING read-only PLAINTEXT
security.providers STRING read-only
server.max.startup.time.ms LONG read-only 9223372036854775807
share.coordinator.append.linger.ms INT read-only 10
share.coordinator.load.buffer.size INT read-only 5242880
share.coordinator.snapshot.update.records.per.snapshot INT read-only 500
share.coordinator.state.topic.compression.codec INT read-only 0
share.coordinator.state.topic.min.isr SHORT read-only 2
share.coordinator.state.topic.num.partitions INT read-only 50
share.coordinator.state.topic.replication.factor SHORT read-only 3
share.coordinator.state.topic.segment.bytes INT read-only 104857600
share.coordinator.threads INT read-only 1
share.coordinator.write.timeout.ms INT read-only 5000
share.fetch.max.fetch.records INT read-only 2147483647
share.fetch.purgatory.purge.interval.requests INT read-only 1000
socket.connection.setup.timeout.max.ms LONG read-only 30000
socket.connection.setup.timeout.ms LONG read-only 10000
socket.listen.backlog.size INT read-only 50
socket.receive.buffer.bytes INT read-only 102400
socket.request.max.bytes INT read-only 104857600
socket.send.buffer.bytes INT read-only 102400
ssl.allow.dn.changes BOOLEAN read-only false
ssl.allow.san.changes BOOLEAN read-only false
ssl.cipher.suites LIST per-broker ""
ssl.client.auth STRING per-broker none
ssl.enabled.protocols LIST per-broker TLSv1.2,TLSv1.3
ssl.endpoint.identification.algorithm STRING per-broker https
ssl.engine.factory.class CLASS per-broker
ssl.key.password PASSWORD listener
ssl.keymanager.algorithm STRING per-broker SunX509
ssl.keystore.certificate.chain PASSWORD listener
ssl.keystore.key PASSWORD listener
ssl.keystore.location STRING listener
ssl.keystore.password PASSWORD listener
ssl.keystore.type STRING listener JKS
ssl.principal.mapping.rules STRING read-only DEFAULT
ssl.protocol STRING per-broker TLSv1.3
ssl.provider STRING per-broker
ssl.secure.random.implementation STRING per-broker
ssl.trustmanager.algorithm STRING per-broker PKIX
ssl.truststore.certificates PASSWORD listener
ssl.truststore.location STRING listener
ssl.truststore.password PASSWORD listener
ssl.truststore.type STRING listener JKS
telemetry.max.bytes INT read-only 1048576
transaction.abort.timed.out.transaction.cleanup.interval.ms INT read-only 10000
transaction.max.timeout.ms INT read-only 900000
transaction.partition.verification.enable BOOLEAN cluster-wide true
transaction.remove.expired.transaction.cleanup.interval.ms INT read-only 3600000
transaction.state.log.load.buffer.size INT read-only 5242880
transaction.state.log.min.isr INT read-only 2
transaction.state.log.num.partitions INT read-only 50
transaction.state.log.replication.factor SHORT read-only 3
transaction.state.log.segment.bytes INT read-only 104857600
transactional.id.expiration.ms INT read-only 604800000
unclean.leader.election.enable BOOLEAN cluster-wide false
unclean.leader.election.interval.ms LONG read-only 300000
unstable.api.versions.enable BOOLEAN read-only false
unstable.feature.versions.enable BOOLEAN read-only false
zookeeper.clientCnxnSocket STRING read-only
zookeeper.connect STRING read-only
zookeeper.connection.timeout.ms INT read-only
zookeeper.max.in.flight.requests INT read-only 10
zookeeper.metadata.migration.enable BOOLEAN read-only false
zookeeper.metadata.migration.min.batch.size INT read-only 200
zookeeper.session.timeout.ms INT read-only 18000
zookeeper.set.acl BOOLEAN read-only false
zookeeper.ssl.cipher.suites LIST read-only
zookeeper.ssl.client.enable BOOLEAN read-only false
zookeeper.ssl.crl.enable BOOLEAN read-only false
zookeeper.ssl.enabled.protocols LIST read-only
zookeeper.ssl.endpoint.identification.algorithm STRING read-only HTTPS
zookeeper.ssl.keystore.location STRING read-only
zookeeper.ssl.keystore.password PASSWORD read-only
zookeeper.ssl.keystore.type STRING read-only
zookeeper.ssl.ocsp.enable BOOLEAN read-only false
zookeeper.ssl.protocol STRING read-only TLSv1.2
zookeeper.ssl.truststore.location STRING read-only
zookeeper.ssl.truststore.password PASSWORD read-only
zookeeper.ssl.truststore.type STRING read-only
"""

TOPIC_CONFIG_TYPES: Mapping[str, ConfigType] = {
    "cleanup.policy": ConfigType.LIST,
    "compression.gzip.level": ConfigType.INT,
    "compression.lz4.level": ConfigType.INT,
    "compression.type": ConfigType.STRING,
    "compression.zstd.level": ConfigType.INT,
    "delete.retention.ms": ConfigType.LONG,
    "file.delete.delay.ms": ConfigType.LONG,
    "flush.messages": ConfigType.LONG,
    "flush.ms": ConfigType.LONG,
    "follower.replication.throttled.replicas": ConfigType.LIST,
    "index.interval.bytes": ConfigType.INT,
    "leader.replication.throttled.replicas": ConfigType.LIST,
    "local.retention.bytes": ConfigType.LONG,
    "local.retention.ms": ConfigType.LONG,
    "max.compaction.lag.ms": ConfigType.LONG,
    "max.message.bytes": ConfigType.INT,
    "message.downconversion.enable": ConfigType.BOOLEAN,
    "message.format.version": ConfigType.STRING,
    "message.timestamp.after.max.ms": ConfigType.LONG,
    "message.timestamp.before.max.ms": ConfigType.LONG,
    "message.timestamp.difference.max.ms": ConfigType.LONG,
    "message.timestamp.type": ConfigType.STRING,
    "min.cleanable.dirty.ratio": ConfigType.DOUBLE,
    "min.compaction.lag.ms": ConfigType.LONG,
    "min.insync.replicas": ConfigType.INT,
    "preallocate": ConfigType.BOOLEAN,
    "remote.log.copy.disable": ConfigType.BOOLEAN,
    "remote.log.delete.on.disable": ConfigType.BOOLEAN,
    "remote.storage.enable": ConfigType.BOOLEAN,
    "retention.bytes": ConfigType.LONG,
    "retention.ms": ConfigType.LONG,
    "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT,
    "segment.jitter.ms": ConfigType.LONG,
    "segment.ms": ConfigType.LONG,
    "unclean.leader.election.enable": ConfigType.BOOLEAN,
}
"""The type of each topic config (Kafka's ``LogConfig``)."""


def _parse_table(text: str) -> dict[str, KafkaConfigKey]:
    keys = {}
    for line in re.sub(r"\n +", "", text).strip().splitlines():
        name, type_name, mode, *default = line.split(" ", 3)
        value = default[0] if default else None
        keys[name] = KafkaConfigKey(
            name, ConfigType[type_name], UpdateMode(mode), "" if value == '""' else value
        )
    return keys


KAFKA_BROKER_CONFIGS: Mapping[str, KafkaConfigKey] = _parse_table(_BROKER_TABLE)
"""Every config Kafka's broker defines, by name."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
"""Listener configs that may be set per listener as a cluster-wide default too."""
_LISTENER_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)
"""Listener configs set per SASL mechanism: ``listener.name.<l>.<mechanism>.<config>``."""
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")

_WHOLE_NUMBER_BITS: Mapping[ConfigType, int] = {
    ConfigType.SHORT: 16,
    ConfigType.INT: 32,
    ConfigType.LONG: 64,
}
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?))[fFdD]?")


def listener_base_name(name: str) -> str | None:
    """The config a listener-prefixed ``name`` sets (``listener.name.l.<config>``, or
    ``listener.name.l.<mechanism>.<config>`` for SASL mechanism configs); None if
    ``name`` has no listener prefix."""
    matched = _LISTENER_CONFIG.fullmatch(name)
    if matched is None:
        return None
    base = matched.group(1)
    return next((c for c in _LISTENER_MECHANISM_CONFIGS if base.endswith("." + c)), base)


def broker_config_key(name: str) -> KafkaConfigKey | None:
    """The Kafka config ``name`` sets, itself or under a listener prefix; None if
    Kafka defines no such broker config."""
    base = listener_base_name(name)
    return KAFKA_BROKER_CONFIGS.get(name if base is None else base)


def check_value(name: str, config_type: ConfigType, value: str) -> str | None:
    """Why ``value`` is not a valid ``config_type`` (Kafka's message), or None."""
    trimmed = value.strip()
    bits = _WHOLE_NUMBER_BITS.get(config_type)
    if config_type is ConfigType.BOOLEAN:
        valid = trimmed.lower() in {"true", "false"}
        problem = "Expected value to be either true or false"
    elif bits is not None:
        valid = re.fullmatch(r"[+-]?\d+", trimmed) is not None and (
            -(2 ** (bits - 1)) <= int(trimmed) < 2 ** (bits - 1)
        )
        problem = f"Not a number of type {config_type.name}"
    elif config_type is ConfigType.DOUBLE:
        valid = _JAVA_DOUBLE.fullmatch(trimmed) is not None
        problem = "Not a number of type DOUBLE"
    else:
        return None
    return None if valid else f"Invalid value {value} for configuration {name}: {problem}"
