import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produce sends each line of stdin as one record with the Java client and
 * prints one JSON line per acknowledged record on stdout, in the order the
 * acknowledgements arrive:
 *
 * <pre>{"line":0,"partition":2,"offset":17,"timestamp":1700000000000}</pre>
 *
 * or {"line":0,"error":"message"} for a record that failed. Arguments:
 * --bootstrap-server host:port[,…] --topic T, then optionally
 * --partition P (default: the client's partitioner), --key-separator S (a
 * line "k S v" becomes key k and value v; default: no key, the line is the
 * value), --property key=value (any producer config, repeatable; defaults
 * acks=all with idempotence, as the client's own). The exit status is 1 when
 * any record failed. The last line on stderr is "produced N records, M failed".
 */
public final class Produce {
    public static void main(String[] args) throws Exception {
        Args a = new Args(args, List.of("--bootstrap-server", "--topic"), List.of("--partition", "--key-separator"));
        String topic = a.get("--topic"), sep = a.get("--key-separator");
        Integer partition = a.get("--partition") == null ? null : Integer.valueOf(a.get("--partition"));
        Properties props = a.props;
        props.putIfAbsent(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap-server"));
        props.putIfAbsent(ProducerConfig.ACKS_CONFIG, "all");

        AtomicLong ok = new AtomicLong(), failed = new AtomicLong();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            long n = 0;
            while ((line = in.readLine()) != null) {
                byte[] key = null;
                String value = line;
                if (sep != null) {
                    int at = line.indexOf(sep);
                    if (at >= 0) {
                        key = line.substring(0, at).getBytes(StandardCharsets.UTF_8);
                        value = line.substring(at + sep.length());
                    }
                }
                long lineNo = n++;
                producer.send(new ProducerRecord<>(topic, partition, key, value.getBytes(StandardCharsets.UTF_8)), (md, err) -> {
                    String out;
                    if (err != null) {
                        failed.incrementAndGet();
                        out = "{\"line\":" + lineNo + ",\"error\":" + Consume.quote(String.valueOf(err)) + "}";
                    } else {
                        ok.incrementAndGet();
                        out = "{\"line\":" + lineNo + ",\"partition\":" + md.partition() + ",\"offset\":" + md.offset()
                            + ",\"timestamp\":" + md.timestamp() + "}";
                    }
                    synchronized (System.out) {
                        System.out.println(out);
                    }
                });
            }
            producer.flush();
        }
        System.out.flush();
        System.err.println("produced " + ok.get() + " records, " + failed.get() + " failed");
        if (failed.get() > 0) System.exit(1);
    }

    private Produce() {}
}
