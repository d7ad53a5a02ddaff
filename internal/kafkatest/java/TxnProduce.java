import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * TxnProduce is the Java client's transactional producer driven by
 * commands, one per line of stdin: "begin" (beginTransaction), "send V"
 * (send value V to the topic's partition 0 and wait for its
 * acknowledgement), "commit" (commitTransaction), "abort"
 * (abortTransaction). initTransactions runs first. After each command it
 * prints one line on stdout: "ok CMD" or "error CMD: message" (flushed), so
 * that a test can act between commands. Arguments: --bootstrap-server
 * host:port --topic T --transactional-id ID, then --property key=value
 * (any producer config, repeatable, e.g. transaction.timeout.ms). It exits
 * when stdin ends; after an error the producer is closed and every later
 * command answers "error".
 */
public final class TxnProduce {
    public static void main(String[] args) throws Exception {
        Args a = new Args(args, List.of("--bootstrap-server", "--topic", "--transactional-id"), List.of());
        String topic = a.get("--topic");
        Properties props = a.props;
        props.putIfAbsent(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap-server"));
        props.putIfAbsent(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.get("--transactional-id"));
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        boolean broken = false;
        try {
            producer.initTransactions();
            System.out.println("ok init");
        } catch (Exception e) {
            System.out.println("error init: " + e);
            broken = true;
        }
        System.out.flush();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String cmd = line.trim();
                if (cmd.isEmpty()) continue;
                if (broken) {
                    System.out.println("error " + cmd + ": producer closed after an error");
                    System.out.flush();
                    continue;
                }
                try {
                    if (cmd.equals("begin")) {
                        producer.beginTransaction();
                    } else if (cmd.startsWith("send ")) {
                        producer.send(new ProducerRecord<>(topic, 0, null, cmd.substring(5).getBytes(StandardCharsets.UTF_8))).get();
                    } else if (cmd.equals("commit")) {
                        producer.commitTransaction();
                    } else if (cmd.equals("abort")) {
                        producer.abortTransaction();
                    } else {
                        throw new IllegalArgumentException("unknown command " + cmd);
                    }
                    System.out.println("ok " + cmd);
                } catch (Exception e) {
                    System.out.println("error " + cmd + ": " + e);
                    broken = true;
                    producer.close(java.time.Duration.ZERO);
                }
                System.out.flush();
            }
        }
        if (!broken) producer.close();
    }

    private TxnProduce() {}
}
