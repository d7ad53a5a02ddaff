package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/server"
)

// gatedLog is a metadata log whose next Append can be made to fail and
// whose Replays can be held: a shard rebuilding after the failure stays
// loading until the gate opens.
type gatedLog struct {
	metalog.Log
	mu       sync.Mutex
	failNext bool
	gate     chan struct{}
	// replaying, when set, is closed by the first Replay held at the gate.
	replaying chan struct{}
}

func (l *gatedLog) Append(ctx context.Context, bodies [][]byte) error {
	l.mu.Lock()
	fail := l.failNext
	l.failNext = false
	l.mu.Unlock()
	if fail {
		return errors.New("injected append failure")
	}
	return l.Log.Append(ctx, bodies)
}

func (l *gatedLog) Replay(ctx context.Context, from int64, fn func(int64, []byte) error) (int64, error) {
	l.mu.Lock()
	gate, replaying := l.gate, l.replaying
	l.replaying = nil
	l.mu.Unlock()
	if replaying != nil {
		close(replaying)
	}
	if gate != nil {
		<-gate
	}
	return l.Log.Replay(ctx, from, fn)
}

// noProduce and noFetch stand in for the produce and fetch stages, which
// these tests do not use.
type noProduce struct{}

func (noProduce) Produce(context.Context, *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	return nil
}
func (noProduce) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 3, MaxVersion: 11}}
}

type noFetch struct{}

func (noFetch) Fetch(context.Context, *kmsg.FetchRequest) *kmsg.FetchResponse { return nil }
func (noFetch) ListOffsets(context.Context, *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	return nil
}
func (noFetch) OffsetForLeaderEpoch(context.Context, *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	return nil
}
func (noFetch) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1, MinVersion: 4, MaxVersion: 12}, {ApiKey: 2, MinVersion: 1, MaxVersion: 7}, {ApiKey: 23, MinVersion: 0, MaxVersion: 4}}
}

// serveCoordinator serves c (the catalog, and whichever of Groups and
// Transactions cfg names) behind a real server on cfg's address, with no
// produce or fetch stage; stop shuts the server down and fails the test
// if it does not stop cleanly. Deferred before c.Close, it stops the
// server first.
func serveCoordinator(t *testing.T, cfg server.Config, c *coordinator.Coordinator) (s *server.Server, stop func()) {
	t.Helper()
	s, err := server.New(cfg, noProduce{}, noFetch{}, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()
	return s, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-served; err != nil {
			t.Error(err)
		}
	}
}

// kgoLog keeps kgo's log lines.
type kgoLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *kgoLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }
func (l *kgoLog) Log(_ kgo.LogLevel, msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(msg, kv))
}

// count returns how many lines hold every one of s.
func (l *kgoLog) count(s ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
outer:
	for _, line := range l.lines {
		for _, w := range s {
			if !strings.Contains(line, w) {
				continue outer
			}
		}
		n++
	}
	return n
}

// TestGroupsWhileShardLoadingKgo: the real group coordinator (a
// coordinator shard) behind the real server, its metadata log failing an
// append so that the shard rebuilds its state, the rebuild held: an
// OffsetCommit from franz-go's client is answered
// COORDINATOR_LOAD_IN_PROGRESS, which the client retries (it logs the
// code and backs off), and commits once the shard has loaded; a raw
// request sees the code on the wire (DESIGN §Consumer groups).
func TestGroupsWhileShardLoadingKgo(t *testing.T) {
	logs := map[int32]*gatedLog{}
	var mu sync.Mutex
	mem := &metalogtest.Memory{}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := coordinator.Open(coordinator.Config{NumShards: 1, Logger: quiet, LifecycleInterval: -1,
		OpenLog: func(shard int32) (metalog.Log, error) {
			l, err := mem.Open(shard)
			if err != nil {
				return nil, err
			}
			g := &gatedLog{Log: l}
			mu.Lock()
			logs[shard] = g
			mu.Unlock()
			return g, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, stop := serveCoordinator(t, server.Config{Addr: "127.0.0.1:0", NodeID: 1, ClusterID: "loading", Logger: quiet, Groups: c}, c)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic, err := c.CreateTopic(ctx, "t", 2, nil)
	if err != nil {
		t.Fatal(err)
	}

	// The shard's next append fails; its rebuild waits at the gate.
	gate := make(chan struct{})
	var openGate sync.Once
	defer openGate.Do(func() { close(gate) }) // before c.Close, which waits for the rebuild
	replaying := make(chan struct{})
	l := logs[0]
	l.mu.Lock()
	l.failNext, l.gate, l.replaying = true, gate, replaying
	l.mu.Unlock()
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m", 1
	if _, err := c.Heartbeat(ctx, hb); err != nil {
		t.Fatal(err) // no record: not the failing append
	}
	trigger := kmsg.NewPtrOffsetCommitRequest()
	trigger.Version, trigger.Group, trigger.Generation = 9, "trigger", -1
	trigger.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
	triggered := make(chan error, 1)
	go func() { _, err := c.CommitOffsets(ctx, trigger); triggered <- err }()
	// The rebuild has started (a request queued before it would wait for
	// it: only later ones are answered at once).
	select {
	case <-replaying:
	case <-ctx.Done():
		t.Fatal("the shard never started rebuilding")
	}
	answered := make(chan error, 1)
	go func() { _, err := c.Heartbeat(ctx, hb); answered <- err }()
	select {
	case err := <-answered:
		if !errors.Is(err, diskless.ErrShardLoading) {
			t.Fatalf("Heartbeat while the shard loads: %v, want ErrShardLoading", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Heartbeat waits behind the shard's replay instead of being answered")
	}

	klog := &kgoLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.WithLogger(klog),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// On the wire.
	raw := kmsg.NewPtrOffsetCommitRequest()
	raw.Version, raw.Group, raw.Generation = 9, "g", -1
	// kgo sends its highest version, v10, which names topics by id.
	raw.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", TopicID: topic.ID, Partitions: trigger.Topics[0].Partitions}}
	resp, err := raw.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.CoordinatorLoadInProgress.Code {
		// kgo retried it until the retries ran out; any other code is wrong.
		t.Fatalf("OffsetCommit while loading: %v, want COORDINATOR_LOAD_IN_PROGRESS", kerr.ErrorForCode(code))
	}
	retried := []string{"retrying request", "OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"}
	before := klog.count(retried...)
	if before == 0 {
		t.Fatal("kgo did not log retrying the OffsetCommit answered COORDINATOR_LOAD_IN_PROGRESS")
	}
	// kadm's commit, retried by the client until the shard has loaded.
	committed := make(chan error, 1)
	go func() {
		o := kadm.Offsets{}
		o.Add(kadm.Offset{Topic: "t", Partition: 1, At: 42, LeaderEpoch: -1})
		r, err := kadm.NewClient(cl).CommitOffsets(ctx, "g", o)
		if err == nil {
			err = r.Error()
		}
		committed <- err
	}()
	for klog.count(retried...) == before {
		select {
		case err := <-committed:
			t.Fatalf("the commit returned (%v) while the shard was loading", err)
		case <-ctx.Done():
			t.Fatal("kgo never retried an OffsetCommit answered COORDINATOR_LOAD_IN_PROGRESS")
		case <-time.After(5 * time.Millisecond):
		}
	}
	openGate.Do(func() { close(gate) })
	if err := <-triggered; err == nil {
		t.Fatal("the commit whose append failed succeeded")
	}
	if err := <-committed; err != nil {
		t.Fatalf("the commit retried after loading: %v", err)
	}
	got, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := got.Lookup("t", 1); o.At != 42 {
		t.Fatalf("committed offset %d, want 42", o.At)
	}
}
