package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func sidecar(id int32, rack string) diskless.Sidecar {
	return diskless.Sidecar{NodeID: id, Host: "10.0.0.1", Port: 9092 + id, Rack: rack}
}

func TestFormatRoundTrip(t *testing.T) {
	withListeners := sidecar(8, "")
	withListeners.Listeners = "INTERNAL://10.0.0.1:9100,EXTERNAL://k8.example.com:9093"
	for _, s := range []diskless.Sidecar{sidecar(0, ""), sidecar(7, "eu-west-1a"), withListeners} {
		got, start, err := decodeMetadata(appendMetadata(nil, s, 1234))
		if err != nil || got != s || start != 1234 {
			t.Fatalf("metadata %+v: %+v %d %v", s, got, start, err)
		}
	}
	ms := []Member{
		{MemberID: "b", Sidecar: sidecar(2, "a"), StartTimeMs: 5},
		{MemberID: "a", Sidecar: sidecar(1, ""), StartTimeMs: 6},
		{MemberID: "a", Sidecar: sidecar(2, "b"), StartTimeMs: 7},
		{MemberID: "c", Sidecar: withListeners, StartTimeMs: 8},
	}
	got, err := decodeAssignment(appendAssignment(nil, ms))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ms)
	sortMembers(want)
	if !reflect.DeepEqual(got, want) || got[0].NodeID != 1 || got[1].MemberID != "a" {
		t.Fatalf("assignment %+v, want %+v", got, want)
	}
	empty, err := decodeAssignment(appendAssignment(nil, nil))
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty assignment: %v %v", empty, err)
	}
}

// TestFormatCorruption is the decoders' corruption table: every strict
// prefix, a trailing byte, another version, and damaged fields are
// refused with ErrMalformed.
func TestFormatCorruption(t *testing.T) {
	meta := appendMetadata(nil, sidecar(3, "r"), 9)
	asg := appendAssignment(nil, []Member{{MemberID: "m", Sidecar: sidecar(3, "r"), StartTimeMs: 9}})
	for _, tc := range []struct {
		name string
		b    []byte
		dec  func([]byte) error
	}{
		{"metadata", meta, func(b []byte) error { _, _, err := decodeMetadata(b); return err }},
		{"assignment", asg, func(b []byte) error { _, err := decodeAssignment(b); return err }},
	} {
		for n := range len(tc.b) {
			if err := tc.dec(tc.b[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: prefix %d/%d: %v", tc.name, n, len(tc.b), err)
			}
		}
		if err := tc.dec(append(bytes.Clone(tc.b), 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: trailing byte: %v", tc.name, err)
		}
		v1 := bytes.Clone(tc.b)
		v1[1] = 1
		if err := tc.dec(v1); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: version 1: %v", tc.name, err)
		}
	}
	bad := []struct {
		name string
		b    []byte
		dec  func([]byte) error
	}{
		{"negative node id", appendMetadata(nil, diskless.Sidecar{NodeID: -1, Host: "h", Port: 1}, 0), nil},
		{"port 0", appendMetadata(nil, diskless.Sidecar{NodeID: 1, Host: "h", Port: 0}, 0), nil},
		{"empty host", appendMetadata(nil, diskless.Sidecar{NodeID: 1, Host: "", Port: 1}, 0), nil},
		{"null host", append(kbin.AppendInt32(kbin.AppendInt16(nil, 0), 1), 0), nil},
		{"huge member count", append(kbin.AppendInt16(nil, 0), kbin.AppendUvarint(nil, 1<<30)...),
			func(b []byte) error { _, err := decodeAssignment(b); return err }},
		{"null member array", []byte{0, 0, 0}, func(b []byte) error { _, err := decodeAssignment(b); return err }},
		{"members out of order", appendUnsorted(), func(b []byte) error { _, err := decodeAssignment(b); return err }},
	}
	for _, tc := range bad {
		dec := tc.dec
		if dec == nil {
			dec = func(b []byte) error { _, _, err := decodeMetadata(b); return err }
		}
		if err := dec(tc.b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// appendUnsorted is an assignment whose members are not in the format's
// order.
func appendUnsorted() []byte {
	dst := kbin.AppendInt16(nil, 0)
	dst = kbin.AppendCompactArrayLen(dst, 2)
	for _, id := range []int32{5, 4} {
		dst = kbin.AppendCompactString(dst, "m")
		dst = appendSidecar(dst, sidecar(id, ""), 0)
	}
	return kbin.AppendUvarint(dst, 0)
}

func FuzzDecodeMetadata(f *testing.F) {
	f.Add(appendMetadata(nil, sidecar(3, "r"), 9))
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, start, err := decodeMetadata(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatal(err)
			}
			return
		}
		s2, start2, err := decodeMetadata(appendMetadata(nil, s, start))
		if err != nil || s2 != s || start2 != start {
			t.Fatalf("re-decode: %+v %d %v, want %+v %d", s2, start2, err, s, start)
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	f.Add(appendAssignment(nil, []Member{{MemberID: "m", Sidecar: sidecar(3, "r"), StartTimeMs: 9}}))
	f.Add(appendUnsorted())
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := decodeAssignment(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatal(err)
			}
			return
		}
		again, err := decodeAssignment(appendAssignment(nil, ms))
		if err != nil || !reflect.DeepEqual(again, ms) {
			t.Fatalf("re-decode: %+v %v, want %+v", again, err, ms)
		}
	})
}

// TestOneSidecarPerNodeID: of members announcing one node id, the one
// started last is the sidecar of that id, whatever the order they come
// in; ties go to the smallest member id.
func TestOneSidecarPerNodeID(t *testing.T) {
	old := Member{MemberID: "z", Sidecar: diskless.Sidecar{NodeID: 1, Host: "old", Port: 1}, StartTimeMs: 100}
	restarted := Member{MemberID: "y", Sidecar: diskless.Sidecar{NodeID: 1, Host: "new", Port: 1}, StartTimeMs: 200}
	other := Member{MemberID: "x", Sidecar: diskless.Sidecar{NodeID: 0, Host: "o", Port: 1}, StartTimeMs: 50}
	for _, order := range [][]Member{{old, restarted, other}, {restarted, old, other}, {other, old, restarted}} {
		view, left := sidecars(order)
		if len(view) != 2 || view[0] != other.Sidecar || view[1] != restarted.Sidecar || len(left) != 1 || left[0].MemberID != "z" {
			t.Fatalf("%v: view %+v, left %+v", order, view, left)
		}
	}
	tie := restarted
	tie.MemberID, tie.Host = "a", "tie"
	if view, _ := sidecars([]Member{restarted, tie}); view[0].Host != "tie" {
		t.Fatalf("tie: %+v", view)
	}
}

// testGroup joins a member of group for sidecar s to the cluster at kc.
func testGroup(t *testing.T, kc *kafkatest.Cluster, group string, s diskless.Sidecar, mutate ...func(*Config)) *Group {
	t.Helper()
	cl := kc.Client(t, kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	cfg := Config{Client: cl, GroupID: group, Self: s, Logger: quiet}
	for _, m := range mutate {
		m(&cfg)
	}
	g, err := Join(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// waitView waits until g's view, as a member, holds exactly the node ids
// want, and returns it and how long that took.
func waitView(t *testing.T, g *Group, want ...int32) (View, time.Duration) {
	t.Helper()
	start := time.Now()
	v := waitFor(t, g, time.Minute, fmt.Sprintf("members %v", want), func(v View) bool {
		ids := make([]int32, len(v.Sidecars))
		for i, s := range v.Sidecars {
			ids[i] = s.NodeID
		}
		return v.Member && slices.Equal(ids, want)
	})
	return v, time.Since(start)
}

// waitFor waits up to within until g's view satisfies ok (what says how,
// for the failure) and returns that view.
func waitFor(t *testing.T, g *Group, within time.Duration, what string, ok func(View) bool) View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		ch := g.Changed()
		v := g.View()
		if ok(v) {
			return v
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("node %d: view %+v, want %s", g.cfg.Self.NodeID, v, what)
		}
	}
}

// TestGroupOnKafka runs members on a real Kafka (one cluster for the
// subtests).
func TestGroupOnKafka(t *testing.T) {
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, kc) })
	t.Run("GroupIDTakenByConsumers", func(t *testing.T) { testGroupIDTaken(t, kc) })
	t.Run("CoordinatorDown", func(t *testing.T) { testCoordinatorDown(t, kc) })
}

// testCoordinatorDown: the group's coordinator (the one broker) is
// SIGKILLed for longer than the members' session timeout, then started
// again. The members keep their view through it, unconfirmed, and the
// broker, loading the group from __consumer_offsets, confirms the same
// generation at their next heartbeat: nobody was dropped, no rebalance.
// Meanwhile the view is lapsed (nothing answered for a session timeout),
// and no longer once Kafka answers.
// (With the first design each member dropped out of its view after a
// session timeout without an answer, and joined a new generation.)
func testCoordinatorDown(t *testing.T, kc *kafkatest.Cluster) {
	const group = "diskless-sidecars-coordinator-down"
	// 6 s, Kafka's floor: the session must outlast a loaded machine's gap
	// between the broker's loading the group and the members' next
	// heartbeat (2 s did not, once, in a full run at load 40).
	short := func(c *Config) { c.SessionTimeout, c.HeartbeatInterval = 6*time.Second, 500*time.Millisecond }
	a := testGroup(t, kc, group, sidecar(1, "za"), short)
	b := testGroup(t, kc, group, sidecar(2, "zb"), short)
	before, _ := waitView(t, a, 1, 2)
	waitView(t, b, 1, 2)
	id := kc.Brokers()[0]
	if err := kc.Kill(id); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	for _, g := range []*Group{a, b} {
		// Lapsed: Kafka answered nothing for a session timeout.
		v := waitFor(t, g, 2*time.Minute, "a lapsed view", func(v View) bool { return v.Lapsed })
		if v.Current || !v.Member || v.Generation != before.Generation || len(v.Sidecars) != 2 {
			t.Fatalf("node %d with its coordinator down: view %+v, want the last one kept, unconfirmed", g.cfg.Self.NodeID, v)
		}
	}
	if err := kc.Restart(id); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Group{a, b} {
		v := waitFor(t, g, 2*time.Minute, "a confirmed view", func(v View) bool { return v.Current })
		if !v.Member || v.Lapsed || v.Generation != before.Generation {
			t.Fatalf("node %d after its coordinator came back: view %+v, want generation %d confirmed", g.cfg.Self.NodeID, v, before.Generation)
		}
	}
	t.Logf("coordinator down %v (session timeout 6 s): generation %d kept and confirmed again", time.Since(killedAt).Round(time.Millisecond), before.Generation)
}

// testLifecycle: three sidecars join and see the same view of one
// generation, with listeners and racks; one that stops is gone from the
// others' views at once (it leaves); one whose process dies (no
// LeaveGroup, no heartbeat) is gone within its session timeout; a
// restarted process of a node id replaces its predecessor at once.
func testLifecycle(t *testing.T, kc *kafkatest.Cluster) {
	const group = "diskless-sidecars-test"
	a := testGroup(t, kc, group, sidecar(1, "za"))
	b := testGroup(t, kc, group, sidecar(2, "zb"))
	c := testGroup(t, kc, group, sidecar(3, ""))
	va, _ := waitView(t, a, 1, 2, 3)
	vb, _ := waitView(t, b, 1, 2, 3)
	vc, _ := waitView(t, c, 1, 2, 3)
	if va.Generation != vb.Generation || vb.Generation != vc.Generation || !reflect.DeepEqual(va.Sidecars, vc.Sidecars) {
		t.Fatalf("views differ: %+v %+v %+v", va, vb, vc)
	}
	if va.Sidecars[0] != sidecar(1, "za") || va.Sidecars[2] != sidecar(3, "") {
		t.Fatalf("announced sidecars %+v", va.Sidecars)
	}

	// A graceful stop leaves the group: seen at once.
	c.Close()
	if v := c.View(); v.Member {
		t.Fatalf("closed member still a member: %+v", v)
	}
	_, took := waitView(t, a, 1, 2)
	t.Logf("a stopped sidecar left the view after %v", took)

	// A dead process: it neither leaves nor heartbeats.
	b.abandon()
	_, took = waitView(t, a, 1)
	t.Logf("a dead sidecar (session timeout %v) left the view after %v", DefaultSessionTimeout, took)
	if took > 3*DefaultSessionTimeout {
		t.Fatalf("a dead sidecar was seen gone after %v, more than 3 session timeouts", took)
	}

	// A restart of node 1 while its predecessor still heartbeats (its
	// session has not expired): the new process is the sidecar of node 1,
	// the old one is left out.
	a2 := testGroup(t, kc, group, diskless.Sidecar{NodeID: 1, Host: "10.0.0.2", Port: 9000}, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Hour) }
	})
	v2, _ := waitView(t, a2, 1)
	if v2.Sidecars[0].Host != "10.0.0.2" {
		t.Fatalf("restarted node 1: view %+v", v2)
	}
	waitOut(t, a)
}

// waitOut waits until g is no member of the view.
func waitOut(t *testing.T, g *Group) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ch := g.Changed()
		if v := g.View(); !v.Member && v.Generation >= 0 {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("node %d still a member: %+v", g.cfg.Self.NodeID, g.View())
		}
	}
}

// testGroupIDTaken: a group id a consumer group uses already is refused
// by Kafka (INCONSISTENT_GROUP_PROTOCOL): the sidecar stays out, logging,
// and never joins the consumers.
func testGroupIDTaken(t *testing.T, kc *kafkatest.Cluster) {
	consumer := kc.Client(t, kgo.ConsumerGroup("taken"), kgo.ConsumeTopics("t"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		consumer.PollRecords(ctx, 1)
		if _, gen := consumer.GroupMetadata(); gen >= 0 || ctx.Err() != nil {
			break
		}
	}
	logs := &lockedBuf{}
	g := testGroup(t, kc, "taken", sidecar(1, ""), func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	deadline := time.Now().Add(30 * time.Second)
	for !bytes.Contains(logs.bytes(), []byte("INCONSISTENT_GROUP_PROTOCOL")) {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal logged:\n%s", logs.bytes())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := g.View(); v.Member {
		t.Fatalf("joined a consumers' group: %+v", v)
	}
}

// lockedBuf is a log sink safe for concurrent writes.
type lockedBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuf) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}
