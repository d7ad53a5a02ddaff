import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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
        String bootstrap = null, topic = null, sep = null;
        Integer partition = null;
        Properties props = new Properties();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) throw new IllegalArgumentException("missing value for " + a);
            String v = args[++i];
            switch (a) {
                case "--bootstrap-server": bootstrap = v; break;
                case "--topic": topic = v; break;
                case "--partition": partition = Integer.parseInt(v); break;
                case "--key-separator": sep = v; break;
                case "--property": {
                    int eq = v.indexOf('=');
                    if (eq < 0) throw new IllegalArgumentException("--property wants key=value: " + v);
                    props.setProperty(v.substring(0, eq), v.substring(eq + 1));
                    break;
                }
                default: throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        if (bootstrap == null || topic == null) throw new IllegalArgumentException("--bootstrap-server and --topic are required");
        props.putIfAbsent(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
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
