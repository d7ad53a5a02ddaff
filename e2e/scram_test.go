package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// TestSCRAMClients: a sidecar with a PLAINTEXT and a SASL_SSL listener
// offering SCRAM-SHA-512 and SCRAM-SHA-256 (SPEC §14, SCRAM). Kafka's
// kafka-configs.sh sets the users' credentials over the PLAINTEXT
// listener (AlterUserScramCredentials) and lists them
// (DescribeUserScramCredentials); kgo, confluent-kafka and the Java
// client produce and consume over SASL_SSL with them (the Java producer
// re-authenticating every 2 s), kcat too where it links librdkafka 2.6.1
// or later, and is refused as Kafka 4.x refuses it where it links an
// older one (this machine's: SPEC §14, SCRAM); a wrong password, an unknown user and a user of the other
// mechanism are refused SASL_AUTHENTICATION_FAILED while a logged-in
// client goes on producing; after a restart on the same data.dir the
// credentials (the metadata log's records 116) still log in, and one
// removed with kafka-configs.sh no longer does. No password reaches the
// sidecar's log.
func TestSCRAMClients(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	dataDir := t.TempDir()
	sets := []string{
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"ssl.keystore.location=" + f.serverKeystore,
		"sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
		"connections.max.reauth.ms=2000",
	}
	sc := StartSidecar(t, dataDir, sets...)
	ctx := testCtx(t, 6*time.Minute)
	tlsCfg := f.clientTLS(t, nil)
	configs := func(sc *Sidecar, args ...string) string {
		t.Helper()
		out, errOut, err := kafkatest.Tool(ctx, "kafka-configs", append([]string{"--bootstrap-server", sc.Listeners["PLAINTEXT"]}, args...)...)
		if err != nil {
			t.Fatalf("kafka-configs %v: %v\n%s\n%s", args, err, out, errOut)
		}
		return out
	}
	configs(sc, "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]")
	configs(sc, "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "SCRAM-SHA-256=[password=bob-secret]")
	configs(sc, "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "SCRAM-SHA-512=[password=carol-secret]")
	if out := configs(sc, "--describe", "--entity-type", "users", "--entity-name", "alice"); !strings.Contains(out, "SCRAM-SHA-512=iterations=8192") {
		t.Fatalf("kafka-configs --describe alice: %q", out)
	}
	if out := configs(sc, "--describe", "--entity-type", "users"); !strings.Contains(out, "bob") || !strings.Contains(out, "SCRAM-SHA-256=iterations=4096") || !strings.Contains(out, "carol") {
		t.Fatalf("kafka-configs --describe: %q", out)
	}
	addr := sc.Listeners["SASL_SSL"]

	client := func(addr string, m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		t.Helper()
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), kgo.SASL(m)}, opts...)...)
		mustNoErr(t, "kgo client", err)
		t.Cleanup(cl.Close)
		return cl
	}
	alice := scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()
	bob := scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()

	t.Run("kgo SCRAM-SHA-512 and SCRAM-SHA-256", func(t *testing.T) {
		for _, c := range []struct {
			topic string
			m     sasl.Mechanism
		}{{"scram-kgo-512", alice}, {"scram-kgo-256", bob}} {
			kgoRoundTrip(t, ctx, c.topic, 50, kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), kgo.SASL(c.m))
		}
	})

	// librdkafka before 2.6.1 sends the client nonce twice in its
	// client-final message (SPEC §14, SCRAM): Kafka 4.x refuses that and
	// so does the sidecar. The kcat installed here links librdkafka
	// 2.0.2; a kcat of 2.6.1 or later must produce and consume.
	t.Run("kcat", func(t *testing.T) {
		args := []string{"-b", addr, "-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + f.truststore,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username=carol", "-X", "sasl.password=carol-secret"}
		if !librdkafkaScramFixed(t) {
			in := filepath.Join(t.TempDir(), "lines")
			mustNoErr(t, "write", os.WriteFile(in, []byte("one\ntwo\n"), 0o644))
			cmd := exec.CommandContext(ctx, requireTool(t, "kcat"), append(args, "-P", "-t", "scram-kcat", "-l", in)...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512") {
				t.Fatalf("kcat with librdkafka < 2.6.1: %v, want Kafka 4.x's refusal\n%s", err, out)
			}
			t.Logf("kcat's librdkafka sends the nonce twice: refused, as Kafka 4.x refuses it")
			return
		}
		kcatRoundTrip(t, ctx, "scram-kcat", args...)
	})

	t.Run("confluent-kafka (librdkafka 2.6.1+)", func(t *testing.T) {
		py := pythonWith(t, "confluent_kafka")
		cmd := exec.CommandContext(ctx, py, "-c", confluentScram, addr, f.truststore, "scram-librdkafka")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "consumed 20") {
			t.Fatalf("confluent-kafka over SASL_SSL with SCRAM-SHA-512: %v\n%s", err, out)
		}
	})

	t.Run("java with re-authentication", func(t *testing.T) {
		props := []string{"--property", "security.protocol=SASL_SSL", "--property", "sasl.mechanism=SCRAM-SHA-512",
			"--property", `sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`,
			"--property", "ssl.truststore.type=PEM", "--property", "ssl.truststore.location=" + f.truststore}
		javaReauthRoundTrip(t, ctx, sc, addr, "scram-java", props...)
	})

	good := client(addr, bob, kgo.DefaultProduceTopic("scram-after"), kgo.AllowAutoTopicCreation())
	refused := func(t *testing.T, addr string, m sasl.Mechanism) {
		t.Helper()
		mustRefuseSASL(t, ctx, "ping", kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg), kgo.SASL(m))
	}
	for _, c := range []struct {
		name string
		m    sasl.Mechanism
	}{
		{"wrong password", scram.Auth{User: "alice", Pass: "bob-secret"}.AsSha512Mechanism()},
		{"unknown user", scram.Auth{User: "mallory", Pass: "x"}.AsSha512Mechanism()},
		{"other mechanism", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()},
	} {
		t.Run(c.name, func(t *testing.T) {
			refused(t, addr, c.m)
			mustNoErr(t, "produce after the refusal", good.ProduceSync(ctx, kgo.StringRecord(c.name)).FirstErr())
		})
	}

	t.Run("restart", func(t *testing.T) {
		sc.Stop()
		sc = StartSidecar(t, dataDir, sets...)
		addr := sc.Listeners["SASL_SSL"]
		cl := client(addr, alice, kgo.ConsumeTopics("scram-kgo-512"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		got := 0
		for got < 50 {
			fs := cl.PollFetches(ctx)
			mustNoErr(t, "poll after restart", fs.Err0())
			got += fs.NumRecords()
		}
		configs(sc, "--alter", "--entity-type", "users", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-512")
		refused(t, addr, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha512Mechanism())
		mustNoErr(t, "bob after the restart", client(addr, bob).Ping(ctx))
	})
	for _, secret := range []string{"alice-secret", "bob-secret", "carol-secret"} {
		if strings.Contains(sc.Logs(), secret) {
			t.Errorf("%s in the sidecar's log", secret)
		}
	}
}

// confluentScram produces 20 records to argv[3] at argv[1] over SASL_SSL
// (CA file argv[2]) as carol with SCRAM-SHA-512, then consumes them back.
const confluentScram = `
import sys, time
from confluent_kafka import Producer, Consumer
conf = {"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_SSL", "ssl.ca.location": sys.argv[2],
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"}
topic = sys.argv[3]
errors = []
p = Producer(conf)
for i in range(20):
    p.produce(topic, b"v%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
if p.flush(60) != 0 or errors:
    sys.exit("produce failed: %s" % errors)
c = Consumer(dict(conf, **{"group.id": "scram-librdkafka", "auto.offset.reset": "earliest"}))
c.subscribe([topic])
n, deadline = 0, time.time() + 60
while n < 20 and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        print("error", m.error(), file=sys.stderr)
        continue
    n += 1
c.close()
print("consumed", n)
`

// librdkafkaScramFixed reports whether the kcat installed links
// librdkafka 2.6.1 or later, whose SCRAM client-final message carries the
// server's nonce once (librdkafka PR 4895).
func librdkafkaScramFixed(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command(requireTool(t, "kcat"), "-V").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -V: %v", err)
	}
	_, rest, ok := strings.Cut(string(out), "librdkafka ")
	if !ok {
		t.Fatalf("kcat -V names no librdkafka version: %q", out)
	}
	v, _, _ := strings.Cut(rest, " ")
	var major, minor, patch int
	if _, err := fmt.Sscanf(v, "%d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("librdkafka version %q: %v", v, err)
	}
	return major > 2 || major == 2 && (minor > 6 || minor == 6 && patch >= 1)
}
