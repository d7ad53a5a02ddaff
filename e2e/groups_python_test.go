package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// pythonWith returns a Python interpreter that imports module: $SIDECAR_PYTHON,
// else the virtualenv .ci/run installs the Python clients into
// (~/.cache/diskless-sidecar/pyvenv). Missing, the test skips — or fails
// with SIDECAR_REQUIRE_INTEGRATION=1.
func pythonWith(t *testing.T, module string) string {
	t.Helper()
	py := os.Getenv("SIDECAR_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "diskless-sidecar", "pyvenv", "bin", "python")
	}
	if err := exec.Command(py, "-c", "import "+module).Run(); err != nil {
		if os.Getenv("SIDECAR_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("python module %s is required (SIDECAR_REQUIRE_INTEGRATION=1) but %s cannot import it: %v (.ci/run installs it)", module, py, err)
		}
		t.Skipf("python module %s not installed in %s: %v", module, py, err)
	}
	return py
}

// pythonConsumers are group consumers in the two Python clients: each
// subscribes to argv[2] as a member of group argv[3] at argv[1], prints
// every record's value on a line until argv[4] records were read (or 60 s
// passed), commits synchronously and closes (leaving the group).
var pythonConsumers = map[string]struct{ module, script string }{
	"confluent-kafka": {"confluent_kafka", `
import sys, time
from confluent_kafka import Consumer
brokers, topic, group, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": brokers, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
c.subscribe([topic])
n, deadline = 0, time.time() + 60
while n < want and time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        print("error", m.error(), file=sys.stderr)
        continue
    print(m.value().decode())
    n += 1
c.commit(asynchronous=False)
c.close()
`},
	"kafka-python": {"kafka", `
import sys, time
from kafka import KafkaConsumer
brokers, topic, group, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = KafkaConsumer(topic, bootstrap_servers=brokers, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False)
n, deadline = 0, time.time() + 60
while n < want and time.time() < deadline:
    for tp, msgs in c.poll(timeout_ms=500).items():
        for m in msgs:
            print(m.value.decode())
            n += 1
c.commit()
c.close()
`},
}

// TestGroupsPython: confluent-kafka-python and kafka-python subscribe as
// group members, consume every record once and commit; the commits are
// the end offsets.
func TestGroupsPython(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"confluent-kafka", "kafka-python"} {
		t.Run(name, func(t *testing.T) {
			pc := pythonConsumers[name]
			py := pythonWith(t, pc.module)
			const partitions, n = 4, 1000
			ctx := testCtx(t, 3*time.Minute)
			sc := StartSidecar(t, "", groupSidecarSets...)
			topic, group := "py-"+name, "gp-"+name
			createTopic(t, ctx, sc, topic, partitions, nil)
			want := produceValues(t, ctx, sc, topic, partitions, 0, n)
			script := filepath.Join(t.TempDir(), "consume.py")
			if err := os.WriteFile(script, []byte(pc.script), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(ctx, py, script, sc.Addr, topic, group, "1000")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s consumer: %v\n%s", name, err, stderr.String())
			}
			got := map[string]int{}
			for _, v := range lines(stdout.String()) {
				got[v]++
			}
			for _, v := range want {
				if got[v] != 1 {
					t.Fatalf("%s: record %q consumed %d times; %d lines\nstderr: %s", name, v, got[v], len(lines(stdout.String())), stderr.String())
				}
			}
			adm := kadm.NewClient(sc.Client())
			if ok, why := committedAtEnd(ctx, adm, group, topic, partitions); !ok {
				t.Fatalf("%s: commits not at the end: %s\nstderr: %s", name, why, strings.TrimSpace(stderr.String()))
			}
		})
	}
}
