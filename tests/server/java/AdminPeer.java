import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka's own admin client and producer against a broker, one scenario per command.
 *
 * <p>Each command prints what the client saw as {@code key=value} lines on stdout, and the
 * Python test asserts on them: the program checks nothing itself. A failed future prints
 * the simple name of its exception's cause (as {@code key=!ExceptionName}).
 *
 * <pre>
 * AdminPeer describe-topics BOOTSTRAP TOPIC PARTITIONS
 * AdminPeer log-dirs BOOTSTRAP TOPIC RECORDS
 * AdminPeer client-quotas BOOTSTRAP
 * AdminPeer throttled-producer BOOTSTRAP TOPIC CLIENT_ID BYTES
 * </pre>
 */
public final class AdminPeer {
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    private AdminPeer() {
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1];
        switch (args[0]) {
            case "describe-topics":
                describeTopics(bootstrap, args[2], Integer.parseInt(args[3]));
                break;
            case "log-dirs":
                logDirs(bootstrap, args[2], Integer.parseInt(args[3]));
                break;
            case "client-quotas":
                clientQuotas(bootstrap);
                break;
            case "throttled-producer":
                throttledProducer(bootstrap, args[2], args[3], Integer.parseInt(args[4]));
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[0]);
        }
    }

    private static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) TIMEOUT.toMillis());
        return Admin.create(props);
    }

    private static void print(String key, Object value) {
        System.out.println(key + "=" + value);
    }

    private static String failure(ExecutionException e) {
        return "!" + e.getCause().getClass().getSimpleName();
    }

    /** Print "done" under KEY when FUTURE succeeds, else its failure. */
    private static void printOutcome(String key, KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get();
            print(key, "done");
        } catch (ExecutionException e) {
            print(key, failure(e));
        }
    }

    /**
     * Create TOPIC, then describe it by its id (Metadata) and by its name (DescribeTopicPartitions),
     * whole and two partitions per answer.
     */
    private static void describeTopics(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            NewTopic newTopic = new NewTopic(topic, partitions, (short) 1);
            Uuid created = admin.createTopics(List.of(newTopic)).topicId(topic).get();
            print("created.id", created);
            TopicDescription byId = admin.describeTopics(TopicCollection.ofTopicIds(List.of(created)))
                .topicIdValues().get(created).get();
            printDescription("by_id", byId);
            TopicDescription byName = admin.describeTopics(TopicCollection.ofTopicNames(List.of(topic)))
                .topicNameValues().get(topic).get();
            printDescription("by_name", byName);
            // Two partitions per answer: the rest come through DescribeTopicPartitions' cursor.
            TopicDescription paged = admin.describeTopics(TopicCollection.ofTopicNames(List.of(topic)),
                    new DescribeTopicsOptions().partitionSizeLimitPerResponse(2))
                .topicNameValues().get(topic).get();
            printDescription("by_name_paged", paged);
            Uuid unknown = Uuid.randomUuid();
            printOutcome("unknown_id", admin.describeTopics(TopicCollection.ofTopicIds(List.of(unknown)))
                .topicIdValues().get(unknown));
            String missing = topic + "-missing";
            printOutcome("unknown_name", admin.describeTopics(TopicCollection.ofTopicNames(List.of(missing)))
                .topicNameValues().get(missing));
        }
    }

    private static void printDescription(String prefix, TopicDescription description) {
        print(prefix + ".name", description.name());
        print(prefix + ".id", description.topicId());
        print(prefix + ".internal", description.isInternal());
        print(prefix + ".partitions", description.partitions().size());
        for (TopicPartitionInfo info : description.partitions()) {
            String at = prefix + ".partition." + info.partition();
            print(at + ".leader", info.leader() == null ? "none" : info.leader().id());
            print(at + ".replicas", info.replicas().size());
            print(at + ".isr", info.isr().size());
        }
    }

    /** Create TOPIC (one partition), produce RECORDS records of 1 KiB, describe every log dir. */
    private static void logDirs(String bootstrap, String topic, int records) throws Exception {
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, "log-dirs-peer")) {
                for (int i = 0; i < records; i++) {
                    producer.send(new ProducerRecord<>(topic, new byte[1024])).get();
                }
            }
            int nodeId = admin.describeCluster().nodes().get().iterator().next().id();
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(nodeId))
                .allDescriptions().get().get(nodeId);
            print("dirs", dirs.size());
            for (Map.Entry<String, LogDirDescription> dir : new TreeMap<>(dirs).entrySet()) {
                LogDirDescription description = dir.getValue();
                String at = "dir." + dir.getKey();
                print(at + ".error", description.error() == null ? "none" : description.error().getClass().getSimpleName());
                print(at + ".total_bytes", description.totalBytes().orElse(-1));
                print(at + ".usable_bytes", description.usableBytes().orElse(-1));
                ReplicaInfo replica = description.replicaInfos().get(new TopicPartition(topic, 0));
                if (replica != null) {
                    print(at + ".replica.size", replica.size());
                    print(at + ".replica.offset_lag", replica.offsetLag());
                    print(at + ".replica.future", replica.isFuture());
                }
            }
        }
    }

    /** Alter quotas of three entities, describe them through filters, remove one, describe again. */
    private static void clientQuotas(String bootstrap) throws Exception {
        ClientQuotaEntity aliceApp = new ClientQuotaEntity(
            Map.of(ClientQuotaEntity.USER, "alice", ClientQuotaEntity.CLIENT_ID, "app"));
        ClientQuotaEntity alice = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, "alice"));
        Map<String, String> defaultClient = new TreeMap<>();
        defaultClient.put(ClientQuotaEntity.CLIENT_ID, null);
        ClientQuotaEntity anyClient = new ClientQuotaEntity(defaultClient);
        try (Admin admin = admin(bootstrap)) {
            admin.alterClientQuotas(List.of(
                new ClientQuotaAlteration(aliceApp, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 1024.0),
                    new ClientQuotaAlteration.Op("consumer_byte_rate", 2048.0))),
                new ClientQuotaAlteration(alice, List.of(
                    new ClientQuotaAlteration.Op("request_percentage", 50.0))),
                new ClientQuotaAlteration(anyClient, List.of(
                    new ClientQuotaAlteration.Op("producer_byte_rate", 4096.0))))).all().get();
            printQuotas("all", admin, ClientQuotaFilter.all());
            printQuotas("alice", admin, ClientQuotaFilter.contains(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice"))));
            printQuotas("only_alice", admin, ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, "alice"))));
            printQuotas("default_client", admin, ClientQuotaFilter.containsOnly(List.of(
                ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID))));
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(aliceApp, List.of(
                new ClientQuotaAlteration.Op("producer_byte_rate", null))))).all().get();
            printQuotas("after_removal", admin, ClientQuotaFilter.contains(List.of(
                ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, "app"))));
            printOutcome("bad_key", admin.alterClientQuotas(List.of(new ClientQuotaAlteration(alice, List.of(
                new ClientQuotaAlteration.Op("no_such_quota", 1.0))))).all());
        }
    }

    private static void printQuotas(String prefix, Admin admin, ClientQuotaFilter filter) throws Exception {
        Map<ClientQuotaEntity, Map<String, Double>> quotas = admin.describeClientQuotas(filter).entities().get();
        print(prefix + ".entities", quotas.size());
        for (Map.Entry<ClientQuotaEntity, Map<String, Double>> entity : quotas.entrySet()) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<String, String> part : new TreeMap<>(entity.getKey().entries()).entrySet()) {
                parts.add(part.getKey() + ":" + (part.getValue() == null ? "<default>" : part.getValue()));
            }
            String at = prefix + "." + String.join(",", parts);
            for (Map.Entry<String, Double> value : new TreeMap<>(entity.getValue()).entrySet()) {
                print(at + "." + value.getKey(), value.getValue());
            }
        }
    }

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String clientId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** Send BYTES bytes to TOPIC as CLIENT_ID in 4 KiB records; print the producer's throttle metrics. */
    private static void throttledProducer(String bootstrap, String topic, String clientId, int bytes)
            throws Exception {
        int recordBytes = 4096;
        long started = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = producer(bootstrap, clientId)) {
            for (int sent = 0; sent < bytes; sent += recordBytes) {
                producer.send(new ProducerRecord<>(topic, new byte[recordBytes]));
            }
            producer.flush();
            print("elapsed_ms", (System.nanoTime() - started) / 1_000_000);
            for (Map.Entry<MetricName, ? extends Metric> metric : producer.metrics().entrySet()) {
                MetricName name = metric.getKey();
                if (name.group().equals("producer-metrics") && name.name().startsWith("produce-throttle-time")) {
                    print(name.name(), metric.getValue().metricValue());
                }
            }
        }
    }
}
