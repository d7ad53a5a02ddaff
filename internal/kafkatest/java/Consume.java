import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Consume reads a topic with the Java client and prints every record as one
 * JSON line on stdout (kafkatest.ParseRecords reads them):
 *
 * <pre>{"topic":"t","partition":0,"offset":5,"timestamp":1700000000000,
 *  "timestampType":"CreateTime","key":"base64"|null,"value":"base64"|null,
 *  "headers":[{"key":"h","value":"base64"|null}]}</pre>
 *
 * Arguments: --bootstrap-server host:port[,…] --topic T, then optionally
 * --group G (subscribe as a member of group G, committing offsets
 * synchronously after each poll's records are printed; without it every
 * partition of T is assigned and read from its beginning),
 * --max-records N (stop after N records; default unbounded),
 * --idle-timeout-ms M (stop when no record came for M ms; default 10000;
 * counted from the partitions' assignment — with --group the first
 * one's, the join itself given up
 * to --join-timeout-ms J, default 120000: a loaded machine's JVM and the
 * group's initial rebalance delay can take longer than M before the first
 * partition is assigned),
 * --property key=value (any consumer config, repeatable; e.g.
 * isolation.level=read_committed, group.protocol=consumer).
 * It stops cleanly on SIGTERM. The last line on stderr is "consumed N records".
 */
public final class Consume {
    public static void main(String[] args) throws Exception {
        Args a = new Args(args, List.of("--bootstrap-server", "--topic"),
            List.of("--group", "--max-records", "--idle-timeout-ms", "--join-timeout-ms"));
        String topic = a.get("--topic"), group = a.get("--group");
        long maxRecords = a.getLong("--max-records", Long.MAX_VALUE), idleMs = a.getLong("--idle-timeout-ms", 10000),
            joinMs = a.getLong("--join-timeout-ms", 120000);
        Properties props = a.props;
        props.putIfAbsent(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap-server"));
        props.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.putIfAbsent(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (group != null) props.putIfAbsent(ConsumerConfig.GROUP_ID_CONFIG, group);

        long consumed = 0;
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        CountDownLatch closed = new CountDownLatch(1);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            consumer.wakeup();
            try { closed.await(); } catch (InterruptedException e) { main.interrupt(); }
        }));
        // lastEvent[0]: when the last record came or, before the first one,
        // when partitions were assigned (set by the listener, which runs
        // inside poll on this thread); assigned[0]: whether they were.
        long[] lastEvent = {System.currentTimeMillis()};
        boolean[] assigned = {group == null};
        try {
            if (group != null) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {}
                    @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        if (!assigned[0]) lastEvent[0] = System.currentTimeMillis();
                        assigned[0] = true;
                    }
                });
            } else {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo p : consumer.partitionsFor(topic)) tps.add(new TopicPartition(topic, p.partition()));
                consumer.assign(tps);
                consumer.seekToBeginning(tps);
                // A loaded machine's JVM can take seconds to get here.
                lastEvent[0] = System.currentTimeMillis();
            }
            StringBuilder sb = new StringBuilder();
            while (consumed < maxRecords && System.currentTimeMillis() - lastEvent[0] < (assigned[0] ? idleMs : Math.max(idleMs, joinMs))) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                lastEvent[0] = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    sb.setLength(0);
                    sb.append("{\"topic\":").append(quote(r.topic()))
                      .append(",\"partition\":").append(r.partition())
                      .append(",\"offset\":").append(r.offset())
                      .append(",\"timestamp\":").append(r.timestamp())
                      .append(",\"timestampType\":").append(quote(r.timestampType().name))
                      .append(",\"key\":").append(b64(r.key()))
                      .append(",\"value\":").append(b64(r.value()))
                      .append(",\"headers\":[");
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) sb.append(',');
                        first = false;
                        sb.append("{\"key\":").append(quote(h.key())).append(",\"value\":").append(b64(h.value())).append('}');
                    }
                    sb.append("]}");
                    System.out.println(sb);
                    consumed++;
                }
                System.out.flush();
                if (group != null) consumer.commitSync();
            }
        } catch (WakeupException e) {
            // SIGTERM: stop polling and close.
        } finally {
            consumer.close();
            System.err.println("consumed " + consumed + " records");
            closed.countDown();
        }
    }

    static String b64(byte[] b) {
        return b == null ? "null" : "\"" + Base64.getEncoder().encodeToString(b) + "\"";
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') sb.append('\\').append(c);
            else if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
            else sb.append(c);
        }
        return sb.append('"').toString();
    }

    private Consume() {}
}
