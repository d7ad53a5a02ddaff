package kafkalog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one test's Kafka cluster and what its topics share.
type env struct {
	c      *kafkatest.Cluster
	topics atomic.Int64
}

// discard returns the tests' logger: nothing, or everything (the Kafka
// clients' debug log included) into $KAFKALOG_TEST_LOG.
func discard() *slog.Logger {
	if p := os.Getenv("KAFKALOG_TEST_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// topic opens a fresh metadata topic of partitions partitions.
func (e *env) topic(t *testing.T, partitions int32, mod ...func(*Config)) (*Topic, *objstoretest.Memory) {
	t.Helper()
	objs := objstoretest.NewMemory()
	cfg := Config{
		Brokers:        strings.Split(e.c.BootstrapServers(), ","),
		Topic:          fmt.Sprintf("meta-%d", e.topics.Add(1)),
		Partitions:     partitions,
		Snapshots:      objs,
		Logger:         discard(),
		RequestTimeout: 20 * time.Second,
	}
	for _, m := range mod {
		m(&cfg)
	}
	tp, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(tp.Close)
	return tp, objs
}

// store is metalogtest's Store over one metadata topic.
type store struct {
	e *env
	t *Topic
}

func (s *store) Open(shard int32) (metalog.Log, error) { return s.t.OpenLog(shard) }

func (s *store) Follow(shard int32) (metalog.Follower, error) { return s.t.Follow(shard) }

// Tear leaves shard's partition as a writer that died in the middle of an
// Append (or a PrepareSnapshot) would, under the epoch of the last claim:
// variant 0, the next record whole and the first of the next one's two
// parts, and no group end; 1, a late second part of a record whose first
// never landed (breaking the run); 2, a pointer of a snapshot that was
// prepared but never stored; 3, a record of a writer fenced long ago. The
// next owner's claim ends the run: none of it ever counts as a record,
// and the indexes after it stay dense.
func (s *store) Tear(t *testing.T, shard int32, variant int) bool {
	if variant > 3 {
		return false
	}
	ctx := context.Background()
	l, err := s.t.openLog(shard)
	if err != nil {
		t.Fatal(err)
	}
	next, err := l.Replay(ctx, 0, func(int64, []byte) error { return nil })
	epoch := l.st.epoch
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	rec := func(k recordKey, v []byte) *kgo.Record {
		return &kgo.Record{Partition: shard, Key: k.appendTo(nil), Value: v}
	}
	var recs []*kgo.Record
	switch variant {
	case 0:
		recs = append(recs,
			rec(recordKey{kind: kindRecord, epoch: epoch, index: next, parts: 1}, []byte("torn-a")),
			rec(recordKey{kind: kindRecord, epoch: epoch, index: next + 1, part: 0, parts: 2}, []byte("torn-b0")))
	case 1:
		recs = append(recs, rec(recordKey{kind: kindRecord, epoch: epoch, index: next, part: 1, parts: 2, flags: flagGroupEnd}, []byte("late")))
	case 2:
		recs = append(recs, rec(recordKey{kind: kindSnapshot, epoch: epoch, index: next, parts: 1},
			pointer{key: "snapshots/never-written"}.appendValue(nil)))
	case 3:
		recs = append(recs, rec(recordKey{kind: kindRecord, epoch: max(0, epoch-1), index: next, parts: 1, flags: flagGroupEnd}, []byte("zombie")))
	}
	produceRaw(t, s.t, recs...)
	return true
}

// TestKafkaLog runs every test of the Kafka backend against one 3-broker
// Apache Kafka cluster (internal/kafkatest).
func TestKafkaLog(t *testing.T) {
	e := &env{c: kafkatest.Start(t, kafkatest.Options{Brokers: 3, StartTimeout: 6 * time.Minute})}

	t.Run("Conformance", func(t *testing.T) {
		metalogtest.Run(t, metalogtest.Backend{
			New: func(t *testing.T) metalogtest.Store {
				tp, _ := e.topic(t, 2)
				return &store{e: e, t: tp}
			},
			Fences: true,
		})
	})
	t.Run("TopicCreated", func(t *testing.T) { testTopicCreated(t, e) })
	t.Run("TopicRefused", func(t *testing.T) { testTopicRefused(t, e) })
	t.Run("TakeoverInFlight", func(t *testing.T) { testTakeoverInFlight(t, e) })
	t.Run("FencedWriterInterleaved", func(t *testing.T) { testFencedWriterInterleaved(t, e) })
	t.Run("FollowerConformance", func(t *testing.T) {
		metalogtest.RunFollower(t, func(t *testing.T) metalogtest.FollowStore {
			tp, _ := e.topic(t, 1)
			return &store{e: e, t: tp}
		})
	})
	t.Run("FollowerSkipsFencedWriter", func(t *testing.T) { testFollowerSkipsFencedWriter(t, e) })
	t.Run("FollowerWaitFails", func(t *testing.T) { testFollowerWaitFails(t, e) })
	t.Run("FencedTruncate", func(t *testing.T) { testFencedTruncate(t, e) })
	t.Run("LateClaims", func(t *testing.T) { testLateClaims(t, e) })
	t.Run("TruncatedUnderStart", func(t *testing.T) { testTruncatedUnderStart(t, e) })
	t.Run("ReadAhead", func(t *testing.T) { testReadAhead(t, e) })
	t.Run("AppendBounded", func(t *testing.T) { testAppendBounded(t, e) })
	t.Run("CheckContiguity", func(t *testing.T) { testCheckContiguity(t, e) })
	t.Run("FailedAppendSettled", func(t *testing.T) { testFailedAppendSettled(t, e) })
	t.Run("IndexesAcrossClaims", func(t *testing.T) { testIndexesAcrossClaims(t, e) })
	t.Run("SnapshotDamaged", func(t *testing.T) { testSnapshotDamaged(t, e) })
	t.Run("SnapshotTakeover", func(t *testing.T) { testSnapshotTakeover(t, e) })
	t.Run("LostProduceAnswer", func(t *testing.T) { testLostProduceAnswer(t, e) })
	// Last: it kills and restarts brokers.
	t.Run("BrokerKilledMidAppend", func(t *testing.T) { testBrokerKilled(t, e) })
}

func replayAll(t *testing.T, l metalog.Log, from int64) ([]string, int64) {
	t.Helper()
	var got []string
	next, err := l.Replay(context.Background(), from, func(i int64, b []byte) error {
		if want := from + int64(len(got)); i != want {
			return fmt.Errorf("index %d, want %d", i, want)
		}
		got = append(got, string(b))
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return got, next
}

func group(prefix string, n int) [][]byte {
	var g [][]byte
	for i := range n {
		g = append(g, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	return g
}

func strs(gs ...[][]byte) []string {
	var out []string
	for _, g := range gs {
		for _, b := range g {
			out = append(out, string(b))
		}
	}
	return out
}

func mustAppend(t *testing.T, l metalog.Log, g [][]byte) {
	t.Helper()
	if err := l.Append(context.Background(), g); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// testTopicCreated: the topic is created with the partitions, replication
// factor and configs the backend promises.
func testTopicCreated(t *testing.T, e *env) {
	tp, _ := e.topic(t, 3)
	adm := kadm.NewClient(tp.cl)
	ctx := context.Background()
	// Open saw every partition with a leader on one broker; the broker
	// this request goes to may learn of the new topic a moment later.
	var td kmsg.MetadataResponseTopic
	for deadline := time.Now().Add(30 * time.Second); ; {
		md, err := tp.metadata(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if td = md.Topics[0]; td.ErrorCode == 0 && len(td.Partitions) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(td.Partitions) != 3 {
		t.Fatalf("%d partitions, want 3", len(td.Partitions))
	}
	for _, p := range td.Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("partition %d has %d replicas, want 3", p.Partition, len(p.Replicas))
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, tp.Name())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "false",
		"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "delete"}
	for _, c := range rcs[0].Configs {
		if w, ok := want[c.Key]; ok {
			if c.Value == nil || *c.Value != w {
				t.Errorf("%s = %v, want %s", c.Key, c.Value, w)
			}
			delete(want, c.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("configs not described: %v", want)
	}
	if tp.ClusterID() != e.c.ClusterID() {
		t.Errorf("cluster id %q, want the Kafka cluster's %q", tp.ClusterID(), e.c.ClusterID())
	}
	// Opening again finds it as it is.
	cfg := tp.cfg
	again, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
}

// testTopicRefused: an existing topic that does not fit refuses start-up
// naming the key to change.
func testTopicRefused(t *testing.T, e *env) {
	tp, _ := e.topic(t, 2)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		set  map[string]string
		key  string
	}{
		{"partition count", func(c *Config) { c.Partitions = 3 }, nil, "diskless.metadata.topic.num.partitions"},
		{"time retention", nil, map[string]string{"retention.ms": "604800000"}, "diskless.metadata.topic"},
		{"size retention", nil, map[string]string{"retention.bytes": "1000000"}, "diskless.metadata.topic"},
		{"compaction", nil, map[string]string{"cleanup.policy": "compact"}, "diskless.metadata.topic"},
		{"unclean election", nil, map[string]string{"unclean.leader.election.enable": "true"}, "diskless.metadata.topic"},
		{"too many replicas", func(c *Config) { c.Topic = "meta-rf"; c.ReplicationFactor = 4 }, nil, "diskless.metadata.topic.replication.factor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adm := kadm.NewClient(tp.cl)
			if tc.set != nil {
				var alter []kadm.AlterConfig
				for k, v := range tc.set {
					alter = append(alter, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
				}
				if _, err := adm.AlterTopicConfigs(ctx, alter, tp.Name()); err != nil {
					t.Fatal(err)
				}
				defer func() {
					var undo []kadm.AlterConfig
					for k := range tc.set {
						undo = append(undo, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
					}
					if _, err := adm.AlterTopicConfigs(ctx, undo, tp.Name()); err != nil {
						t.Fatal(err)
					}
				}()
			}
			cfg := tp.cfg
			if tc.mod != nil {
				tc.mod(&cfg)
			}
			var got *Topic
			var err error
			// An altered config reaches every broker within moments.
			for range 50 {
				if got, err = Open(ctx, cfg); err != nil {
					break
				}
				got.Close()
				time.Sleep(100 * time.Millisecond)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tc.key {
				t.Fatalf("Open: %v, want a ConfigError naming %s", err, tc.key)
			}
		})
	}
}

// testTakeoverInFlight: another writer takes the shard over while a
// writer's group is being appended. If the takeover's claim lands after
// the group (taken between its produce and its check), the Append
// succeeds and the new owner has the group; if it lands before (taken
// before the produce), the Append fails with ErrFenced and the group
// never counts, for the new owner or anyone later.
func testTakeoverInFlight(t *testing.T, e *env) {
	for _, when := range []string{"after the produce", "before the produce"} {
		t.Run(when, func(t *testing.T) {
			tp, _ := e.topic(t, 1)
			ctx := context.Background()
			old := openShard(t, tp)
			replayAll(t, old, 0)
			g1, g2 := group("g1", 3), group("in-flight", 2)
			mustAppend(t, old, g1)

			var (
				cur    metalog.Log
				curGot []string
				err    error
			)
			takeOver := func() {
				old.beforeCheck, old.beforeProduce = nil, nil
				if cur, err = tp.OpenLog(0); err != nil {
					t.Error(err)
					return
				}
				curGot, _ = replayAll(t, cur, 0)
			}
			want := strs(g1)
			if when == "after the produce" {
				old.beforeCheck = takeOver
				want = strs(g1, g2)
			} else {
				old.beforeProduce = takeOver
			}
			err = old.Append(ctx, g2)
			if cur == nil {
				t.FailNow()
			}
			defer cur.Close()
			switch {
			case when == "after the produce" && err != nil:
				t.Fatalf("an Append whose group landed before the takeover's claim: %v, want nil", err)
			case when == "before the produce" && !errors.Is(err, metalog.ErrFenced):
				t.Fatalf("an Append whose group landed after the takeover's claim: %v, want ErrFenced", err)
			}
			if fmt.Sprint(curGot) != fmt.Sprint(want) {
				t.Fatalf("the new owner replays %v, want %v", curGot, want)
			}
			g3 := group("g3", 2)
			mustAppend(t, cur, g3)
			if _, err := old.Replay(ctx, 0, func(int64, []byte) error { return nil }); !errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("the fenced writer's Replay: %v, want ErrFenced", err)
			}
			if err := old.Append(ctx, group("late", 1)); !errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("the fenced writer's Append: %v, want ErrFenced", err)
			}
			later := openShard(t, tp)
			want = append(want, strs(g3)...)
			if got, next := replayAll(t, later, 0); fmt.Sprint(got) != fmt.Sprint(want) || next != int64(len(want)) {
				t.Fatalf("a later owner replays %v (next %d), want %v", got, next, want)
			}
		})
	}
}

// testFencedWriterInterleaved: a fenced writer's records land between the
// new owner's position and its next group (the new owner's produce does
// not get the offsets it expects): the new owner reads them, finds they do
// not count, and its Append succeeds; the fenced writer's Append fails with
// ErrFenced; replays skip its records.
func testFencedWriterInterleaved(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	old := openShard(t, tp)
	replayAll(t, old, 0)
	g1 := group("g1", 2)
	mustAppend(t, old, g1)
	cur := openShard(t, tp)
	replayAll(t, cur, 0)
	var oldErr error
	pos := cur.pos
	cur.beforeProduce = func() {
		cur.beforeProduce = nil
		oldErr = old.Append(ctx, group("zombie", 3))
	}
	g2 := group("g2", 2)
	mustAppend(t, cur, g2)
	if !errors.Is(oldErr, metalog.ErrFenced) {
		t.Fatalf("the fenced writer's Append: %v, want ErrFenced", oldErr)
	}
	if got := cur.pos - pos; got != 3+2 {
		t.Fatalf("the new owner's position moved by %d offsets, want 5 (the fenced writer's 3 records, its own 2)", got)
	}
	mustAppend(t, cur, group("g3", 1))
	later := openShard(t, tp)
	want := strs(g1, g2, group("g3", 1))
	if got, _ := replayAll(t, later, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a later owner replays %v, want %v", got, want)
	}
}

// testFollowerWaitFails: a follower whose Wait cannot reach the
// partition (every connection refused) returns the failure once it has
// lasted waitFailAfter, not only when its ctx ends; once the partition
// answers again the next Wait returns at once, though no record came,
// and the follower goes on. Before, Wait retried for ever and reported
// nothing: a sidecar cut off from Kafka showed its replicas serving.
func testFollowerWaitFails(t *testing.T, e *env) {
	var refuse atomic.Bool
	tp, _ := e.topic(t, 1, func(c *Config) {
		c.ClientOpts = []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if refuse.Load() {
				return nil, errors.New("test: connection refused")
			}
			return (&net.Dialer{}).DialContext(ctx, network, host)
		}), kgo.RetryTimeout(2 * time.Second)}
	})
	ctx := context.Background()
	w := openShard(t, tp)
	replayAll(t, w, 0)
	mustAppend(t, w, group("g1", 2))
	fl, err := tp.Follow(0)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	next, err := fl.Replay(ctx, 0, func(int64, []byte) error { return nil })
	if err != nil || next != 2 {
		t.Fatalf("follower Replay: next %d, %v", next, err)
	}
	// The follower's own client has not connected yet (Wait's first
	// fetch dials): refused from here.
	refuse.Store(true)
	wctx, cancel := context.WithTimeout(ctx, 4*waitFailAfter)
	err = fl.Wait(wctx, next)
	expired := wctx.Err()
	cancel()
	if err == nil || expired != nil {
		t.Fatalf("Wait with every connection refused: %v, want the failure before its ctx ended (%v)", err, 4*waitFailAfter)
	}
	refuse.Store(false)
	wctx, cancel = context.WithTimeout(ctx, 4*waitFailAfter)
	err = fl.Wait(wctx, next)
	cancel()
	if err != nil {
		t.Fatalf("Wait after the failure, the partition readable again: %v, want nil (at once, nothing new)", err)
	}
	mustAppend(t, w, group("g2", 1))
	wctx, cancel = context.WithTimeout(ctx, 4*waitFailAfter)
	defer cancel()
	var got int
	for got == 0 {
		if err := fl.Wait(wctx, next); err != nil {
			t.Fatalf("Wait for g2: %v", err)
		}
		if next, err = fl.Replay(ctx, next, func(int64, []byte) error { got++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if got != 1 || next != 3 {
		t.Fatalf("follower read %d records after the failure (next %d), want g2's 1", got, next)
	}
}

// testFollowerSkipsFencedWriter: a follower reading while a takeover
// happens delivers exactly what a later owner replays — the fenced
// writer's records among the new owner's never — and its Wait wakes for
// the new owner's appends; following fences no one.
func testFollowerSkipsFencedWriter(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	old := openShard(t, tp)
	replayAll(t, old, 0)
	mustAppend(t, old, group("g1", 2))
	fl, err := tp.Follow(0)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	var got []string
	var next int64
	follow := func() {
		t.Helper()
		n, err := fl.Replay(ctx, next, func(i int64, b []byte) error {
			if i < next {
				return fmt.Errorf("index %d below %d", i, next)
			}
			got = append(got, string(b))
			return nil
		})
		if err != nil {
			t.Fatalf("follower Replay from %d: %v", next, err)
		}
		next = n
	}
	follow()
	if len(got) != 2 || next != 2 {
		t.Fatalf("follower read %v, next %d", got, next)
	}
	cur := openShard(t, tp)
	replayAll(t, cur, 0)
	if err := old.Append(ctx, group("zombie", 3)); !errors.Is(err, metalog.ErrFenced) {
		t.Fatalf("the fenced writer's Append: %v", err)
	}
	woke := make(chan error, 1)
	go func() { woke <- fl.Wait(ctx, next) }()
	mustAppend(t, cur, group("g2", 2))
	if err := <-woke; err != nil {
		t.Fatalf("Wait across the new owner's Append: %v", err)
	}
	for next < 4 {
		follow()
		if next < 4 {
			if err := fl.Wait(ctx, next); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := strs(group("g1", 2), group("g2", 2))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("follower delivered %v, want %v", got, want)
	}
	// The follower fenced nobody: the owner appends on.
	mustAppend(t, cur, group("g3", 1))
}

// testFencedTruncate: a writer fenced while it writes a snapshot (its
// pointer counted before the takeover) stores the object but does not
// move the log start: TruncateBefore finds the new owner's claim first and
// fails with ErrFenced.
func testFencedTruncate(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	old := openShard(t, tp)
	replayAll(t, old, 0)
	mustAppend(t, old, group("g1", 4))
	if err := old.PrepareSnapshot(ctx, 4); err != nil {
		t.Fatal(err)
	}
	cur := openShard(t, tp)
	replayAll(t, cur, 0)
	if err := old.WriteSnapshot(ctx, 4, []byte("s4")); err != nil {
		t.Fatalf("storing the object of a pointer that counted: %v", err)
	}
	if err := old.TruncateBefore(ctx, 4); !errors.Is(err, metalog.ErrFenced) {
		t.Fatalf("the fenced writer's TruncateBefore: %v, want ErrFenced", err)
	}
	if ls, err := tp.listOffset(ctx, 0, -2); err != nil || ls != 0 {
		t.Fatalf("log start offset %d (%v), want 0", ls, err)
	}
	if idx, p, err := cur.ReadSnapshot(ctx); err != nil || idx != 4 || string(p) != "s4" {
		t.Fatalf("the new owner's ReadSnapshot = %d, %q, %v; want the fenced writer's snapshot at 4", idx, p, err)
	}
}

// testLateClaims: claims that land after the writer's own, naming the
// epoch that was in force when they were made but is no longer — the
// writer's own first claim, whose produce failed and was retried (a copy
// of it lands late), and the claim of a process that read the partition
// before the writer's claim and died with it in flight — are not
// effective: the writer is neither fenced nor held up, its Appends
// succeed, and a later owner replays them all. (When a takeover was
// effective wherever it landed, the first made the writer's next Append
// fail until it replayed, and the second fenced it for good.)
func testLateClaims(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	dead := openShard(t, tp) // read the empty partition, claimed, died
	l := openShard(t, tp)
	replayAll(t, l, 0)
	g1, g2, g3 := group("g1", 2), group("g2", 1), group("g3", 3)
	mustAppend(t, l, g1)
	for i, late := range []*kgo.Record{l.claimRecord(noEpoch), dead.claimRecord(noEpoch)} {
		produceRaw(t, tp, late)
		if err := l.Append(ctx, [][][]byte{g2, g3}[i]); err != nil {
			t.Fatalf("an Append after a late claim (%s): %v, want nil", []string{"the writer's own", "a dead process's"}[i], err)
		}
	}
	later := openShard(t, tp)
	if got, _ := replayAll(t, later, 0); fmt.Sprint(got) != fmt.Sprint(strs(g1, g2, g3)) {
		t.Fatalf("a later owner replays %v, want %v", got, strs(g1, g2, g3))
	}
}

// testIndexesAcrossClaims: record indexes stay dense and Replay(from)
// finds any index, though claims, torn groups, a broken run, fenced
// writers' records and snapshot pointers take Kafka offsets between
// records.
func testIndexesAcrossClaims(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	st := &store{e: e, t: tp}
	var all [][]byte
	for round := range 5 {
		l, err := tp.OpenLog(0)
		if err != nil {
			t.Fatal(err)
		}
		replayAll(t, l, 0)
		for i := range 3 {
			g := group(fmt.Sprintf("r%d-%d", round, i), 1+i)
			mustAppend(t, l, g)
			all = append(all, g...)
		}
		if round == 2 {
			n := int64(len(all))
			if err := l.PrepareSnapshot(ctx, n); err != nil {
				t.Fatal(err)
			}
			if err := l.WriteSnapshot(ctx, n, []byte("s")); err != nil {
				t.Fatal(err)
			}
		}
		l.Close()
		st.Tear(t, 0, round%4) // what a writer that died mid-append leaves
	}
	l := openShard(t, tp)
	for _, from := range []int64{0, 1, 5, int64(len(all)) - 1, int64(len(all))} {
		got, next := replayAll(t, l, from)
		if next != int64(len(all)) || fmt.Sprint(got) != fmt.Sprint(strs(all[from:])) {
			t.Fatalf("Replay(%d): %d records, next %d; want %d, next %d", from, len(got), next, len(all)-int(from), len(all))
		}
	}
}

// testSnapshotDamaged: a snapshot whose object is missing or damaged is
// passed over for the one before it.
func testSnapshotDamaged(t *testing.T, e *env) {
	tp, objs := e.topic(t, 1)
	ctx := context.Background()
	l, err := tp.OpenLog(0)
	if err != nil {
		t.Fatal(err)
	}
	replayAll(t, l, 0)
	var keys []string
	for i, n := range []int64{2, 4, 6} {
		mustAppend(t, l, group(fmt.Sprint(i), 2))
		if err := l.PrepareSnapshot(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := l.WriteSnapshot(ctx, n, fmt.Appendf(nil, "state %d", n)); err != nil {
			t.Fatal(err)
		}
		kl := l.(*Log)
		keys = append(keys, kl.snap.known[len(kl.snap.known)-1].key)
	}
	l.Close()
	// Damage the newest, remove the one before.
	var b bytes.Buffer
	obj := make([]byte, 64)
	n, _, _ := objs.ReadRange(ctx, keys[2], 0, obj)
	b.Write(obj[:n])
	damaged := b.Bytes()
	damaged[len(damaged)/2] ^= 1
	if err := objs.Put(ctx, keys[2], damaged); err != nil {
		t.Fatal(err)
	}
	if err := objs.Delete(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	l, err = tp.OpenLog(0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	idx, p, err := l.ReadSnapshot(ctx)
	if err != nil || idx != 2 || string(p) != "state 2" {
		t.Fatalf("ReadSnapshot = %d, %q, %v; want the snapshot at 2", idx, p, err)
	}
	if got, next := replayAll(t, l, 2); len(got) != 4 || next != 6 {
		t.Fatalf("replay from 2: %d records, next %d", len(got), next)
	}
}

// testSnapshotTakeover: a new owner starts from the latest snapshot and
// the tail after it, the records before it deleted from the partition.
func testSnapshotTakeover(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	l, err := tp.OpenLog(0)
	if err != nil {
		t.Fatal(err)
	}
	replayAll(t, l, 0)
	for i := range 5 {
		mustAppend(t, l, group(fmt.Sprint("a", i), 10))
	}
	if err := l.PrepareSnapshot(ctx, 50); err != nil {
		t.Fatal(err)
	}
	// Appends go on while the snapshot is written.
	done := make(chan error, 1)
	go func() {
		err := l.WriteSnapshot(ctx, 50, []byte("state at 50"))
		if err == nil {
			err = l.TruncateBefore(ctx, 50)
		}
		done <- err
	}()
	tail := group("tail", 7)
	for _, b := range tail {
		mustAppend(t, l, [][]byte{b})
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	start, err := tp.listOffset(ctx, 0, -2)
	if err != nil || start == 0 {
		t.Fatalf("log start offset %d (%v): the records before the snapshot were not deleted", start, err)
	}
	cur := openShard(t, tp) // takes the shard over
	idx, p, err := cur.ReadSnapshot(ctx)
	if err != nil || idx != 50 || string(p) != "state at 50" {
		t.Fatalf("ReadSnapshot = %d, %q, %v", idx, p, err)
	}
	got, next := replayAll(t, cur, 50)
	if fmt.Sprint(got) != fmt.Sprint(strs(tail)) || next != 57 {
		t.Fatalf("tail %v (next %d), want %v", got, next, strs(tail))
	}
	if _, err := cur.Replay(ctx, 0, func(int64, []byte) error { return nil }); !errors.Is(err, metalog.ErrTruncated) {
		t.Fatalf("Replay(0) after truncation: %v, want ErrTruncated", err)
	}
	if err := l.Append(ctx, group("zombie", 1)); !errors.Is(err, metalog.ErrFenced) {
		t.Fatalf("the old owner's Append: %v, want ErrFenced", err)
	}
	l.Close()
}

// testBrokerKilled kills the partition's leader during an Append —
// right away or a moment into its produce, or once its records are in
// the partition (before the check) — and restarts it before the next
// kill. Every Append that returned nil is in the log; one that failed is
// there whole or not at all, as the writer's own Replay says, and a new
// owner's replay agrees; indexes stay dense.
func testBrokerKilled(t *testing.T, e *env) {
	tp, _ := e.topic(t, 1)
	ctx := context.Background()
	l := openShard(t, tp)
	replayAll(t, l, 0)
	var durable []string
	killed := int32(-1)
	failures := 0
	var restarted chan error
	for i := range 16 {
		g := group(fmt.Sprint("g", i), 1+i%3)
		if i%4 == 1 {
			if restarted != nil {
				if err := <-restarted; err != nil {
					t.Fatal(err)
				}
			}
			id, err := tp.leader(ctx, 0, true)
			if err != nil {
				t.Fatal(err)
			}
			kill := func() { e.c.Kill(id) }
			switch i / 4 % 3 {
			case 0:
				l.beforeProduce = func() { l.beforeProduce = nil; kill() }
			case 1:
				l.beforeProduce = func() {
					l.beforeProduce = nil
					go func() { time.Sleep(time.Millisecond); kill() }()
				}
			case 2:
				l.beforeCheck = func() { l.beforeCheck = nil; kill() }
			}
			killed = id
		}
		t0 := time.Now()
		err := l.Append(ctx, g)
		if err != nil {
			failures++
			if errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("group %d: %v", i, err)
			}
			got, _ := replayAll(t, l, 0)
			switch {
			case fmt.Sprint(got) == fmt.Sprint(durable):
			case fmt.Sprint(got) == fmt.Sprint(append(durable, strs(g)...)):
				durable = got
			default:
				t.Fatalf("group %d failed (%v); the log holds %d records: neither the %d before it nor with it", i, err, len(got), len(durable))
			}
			t.Logf("group %d: failed after %v (%v); the log holds it: %v", i, time.Since(t0).Round(time.Millisecond), err, len(durable) == len(got) && len(got) > 0 && got[len(got)-1] == string(g[len(g)-1]))
		} else {
			durable = append(durable, strs(g)...)
			if killed >= 0 {
				t.Logf("group %d: appended in %v", i, time.Since(t0).Round(time.Millisecond))
			}
		}
		if i%4 == 1 && killed >= 0 {
			// The next appends run on two brokers while the third restarts.
			restarted = make(chan error, 1)
			go func(id int32) { restarted <- e.c.Restart(id) }(killed)
			killed = -1
		}
	}
	if restarted != nil {
		if err := <-restarted; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d appends failed and were learned by Replay; %d records durable", failures, len(durable))
	cur := openShard(t, tp)
	if got, next := replayAll(t, cur, 0); fmt.Sprint(got) != fmt.Sprint(durable) || next != int64(len(durable)) {
		t.Fatalf("a new owner replays %d records (next %d), want %d", len(got), next, len(durable))
	}
}

// dropConn is a connection to a broker that, when armed, loses the
// answer to the next Produce request it carries (cut 300 ms after the
// request, once the broker handled it), or the request itself, after
// which new connections are refused for a while.
type dropConn struct {
	net.Conn
	d        *dropper
	dropping atomic.Bool
}

type dropper struct {
	// request: lose the Produce request itself instead of its answer.
	request bool
	// swallow, while set, makes every Produce request vanish on the way
	// (the broker never sees it, the client never gets an answer).
	swallow atomic.Bool
	// swallowAll, while set, makes every request vanish (a network cut).
	swallowAll atomic.Bool
	armed      atomic.Bool
	blockUntil atomic.Int64 // unix ns
	cut        atomic.Int32
}

func (d *dropper) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if time.Now().UnixNano() < d.blockUntil.Load() {
		return nil, errors.New("test: connection refused")
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &dropConn{Conn: c, d: d}, nil
}

func (c *dropConn) Write(b []byte) (int, error) {
	const produceKey = 0
	if c.d.swallowAll.Load() {
		return len(b), nil
	}
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == produceKey && c.d.swallow.Load() {
		return len(b), nil
	}
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == produceKey && c.d.armed.CompareAndSwap(true, false) {
		if c.d.request {
			c.d.blockUntil.Store(time.Now().Add(4 * time.Second).UnixNano())
			c.d.cut.Add(1)
			c.Conn.Close()
			return 0, errors.New("test: connection cut before the Produce request")
		}
		c.dropping.Store(true)
	}
	return c.Conn.Write(b)
}

// Read, after the Produce was written, waits for the broker to have
// handled it and fails instead of returning the answer.
func (c *dropConn) Read(b []byte) (int, error) {
	if c.dropping.Load() {
		time.Sleep(300 * time.Millisecond)
		c.d.blockUntil.Store(time.Now().Add(4 * time.Second).UnixNano())
		c.d.cut.Add(1)
		c.Conn.Close()
		return 0, errors.New("test: connection cut before the Produce answer")
	}
	return c.Conn.Read(b)
}

// testLostProduceAnswer: the answer to an Append's produce is lost after
// the broker appended the group, or the request itself, and the broker
// cannot be reached for 4 s: the writer is not fenced; when the Append
// succeeds (the producer's retry answered) the group is there exactly
// once; when it fails, the writer's Replay (whose claim settles what
// counts) finds the group if it landed and not otherwise; it goes on, and
// a new owner agrees.
func testLostProduceAnswer(t *testing.T, e *env) {
	for _, lose := range []string{"answer", "request"} {
		t.Run(lose, func(t *testing.T) {
			d := &dropper{request: lose == "request"}
			tp, _ := e.topic(t, 1, func(c *Config) {
				c.ClientOpts = []kgo.Opt{kgo.Dialer(d.dial), kgo.RetryTimeout(2 * time.Second)}
				c.AppendTimeout = 2 * time.Second
				c.RequestTimeout = 10 * time.Second
			})
			ctx := context.Background()
			l := openShard(t, tp)
			replayAll(t, l, 0)
			g1, g2, g3 := group("g1", 2), group("g2", 3), group("g3", 1)
			mustAppend(t, l, g1)
			d.armed.Store(true)
			err := l.Append(ctx, g2)
			if d.cut.Load() != 1 {
				t.Fatalf("the Produce %s was not cut (Append: %v)", lose, err)
			}
			if errors.Is(err, metalog.ErrFenced) {
				t.Fatalf("a lost produce %s taken for a takeover: %v", lose, err)
			}
			// kgo gives up a sent batch once AppendTimeout (2 s) passed
			// (AllowIdempotentProduceCancellation), before the broker is
			// reachable again (4 s): usually the Append fails, and the
			// Replay below settles the group — there once if it landed
			// (the answer was lost), not there if it did not (the request
			// was). When a retry got through in time, it is there once.
			t.Logf("Append after the lost %s: %v", lose, err)
			time.Sleep(time.Until(time.Unix(0, d.blockUntil.Load())))
			want := strs(g1, g2)
			if lose == "request" && err != nil {
				want = strs(g1)
			}
			got, next := replayAll(t, l, 0)
			if fmt.Sprint(got) != fmt.Sprint(want) || next != int64(len(want)) {
				t.Fatalf("after the lost %s the writer replays %v (next %d), want %v", lose, got, next, want)
			}
			mustAppend(t, l, g3)
			cur := openShard(t, tp)
			if got, _ := replayAll(t, cur, 0); fmt.Sprint(got) != fmt.Sprint(append(want, strs(g3)...)) {
				t.Fatalf("a new owner replays %v", got)
			}
		})
	}
}

// openShard opens a writer of tp's shard 0, closed when the test ends.
func openShard(t *testing.T, tp *Topic) *Log {
	t.Helper()
	l, err := tp.openLog(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// produceRaw produces recs to tp's topic as they are, with a client of
// its own: records a writer of this backend might have left, written by
// hand.
func produceRaw(t *testing.T, tp *Topic, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tp.cfg.Brokers...), kgo.DefaultProduceTopic(tp.cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, r := range recs {
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}
