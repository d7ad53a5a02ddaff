package kafkatest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestPomVersion keeps kafkatest.Version equal to the version pom.xml pins.
func TestPomVersion(t *testing.T) {
	b, err := os.ReadFile("pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindSubmatch(b)
	if m == nil || string(m[1]) != kafkatest.Version {
		t.Fatalf("pom.xml kafka.version %q, kafkatest.Version %q", m, kafkatest.Version)
	}
}

// TestToolMainClasses finds every tool's main class in the resolved jars,
// so that a Kafka upgrade that moves one fails here rather than in the test
// that runs it.
func TestToolMainClasses(t *testing.T) {
	kafkatest.Require(t)
	cp := kafkatest.Classpath(t)
	classes := map[string]bool{}
	for _, jar := range strings.Split(cp, ":") {
		zr, err := zip.OpenReader(jar)
		if err != nil {
			t.Fatalf("%s: %v", jar, err)
		}
		for _, f := range zr.File {
			if strings.HasSuffix(f.Name, ".class") {
				classes[strings.ReplaceAll(strings.TrimSuffix(f.Name, ".class"), "/", ".")] = true
			}
		}
		zr.Close()
	}
	for _, name := range kafkatest.ToolNames() {
		if main := kafkatest.ToolMainClass(name); !classes[main] {
			t.Errorf("%s: main class %s is in no jar of the classpath", name, main)
		}
	}
	if !classes["kafka.Kafka"] {
		t.Error("kafka.Kafka is in no jar of the classpath")
	}
	if _, _, err := kafkatest.Tool(t.Context(), "kafka-no-such-tool"); err == nil {
		t.Error("an unknown tool ran")
	}
}

// TestSingleBroker: one combined node; kafka-topics creates a topic, kgo
// writes records that kgo and the Java Consume program read back identically,
// the Java Produce program writes records that kgo reads, a Java group
// consumer's committed offsets show in kafka-consumer-groups, and the other
// tools later tests point at a sidecar run once each.
func TestSingleBroker(t *testing.T) {
	start := time.Now()
	// The authorizer, for kafka-acls; with no ACL on a resource, everyone
	// may use it.
	c := kafkatest.Start(t, kafkatest.Options{BrokerConfig: map[string]string{
		"authorizer.class.name":          "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"allow.everyone.if.no.acl.found": "true",
	}})
	t.Logf("1 combined node serving after %v", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	bs := c.BootstrapServers()
	if bs != c.Addr(1) || !strings.HasPrefix(bs, "127.0.0.1:") {
		t.Fatalf("bootstrap %q, broker 1 at %q", bs, c.Addr(1))
	}
	if len(c.ClusterID()) != 22 {
		t.Fatalf("cluster id %q", c.ClusterID())
	}

	if _, _, err := kafkatest.Tool(ctx, "kafka-topics", "--bootstrap-server", bs, "--create",
		"--topic", "t", "--partitions", "3", "--replication-factor", "1"); err != nil {
		t.Fatal(err)
	}
	out, _, err := kafkatest.Tool(ctx, "kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "t")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "PartitionCount: 3") {
		t.Fatalf("kafka-topics --describe:\n%s", out)
	}

	// kgo writes 300 records with keys, headers and a null value.
	cl := c.Client(t, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var want []*kgo.Record
	for i := range 300 {
		r := &kgo.Record{
			Partition: int32(i % 3),
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, "value %d \x00\xff", i),
			Headers:   []kgo.RecordHeader{{Key: "h\"1", Value: []byte{byte(i)}}},
		}
		if i == 7 {
			r.Value = nil
		}
		want = append(want, r)
	}
	if err := cl.ProduceSync(ctx, want...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	byPos := map[string]*kgo.Record{}
	for _, r := range want {
		byPos[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r
	}

	// The Java client reads them back, byte for byte.
	out, stderr, err := kafkatest.Java(ctx, "Consume", "--bootstrap-server", bs, "--topic", "t",
		"--max-records", "300", "--idle-timeout-ms", "20000")
	if err != nil {
		t.Fatal(err)
	}
	got, err := kafkatest.ParseRecords(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 300 {
		t.Fatalf("Java read %d records, want 300; stderr:\n%s", len(got), stderr)
	}
	for _, g := range got {
		w := byPos[fmt.Sprintf("%d/%d", g.Partition, g.Offset)]
		switch {
		case w == nil:
			t.Fatalf("Java read %d/%d, which kgo did not write", g.Partition, g.Offset)
		case g.Topic != "t" || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) || (g.Value == nil) != (w.Value == nil):
			t.Fatalf("Java read %+v, kgo wrote key %q value %q", g, w.Key, w.Value)
		case len(g.Headers) != 1 || g.Headers[0].Key != "h\"1" || !bytes.Equal(g.Headers[0].Value, w.Headers[0].Value):
			t.Fatalf("Java read headers %+v, kgo wrote %+v", g.Headers, w.Headers)
		case g.Timestamp != w.Timestamp.UnixMilli() || g.TimestampType != "CreateTime":
			t.Fatalf("Java read timestamp %d %s, kgo wrote %d", g.Timestamp, g.TimestampType, w.Timestamp.UnixMilli())
		}
		delete(byPos, fmt.Sprintf("%d/%d", g.Partition, g.Offset))
	}

	// The Java producer writes lines that kgo reads.
	cmd, err := kafkatest.JavaCommand(ctx, "Produce", "--bootstrap-server", bs, "--topic", "j",
		"--key-separator", "=", "--property", "linger.ms=5")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = strings.NewReader("a=1\nb=2\nc=3\n")
	var pout, perr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &pout, &perr
	if err := cmd.Run(); err != nil {
		t.Fatalf("Produce: %v\n%s", err, perr.String())
	}
	if n := strings.Count(pout.String(), `"offset":`); n != 3 {
		t.Fatalf("Produce acknowledged %d records:\n%s\n%s", n, pout.String(), perr.String())
	}
	rd := c.Client(t, kgo.ConsumeTopics("j"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var read []string
	for len(read) < 3 {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := rd.PollFetches(fctx)
		timedOut := fctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("kgo read %v of the Java producer's records", read)
		}
		fs.EachRecord(func(r *kgo.Record) { read = append(read, string(r.Key)+"="+string(r.Value)) })
	}
	if strings.Join(read, " ") != "a=1 b=2 c=3" {
		t.Fatalf("kgo read %v", read)
	}

	// A Java group consumer commits what it read; kafka-consumer-groups
	// shows the group with no lag.
	if _, stderr, err := kafkatest.Java(ctx, "Consume", "--bootstrap-server", bs, "--topic", "t",
		"--group", "g", "--max-records", "300", "--idle-timeout-ms", "20000"); err != nil || !strings.Contains(stderr, "consumed 300 records") {
		t.Fatalf("group consume: %v\n%s", err, stderr)
	}
	out, _, err = kafkatest.Tool(ctx, "kafka-consumer-groups", "--bootstrap-server", bs, "--describe", "--group", "g")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[0] == "g" && f[1] == "t" {
			lines++
			if f[3] != f[4] || f[5] != "0" {
				t.Errorf("group g partition %s: committed %s, end %s, lag %s", f[2], f[3], f[4], f[5])
			}
		}
	}
	if lines != 3 {
		t.Fatalf("kafka-consumer-groups --describe:\n%s", out)
	}

	// The other tools the later tests point at a sidecar, each once: the
	// independent ones at the same time, then kafka-acls adds an ACL and
	// lists it.
	type toolRun struct {
		tool string
		args []string
		want string // in stdout
	}
	runTool := func(tc toolRun) {
		out, _, err := kafkatest.Tool(ctx, tc.tool, append([]string{"--bootstrap-server", bs}, tc.args...)...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %v, stdout:\n%s", tc.tool, err, out)
		}
	}
	var tools sync.WaitGroup
	for _, tc := range []toolRun{
		{"kafka-configs", []string{"--describe", "--entity-type", "topics", "--entity-name", "t"}, "Dynamic configs for topic t"},
		{"kafka-log-dirs", []string{"--describe", "--topic-list", "t"}, `"partition":"t-0"`},
		{"kafka-producer-perf-test", []string{"--topic", "perf", "--num-records", "2000", "--record-size", "100",
			"--throughput", "-1"}, "2000 records sent"},
		{"kafka-transactions", []string{"list"}, "TransactionalId"},
	} {
		tools.Go(func() { runTool(tc) })
	}
	runTool(toolRun{"kafka-acls", []string{"--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "acl-topic"}, "User:alice"})
	runTool(toolRun{"kafka-acls", []string{"--list", "--topic", "acl-topic"}, "principal=User:alice"})
	tools.Wait()
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// TestLeaderKill: three combined nodes, a topic with replication factor 3
// and min.insync.replicas 2. While an idempotent kgo producer writes with
// acks=all, the partition's leader is SIGKILLed: a new leader takes over and
// acknowledgements go on; the old leader, restarted, rejoins the ISR; every
// acknowledged record is read back once, in order.
func TestLeaderKill(t *testing.T) {
	start := time.Now()
	c := kafkatest.Start(t, kafkatest.Options{Brokers: 3, NodeConfig: map[int32]map[string]string{
		1: {"broker.rack": "a"}, 2: {"broker.rack": "b"}, 3: {"broker.rack": "c"}}})
	t.Logf("3 combined nodes serving after %v", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	if got := fmt.Sprint(c.Brokers(), c.Controllers()); got != "[1 2 3] [1 2 3]" {
		t.Fatalf("brokers, controllers %s", got)
	}
	adm := c.Admin(t)
	bm, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bm.Brokers {
		if b.Rack == nil || *b.Rack != string(rune('a'+b.NodeID-1)) || fmt.Sprintf("%s:%d", b.Host, b.Port) != c.Addr(b.NodeID) {
			t.Fatalf("broker %d at %s:%d rack %v; Addr %s", b.NodeID, b.Host, b.Port, b.Rack, c.Addr(b.NodeID))
		}
	}
	resp, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "r3")
	if err != nil || resp.Err != nil {
		t.Fatal(err, resp.Err)
	}
	// A new partition's leader and ISR reach the brokers' metadata a moment
	// after CreateTopics answers: wait for them rather than read once.
	var (
		leader int32
		isr    []int32
	)
	waitFor(t, 30*time.Second, "the new partition's leader and a full ISR", func() bool {
		leader, isr = partitionState(t, adm, "r3")
		return leader >= 0 && len(isr) == 3
	})

	cl := c.Client(t, kgo.DefaultProduceTopic("r3"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), kgo.RecordRetries(1000), kgo.RecordDeliveryTimeout(2*time.Minute))
	var (
		mu    sync.Mutex
		acked []int64 // the sequence numbers of acknowledged records, in ack order
		errs  []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{Value: []byte(strconv.FormatInt(i, 10))}
			err := cl.ProduceSync(ctx, r).FirstErr()
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				acked = append(acked, i)
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	ackedNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	waitFor(t, 30*time.Second, "acknowledgements before the kill", func() bool { return ackedNow() >= 50 })

	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	before := ackedNow()
	var newLeader int32
	waitFor(t, 60*time.Second, "a new leader", func() bool {
		l, isr := partitionState(t, adm, "r3")
		newLeader = l
		return l >= 0 && l != leader && len(isr) == 2
	})
	waitFor(t, 60*time.Second, "acknowledgements after the kill", func() bool { return ackedNow() >= before+50 })
	t.Logf("leader %d killed; leader %d took over; 50 more acknowledged %v after the kill",
		leader, newLeader, time.Since(killed).Round(time.Millisecond))

	restarted := time.Now()
	if err := c.Restart(leader); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d serving %v after Restart", leader, time.Since(restarted).Round(time.Millisecond))
	waitFor(t, 60*time.Second, "the restarted node in the ISR", func() bool {
		_, isr := partitionState(t, adm, "r3")
		return len(isr) == 3
	})
	t.Logf("node %d back in the ISR %v after Restart", leader, time.Since(restarted).Round(time.Millisecond))
	after := ackedNow()
	waitFor(t, 30*time.Second, "acknowledgements after the restart", func() bool { return ackedNow() >= after+20 })
	close(stop)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d produce errors, first %v", len(errs), errs[0])
	}

	// Every acknowledged record is in the log once, in the order sent.
	rd := c.Client(t, kgo.ConsumeTopics("r3"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var read []int64
	for len(read) < len(acked) {
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs := rd.PollFetches(fctx)
		timedOut := fctx.Err() != nil
		cancel()
		if timedOut {
			t.Fatalf("read %d of %d acknowledged records", len(read), len(acked))
		}
		fs.EachRecord(func(r *kgo.Record) {
			n, _ := strconv.ParseInt(string(r.Value), 10, 64)
			read = append(read, n)
		})
	}
	if fmt.Sprint(read) != fmt.Sprint(acked) {
		t.Fatalf("read %d records, acknowledged %d, or in another order", len(read), len(acked))
	}
	t.Logf("%d records acknowledged and read back; whole test %v", len(acked), time.Since(start).Round(time.Millisecond))
}

// TestSeparateController: one broker and one controller-only node; the
// broker is killed and restarted and keeps its data, the controller is
// restarted and the broker still serves metadata changes.
func TestSeparateController(t *testing.T) {
	start := time.Now()
	c := kafkatest.Start(t, kafkatest.Options{Brokers: 1, SeparateControllers: true,
		BrokerConfig: map[string]string{"num.partitions": "2"}})
	t.Logf("1 broker and 1 controller serving after %v", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()
	if got := fmt.Sprint(c.Brokers(), c.Controllers()); got != "[1] [3001]" {
		t.Fatalf("brokers, controllers %s", got)
	}
	if c.Addr(3001) != "" || c.ControllerAddr(3001) == "" {
		t.Fatalf("controller 3001: Addr %q, ControllerAddr %q", c.Addr(3001), c.ControllerAddr(3001))
	}
	cl := c.Client(t, kgo.DefaultProduceTopic("auto"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	out, _, err := kafkatest.Tool(ctx, "kafka-topics", "--bootstrap-server", c.BootstrapServers(), "--describe", "--topic", "auto")
	if err != nil || !strings.Contains(out, "PartitionCount: 2") {
		t.Fatalf("auto-created topic (num.partitions=2 from BrokerConfig):\n%s %v", out, err)
	}

	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	if c.Running(1) || c.Kill(1) == nil {
		t.Fatal("node 1 runs after Kill")
	}
	restarted := time.Now()
	if err := c.Restart(1); err != nil {
		t.Fatal(err)
	}
	t.Logf("broker serving %v after Restart", time.Since(restarted).Round(time.Millisecond))
	if err := c.Restart(3001); err != nil {
		t.Fatal(err)
	}
	adm := c.Admin(t)
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "after"); err != nil || resp.Err != nil {
		t.Fatal(err, resp.Err)
	}
	ends, err := adm.ListEndOffsets(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != 1 {
		t.Fatalf("topic auto has %d records after the restarts, want 1", total)
	}
}

// partitionState returns partition 0's leader and ISR.
func partitionState(t *testing.T, adm *kadm.Client, topic string) (int32, []int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return -1, nil
	}
	p, ok := td[topic].Partitions[0]
	if !ok || p.Err != nil {
		return -1, nil
	}
	return p.Leader, p.ISR
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
