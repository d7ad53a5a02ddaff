package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kafkajsDir returns the directory holding node_modules/kafkajs:
// $SIDECAR_NODE_MODULES, else where .ci/run installs it
// (~/.cache/diskless-sidecar/node). Missing (or node missing), the test
// skips — or fails with SIDECAR_REQUIRE_INTEGRATION=1.
func kafkajsDir(t *testing.T) string {
	t.Helper()
	requireTool(t, "node")
	dir := os.Getenv("SIDECAR_NODE_MODULES")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "diskless-sidecar", "node")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
		if os.Getenv("SIDECAR_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("kafkajs is required (SIDECAR_REQUIRE_INTEGRATION=1) but not installed in %s: %v (.ci/run installs it)", dir, err)
		}
		t.Skipf("kafkajs not installed in %s: %v", dir, err)
	}
	return dir
}

// kafkajsConsumer subscribes to argv[3] as a member of group argv[4] at
// argv[2], prints each value until argv[5] were read, commits and
// disconnects (leaving the group).
const kafkajsConsumer = `
const { Kafka, logLevel } = require("kafkajs");
const [brokers, topic, group, want] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "e2e-kafkajs", brokers: [brokers], logLevel: logLevel.WARN });
const consumer = kafka.consumer({ groupId: group, sessionTimeout: 10000, rebalanceTimeout: 10000 });
let n = 0;
const timer = setTimeout(() => { console.error("timed out after " + n); process.exit(2); }, 60000);
(async () => {
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve) => {
    consumer.run({
      autoCommitInterval: 200,
      eachMessage: async ({ message }) => {
        console.log(message.value.toString());
        if (++n >= Number(want)) resolve();
      },
    });
  });
  await consumer.disconnect(); // commits the resolved offsets
  clearTimeout(timer);
})().catch((e) => { console.error(e); process.exit(1); });
`

// TestGroupsKafkaJS: a KafkaJS consumer group member consumes a topic to
// the end, every record once, and its commits are the end offsets.
func TestGroupsKafkaJS(t *testing.T) {
	t.Parallel()
	dir := kafkajsDir(t)
	const partitions, n = 4, 1000
	ctx := testCtx(t, 3*time.Minute)
	sc := StartSidecar(t, "", groupSidecarSets...)
	topic, group := "kafkajs", "g-kafkajs"
	createTopic(t, ctx, sc, topic, partitions, nil)
	want := produceValues(t, ctx, sc, topic, partitions, 0, n)
	script := filepath.Join(t.TempDir(), "consume.js")
	if err := os.WriteFile(script, []byte(kafkajsConsumer), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", script, sc.Addr, topic, group, "1000")
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafkajs consumer: %v\n%s", err, stderr.String())
	}
	got := map[string]int{}
	for _, v := range lines(stdout.String()) {
		got[v]++
	}
	for _, v := range want {
		if got[v] != 1 {
			t.Fatalf("record %q consumed %d times by KafkaJS\nstderr: %s", v, got[v], stderr.String())
		}
	}
	adm := kadm.NewClient(sc.Client())
	if ok, why := committedAtEnd(ctx, adm, group, topic, partitions); !ok {
		t.Fatalf("KafkaJS's commits are not at the end: %s\nstderr: %s", why, stderr.String())
	}
}
