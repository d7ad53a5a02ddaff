package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
)

// testLog wraps a metalog.Log for fault injection and counting.
type testLog struct {
	inner metalog.Log
	// appends counts Append calls (groups).
	appends atomic.Int64
	// failAppend, when set, decides the fate of an Append: write the
	// bodies first or not, then fail with err (nil: succeed normally).
	failAppend func(bodies [][]byte) (write bool, err error)
	// failReplay makes Replay fail.
	failReplay atomic.Bool
	// replayGate, when set (under mu), holds every Replay until it is
	// closed: a shard that rebuilds stays loading meanwhile.
	replayGate chan struct{}
	// saveHook, when set (before the first snapshot), runs at the start
	// of every WriteSnapshot, on the snapshot goroutine; saveErr, when
	// set, makes WriteSnapshot fail with its answer.
	saveHook func(index int64)
	saveErr  func(index int64) error
	// replayErrs, when set (under mu), are the errors the next Replays
	// fail with, one each, before any reaches the log; readSnapshots
	// counts ReadSnapshot calls.
	replayErrs    []error
	readSnapshots atomic.Int64
	// failPrepare makes PrepareSnapshot fail, after which, as the
	// contract allows (metalog.Log), Append fails until a Replay.
	failPrepare atomic.Bool
	needsReplay atomic.Bool
	replayWaits chan struct{} // when set, told each time a Replay waits at replayGate
	// confirms counts Confirm calls; confirmHook, when set (under mu),
	// answers them instead of the log (a log cut off, or taken over).
	confirms    atomic.Int64
	confirmHook func(ctx context.Context) error
	mu          sync.Mutex
}

var _ metalog.Log = (*testLog)(nil)

func (l *testLog) Replay(ctx context.Context, from int64, fn func(int64, []byte) error) (int64, error) {
	if l.failReplay.Load() {
		return 0, errors.New("injected replay failure")
	}
	l.mu.Lock()
	gate := l.replayGate
	var inject error
	if len(l.replayErrs) > 0 {
		inject, l.replayErrs = l.replayErrs[0], l.replayErrs[1:]
	}
	waits := l.replayWaits
	l.mu.Unlock()
	if inject != nil {
		return 0, inject
	}
	if gate != nil {
		if waits != nil {
			select {
			case waits <- struct{}{}:
			default:
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	next, err := l.inner.Replay(ctx, from, fn)
	if err == nil {
		l.needsReplay.Store(false)
	}
	return next, err
}

func (l *testLog) Append(ctx context.Context, bodies [][]byte) error {
	l.appends.Add(1)
	if l.needsReplay.Load() {
		return errors.New("test: Append before Replay (after a failed PrepareSnapshot)")
	}
	l.mu.Lock()
	fail := l.failAppend
	l.mu.Unlock()
	if fail != nil {
		if write, err := fail(bodies); err != nil {
			if write {
				if werr := l.inner.Append(ctx, bodies); werr != nil {
					return werr
				}
			}
			return err
		}
	}
	return l.inner.Append(ctx, bodies)
}

func (l *testLog) setFail(f func([][]byte) (bool, error)) {
	l.mu.Lock()
	l.failAppend = f
	l.mu.Unlock()
}

func (l *testLog) Close() error { return l.inner.Close() }
func (l *testLog) Confirm(ctx context.Context) error {
	l.confirms.Add(1)
	l.mu.Lock()
	hook := l.confirmHook
	l.mu.Unlock()
	if hook != nil {
		return hook(ctx)
	}
	return l.inner.Confirm(ctx)
}
func (l *testLog) ReadSnapshot(ctx context.Context) (int64, []byte, error) {
	l.readSnapshots.Add(1)
	return l.inner.ReadSnapshot(ctx)
}
func (l *testLog) PrepareSnapshot(ctx context.Context, index int64) error {
	if l.failPrepare.Load() {
		l.needsReplay.Store(true)
		return errors.New("injected PrepareSnapshot failure")
	}
	return l.inner.PrepareSnapshot(ctx, index)
}
func (l *testLog) WriteSnapshot(ctx context.Context, index int64, data []byte) error {
	if l.saveHook != nil {
		l.saveHook(index)
	}
	if l.saveErr != nil {
		if err := l.saveErr(index); err != nil {
			return err
		}
	}
	return l.inner.WriteSnapshot(ctx, index, data)
}
func (l *testLog) TruncateBefore(ctx context.Context, index int64) error {
	return l.inner.TruncateBefore(ctx, index)
}

// withTestLogs makes the env open file logs wrapped in testLogs, which
// logs[shard] holds (replaced on every reopen).
func withTestLogs(logs map[int32]*testLog, mu *sync.Mutex) func(*Config) {
	return withTestLogsInit(logs, mu, nil)
}

// withTestLogsInit is withTestLogs, calling init (when not nil) on each
// testLog before the coordinator uses it.
func withTestLogsInit(logs map[int32]*testLog, mu *sync.Mutex, init func(shard int32, l *testLog)) func(*Config) {
	return func(c *Config) {
		dir := c.Dir
		c.OpenLog = func(shard int32) (metalog.Log, error) {
			inner, err := metalog.OpenFileLog(filepath.Join(dir, fmt.Sprintf("shard-%d", shard)), discardLogger())
			if err != nil {
				return nil, err
			}
			l := &testLog{inner: inner}
			if init != nil {
				init(shard, l)
			}
			mu.Lock()
			logs[shard] = l
			mu.Unlock()
			return l, nil
		}
	}
}

// answers captures everything a client can observe of the coordinator.
func answers(t *testing.T, c *Coordinator) string {
	t.Helper()
	var b strings.Builder
	ctx := context.Background()
	for _, top := range c.Topics() {
		fmt.Fprintf(&b, "topic %s %s %d %v %+v\n", top.Name, top.ID, top.Partitions, top.Config, top.Disablement)
		for p := range top.Partitions {
			tp := diskless.TopicPartition{TopicID: top.ID, Partition: p}
			for _, off := range []int64{-1, 0, 1, 5, 1 << 40} {
				fmt.Fprintf(&b, "find %d@%d %+v\n", p, off, c.FindBatches(ctx, []diskless.FindBatchesRequest{{TopicID: top.ID, Partition: p, Offset: off, MaxBytes: 1 << 20}})[0])
			}
			for _, ts := range []int64{diskless.ListOffsetsEarliest, diskless.ListOffsetsLatest, diskless.ListOffsetsMaxTimestamp, -7, 0, 1_700_000_000_000, 1 << 60} {
				r := c.ListOffsets(ctx, tp, ts)
				fmt.Fprintf(&b, "list %d@%d %v %d %d %d %d", p, ts, r.Err, r.LogStartOffset, r.HighWatermark, r.Offset, r.Timestamp)
				if r.Candidate != nil {
					fmt.Fprintf(&b, " %+v", *r.Candidate)
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// workload drives a mix of topics, plain and idempotent commits across
// shards, and producer-id allocations.
func workload(t *testing.T, e *env, files int) {
	t.Helper()
	a := e.createTopic("a", 3, nil)
	bt := e.createTopic("b.logappend", 2, map[string]string{"message.timestamp.type": "LogAppendTime", "retention.ms": "-1"})
	seq := map[[2]int64]int32{}
	for i := range files {
		e.clock.Advance(time.Duration(i%3) * time.Second)
		top, p := a, int32(i%3)
		if i%4 == 3 {
			top, p = bt, int32(i%2)
		}
		pid := int64(i % 2)
		k := [2]int64{pid, int64(p)}
		batches := []diskless.CommitBatch{
			withMaxTs(plain(top, p, int32(1+i%5)), int64(1_700_000_000_000+i*37%11)),
			idem(top, p, pid, 0, seq[k], 2),
		}
		if top.Config.LogAppendTime {
			for j := range batches {
				batches[j].TimestampType = 1
			}
		}
		seq[k] += 2
		e.commit(nextKey(), batches...)
		if i%7 == 0 {
			if _, err := e.c.AllocateProducerID(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRestartRebuildsIdenticalState runs over the embedded file log and
// over the in-memory log (metalogtest.Memory): the coordinator relies on
// nothing of a backend but the metalog.Log contract.
func TestRestartRebuildsIdenticalState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snapshots int64
		memory    bool
	}{
		{"replay only", -1, false}, {"snapshot every 5 records", 5, false}, {"snapshot every record", 1, false},
		{"in memory, replay only", -1, true}, {"in memory, snapshot every 5 records", 5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 3, func(c *Config) {
				c.SnapshotIntervalRecords = tc.snapshots
				if tc.memory {
					c.OpenLog = new(metalogtest.Memory).Open
				}
			})
			workload(t, e, 40)
			if n := churnFiles(t, e, 24); n == 0 {
				t.Fatal("no file forgotten")
			}
			before, beforeState := answers(t, e.c), stateBytes(e.c)
			e.reopen()
			after, afterState := answers(t, e.c), stateBytes(e.c)
			if before != after {
				t.Fatalf("answers differ after restart:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if !reflect.DeepEqual(beforeState, afterState) {
				t.Fatal("state differs after restart")
			}
			// And it keeps working identically from there.
			workloadMore(t, e)
			before = answers(t, e.c)
			e.reopen()
			if after := answers(t, e.c); before != after {
				t.Fatal("answers differ after second restart")
			}
			if tc.snapshots > 0 {
				segs, _ := filepath.Glob(filepath.Join(e.cfg.Dir, "shard-*", "*.log"))
				if len(segs) > 2*int(e.cfg.NumShards) {
					t.Fatalf("%d segments remain with snapshots: %v", len(segs), segs)
				}
			}
		})
	}
}

func workloadMore(t *testing.T, e *env) {
	top, _ := e.c.Topic("a")
	for p := range int32(3) {
		e.commit(nextKey(), plain(top, p, 3))
	}
}

func TestTornTailTruncatedAtOpen(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	e.commit(nextKey(), plain(top, 0, 2))
	before := answers(t, e.c)
	e.c.Close()
	e.c = nil
	seg := filepath.Join(e.cfg.Dir, "shard-0", "00000000000000000000.log")
	// A group that was being written: one whole frame and half of another.
	torn := appendFrame(nil, []byte("not even a record"))
	torn = append(torn, appendFrame(nil, []byte("second"))[:6]...)
	torn[9] ^= 0xff // and its CRC fails
	appendBytes(t, seg, torn)
	e.open()
	if after := answers(t, e.c); after != before {
		t.Fatalf("answers changed:\n%s\n%s", before, after)
	}
	if !strings.Contains(e.logs.String(), fmt.Sprintf("dropped_bytes=%d", len(torn))) {
		t.Fatalf("no torn-tail warning:\n%s", e.logs.String())
	}
	if r := e.commit(nextKey(), plain(top, 0, 1))[0]; r.BaseOffset != 2 {
		t.Fatalf("commit after repair at %d, want 2", r.BaseOffset)
	}
}

// TestTornGroupDroppedAtOpen: a power loss while a group of three commits
// was being written left its middle frame torn but the frames after it
// and its group end on disk (pages persisted out of order). None of the
// three was acknowledged, so Open drops the whole group with a warning,
// the state is the one before it, and commits go on and survive a
// restart. (Before group ends, the valid frame after the torn one made
// Open refuse with ErrCorrupt.)
func TestTornGroupDroppedAtOpen(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	top := e.createTopic("t", 1, nil)
	e.commit(nextKey(), plain(top, 0, 2))
	before := answers(t, e.c)
	seg := filepath.Join(e.cfg.Dir, "shard-0", "00000000000000000000.log")
	st, _ := os.Stat(seg)
	groupStart := st.Size()

	// One group of three commits: hold the driver while they queue.
	gate := holdShard(t, e.c.shards[0])
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); err != nil {
				t.Error(err)
			}
		})
	}
	waitQueued(t, e.c.shards[0], 3)
	close(gate)
	wg.Wait()
	e.c.Close()
	e.c = nil

	var group []int64 // the frames of the last group
	for _, off := range frameOffsets(t, seg) {
		if off >= groupStart {
			group = append(group, off)
		}
	}
	if len(group) != 3 || group[0] != groupStart {
		t.Fatalf("last group has frames at %v, want 3 from byte %d", group, groupStart)
	}
	flip(t, seg, group[1]+frameHeaderSize+3)
	st, _ = os.Stat(seg)
	e.open()
	if after := answers(t, e.c); after != before {
		t.Fatalf("answers are not those before the torn group:\n%s\n%s", before, after)
	}
	if w := fmt.Sprintf("dropped_bytes=%d", st.Size()-groupStart); !strings.Contains(e.logs.String(), w) {
		t.Fatalf("no warning naming %s:\n%s", w, e.logs.String())
	}
	if r := e.commit(nextKey(), plain(top, 0, 1))[0]; r.Err != nil || r.BaseOffset != 2 {
		t.Fatalf("commit after repair: %+v, want base offset 2", r)
	}
	before = answers(t, e.c)
	e.reopen()
	if after := answers(t, e.c); after != before {
		t.Fatalf("answers differ after restart:\n%s\n%s", before, after)
	}
}

// TestMidLogCorruptionRefusesOpen is the review's repro: one flipped byte
// in frame 7 of 22 of a shard's only segment. Truncating there would drop
// fifteen acknowledged records; Open must refuse instead, naming the file
// and byte offset, and leave the log as it is.
func TestMidLogCorruptionRefusesOpen(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	top := e.createTopic("t", 1, nil) // records 0, 1
	for range 20 {
		e.commit(nextKey(), plain(top, 0, 1)) // records 2 … 21
	}
	e.c.Close()
	e.c = nil
	seg := filepath.Join(e.cfg.Dir, "shard-0", "00000000000000000000.log")
	offs := frameOffsets(t, seg)
	if len(offs) != 22 {
		t.Fatalf("%d frames, want 22", len(offs))
	}
	flip(t, seg, offs[7]+frameHeaderSize+3)
	before, _ := os.ReadFile(seg)
	_, err := Open(e.cfg)
	if !errors.Is(err, metalog.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%s at byte %d ", seg, offs[7])) {
		t.Fatalf("Open: %v, want ErrCorrupt naming %s at byte %d", err, seg, offs[7])
	}
	if after, _ := os.ReadFile(seg); string(after) != string(before) {
		t.Fatal("Open modified the corrupt segment")
	}
}

func TestUndecodableRecordRefusesOpen(t *testing.T) {
	e := newEnv(t, 1)
	e.createTopic("t", 1, nil)
	e.c.Close()
	e.c = nil
	// A whole group whose record has a good CRC and an unknown key.
	l, err := metalog.OpenFileLog(filepath.Join(e.cfg.Dir, "shard-0"), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Replay(context.Background(), 0, func(int64, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(context.Background(), [][]byte{{1, 99, 0}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Open(e.cfg); !errors.Is(err, records.ErrBadRecord) {
		t.Fatalf("Open: %v, want errBadRecord", err)
	}
}

func TestGroupCommitUsesOneFsync(t *testing.T) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	e := newEnv(t, 1, withTestLogs(logs, mu), func(c *Config) { c.SnapshotIntervalRecords = -1 })
	top := e.createTopic("t", 4, nil)
	l := logs[0]
	appends0 := l.appends.Load()

	const n = 50
	gate := holdShard(t, e.c.shards[0])
	var wg sync.WaitGroup
	results := make([][]diskless.CommitBatchResult, n)
	for i := range n {
		wg.Go(func() {
			res, err := e.tryCommit(nextKey(), plain(top, int32(i%4), 1), plain(top, int32((i+1)%4), 1))
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	waitQueued(t, e.c.shards[0], n)
	close(gate)
	wg.Wait()
	// One Append is one fsync of the file log
	// (metalog.TestFileLogAppendReplay counts them).
	if got := l.appends.Load() - appends0; got != 1 {
		t.Fatalf("%d appends for one group of %d commits, want 1", got, n)
	}
	want := map[int32]int64{}
	for i, res := range results {
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("commit: %s", resName(r))
			}
		}
		want[int32(i%4)]++
		want[int32((i+1)%4)]++
	}
	for p := range int32(4) {
		r := e.find(top, p, 0, math.MaxInt32)
		if int64(len(r.Runs)) != want[p] || r.HighWatermark != want[p] {
			t.Fatalf("partition %d: %d batches, hwm %d, want %d", p, len(r.Runs), r.HighWatermark, want[p])
		}
	}
}

func TestConcurrentCommits(t *testing.T) {
	e := newEnv(t, 4, func(c *Config) { c.SnapshotIntervalRecords = 50 })
	var topics []diskless.Topic
	for i := range 3 {
		topics = append(topics, e.createTopic(fmt.Sprintf("t%d", i), 4, nil))
	}
	const (
		workers = 16
		files   = 40
	)
	type key struct {
		tp  diskless.TopicPartition
		off int64
	}
	var (
		mu    sync.Mutex
		taken = map[key]bool{}
		total = map[diskless.TopicPartition]int64{}
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			top, p := topics[w%3], int32(w%4)
			pid := int64(1000 + w)
			for i := range files {
				// One idempotent batch of the worker's own producer, and a
				// plain batch to another partition of the same shard.
				batches := []diskless.CommitBatch{idem(top, p, pid, 0, int32(i*3), 3)}
				for q := range int32(4) {
					if q != p && e.c.ShardFor(top.ID, q) == e.c.ShardFor(top.ID, p) {
						batches = append(batches, plain(top, q, 2))
						break
					}
				}
				res, err := e.tryCommit(nextKey(), batches...)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for j, r := range res {
					if r.Err != nil || r.Duplicate {
						t.Errorf("worker %d file %d batch %d: %s dup=%v", w, i, j, resName(r), r.Duplicate)
					}
					tp := diskless.TopicPartition{TopicID: top.ID, Partition: batches[j].Partition}
					k := key{tp, r.BaseOffset}
					if taken[k] {
						t.Errorf("offset %d of %v assigned twice", r.BaseOffset, tp)
					}
					taken[k] = true
					total[tp] += int64(batches[j].LastOffsetDelta) + 1
				}
				mu.Unlock()
			}
		})
	}
	// Readers run alongside.
	stop := make(chan struct{})
	var rg sync.WaitGroup
	rg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, top := range topics {
				for p := range int32(4) {
					r := e.find(top, p, 0, math.MaxInt32)
					end := int64(0)
					for _, b := range r.Runs {
						if b.BaseOffset != end {
							t.Errorf("reader saw a gap at %d", end)
						}
						end = b.LastOffset + 1
					}
					if end != r.HighWatermark {
						t.Errorf("reader: batches end at %d, high watermark %d", end, r.HighWatermark)
					}
				}
			}
		}
	})
	wg.Wait()
	close(stop)
	rg.Wait()
	before := answers(t, e.c)
	for tp, n := range total {
		if r := e.find(diskless.Topic{ID: tp.TopicID}, tp.Partition, 0, 0); r.HighWatermark != n {
			t.Fatalf("%v: high watermark %d, want %d", tp, r.HighWatermark, n)
		}
	}
	e.reopen()
	if after := answers(t, e.c); after != before {
		t.Fatal("answers differ after restart")
	}
}

func TestAppendFailure(t *testing.T) {
	cases := []struct {
		name string
		// written: the failed group reached the disk anyway (a failed
		// fsync whose data survived, a replicated log that timed out).
		written bool
	}{{"nothing written", false}, {"written but reported failed", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs, mu := map[int32]*testLog{}, &sync.Mutex{}
			e := newEnv(t, 1, withTestLogs(logs, mu))
			top := e.createTopic("t", 1, nil)
			e.commit(nextKey(), idem(top, 0, 5, 0, 0, 2))

			logs[0].setFail(func([][]byte) (bool, error) { return tc.written, errors.New("injected disk failure") })
			key := nextKey()
			batches := []diskless.CommitBatch{idem(top, 0, 5, 0, 2, 3), plain(top, 0, 1)}
			if res, err := e.tryCommit(key, batches...); err == nil {
				t.Fatalf("commit with failing log: %+v, want error", res)
			}
			if _, err := e.c.AllocateProducerID(context.Background()); err == nil {
				t.Fatal("producer id block with failing log succeeded")
			}
			// Nothing undurable is visible.
			hwm := e.find(top, 0, 0, 0).HighWatermark
			if want := map[bool]int64{false: 2, true: 6}[tc.written]; hwm != want {
				t.Fatalf("high watermark %d after failed append, want %d", hwm, want)
			}
			logs[0].setFail(nil)

			// The retry of the same file: re-decided, or recognised.
			res := e.commit(key, batches...)
			if r := res[0]; r.Err != nil || r.BaseOffset != 2 || r.Duplicate != tc.written {
				t.Fatalf("retry: %+v", r)
			}
			if r := res[1]; r.Err != nil || r.BaseOffset != 5 || r.Duplicate != tc.written {
				t.Fatalf("retry: %+v", r)
			}
			before := answers(t, e.c)
			e.reopen()
			if after := answers(t, e.c); after != before {
				t.Fatalf("answers differ after restart:\n%s\n%s", before, after)
			}
		})
	}
}

// TestFencedShardStopsServing: a shard whose log another writer took over
// (metalog.ErrFenced: metalogtest.Memory fences a handle when the shard's
// log is opened again, as a Kafka backend's takeover does) fails the
// commit that finds out — nothing of it is answered as committed — and
// then stops serving for good: commits fail with ErrShardFenced, the
// partitions answer NOT_LEADER_OR_FOLLOWER (which producers and consumers
// retry after refreshing their metadata; a failed shard's
// KAFKA_STORAGE_ERROR stays for logs it cannot rebuild from), /healthz
// names the fencing (Err); the other shard goes on (DESIGN §Fencing).
func TestFencedShardStopsServing(t *testing.T) {
	mem := new(metalogtest.Memory)
	e := newEnv(t, 2, func(c *Config) { c.OpenLog = mem.Open })
	top := e.createTopic("t", 4, nil)
	var p0, p1 int32 = -1, -1 // partitions on shards 0 and 1
	for p := range int32(4) {
		if e.c.ShardFor(top.ID, p) == 1 && p1 < 0 {
			p1 = p
		} else if e.c.ShardFor(top.ID, p) == 0 && p0 < 0 {
			p0 = p
		}
	}
	if p0 < 0 || p1 < 0 {
		t.Skip("topic id put all partitions on one shard")
	}
	e.commit(nextKey(), plain(top, p1, 1))
	newOwner, err := mem.Open(1)
	if err != nil {
		t.Fatal(err)
	}
	defer newOwner.Close()
	if res, err := e.tryCommit(nextKey(), plain(top, p1, 1)); !errors.Is(err, metalog.ErrFenced) ||
		!errors.Is(err, diskless.ErrShardFenced) || !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("commit on a fenced shard: %v %+v, want ErrShardFenced with metalog.ErrFenced and NOT_LEADER_OR_FOLLOWER", err, res)
	}
	if err := e.c.Err(); !errors.Is(err, diskless.ErrShardFailed) || !errors.Is(err, metalog.ErrFenced) || !strings.Contains(err.Error(), "shard 1 fenced") {
		t.Fatalf("Err: %v, want the shard failed naming the fencing", err)
	}
	if _, err := e.tryCommit(nextKey(), plain(top, p1, 1)); !errors.Is(err, diskless.ErrShardFenced) ||
		!errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("next commit on the fenced shard: %v, want ErrShardFenced with NOT_LEADER_OR_FOLLOWER", err)
	}
	if r := e.find(top, p1, 0, 0); r.Err != kerr.NotLeaderForPartition {
		t.Fatalf("find on the fenced shard: %s", errName(r.Err))
	}
	if r := e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: p1}, diskless.ListOffsetsLatest); r.Err != kerr.NotLeaderForPartition {
		t.Fatalf("list offsets on the fenced shard: %s", errName(r.Err))
	}
	if r := e.commit(nextKey(), plain(top, p0, 1))[0]; r.Err != nil {
		t.Fatalf("the other shard: %s", resName(r))
	}
	// The new owner sees only what the fenced handle made durable: the
	// shard's partition records and the one commit.
	want := int64(1)
	for p := range int32(4) {
		if e.c.ShardFor(top.ID, p) == 1 {
			want++
		}
	}
	if next, err := newOwner.Replay(t.Context(), 0, func(int64, []byte) error { return nil }); err != nil || next != want {
		t.Fatalf("the new owner's log: next %d, %v; want %d", next, err, want)
	}
}

func TestShardFailsWhenRebuildFails(t *testing.T) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	e := newEnv(t, 2, withTestLogs(logs, mu))
	top := e.createTopic("t", 4, nil)
	var p0, p1 int32 = -1, -1 // partitions on shards 0 and 1
	for p := range int32(4) {
		if e.c.ShardFor(top.ID, p) == 1 && p1 < 0 {
			p1 = p
		} else if e.c.ShardFor(top.ID, p) == 0 && p0 < 0 {
			p0 = p
		}
	}
	if p0 < 0 || p1 < 0 {
		t.Skip("topic id put all partitions on one shard")
	}
	e.commit(nextKey(), plain(top, p1, 1))
	logs[1].setFail(func([][]byte) (bool, error) { return false, errors.New("disk gone") })
	logs[1].mu.Lock()
	logs[1].replayErrs = []error{fmt.Errorf("%w: injected replay failure", metalog.ErrCorrupt)}
	logs[1].mu.Unlock()
	if _, err := e.tryCommit(nextKey(), plain(top, p1, 1)); err == nil {
		t.Fatal("commit succeeded")
	}
	_, err := e.tryCommit(nextKey(), plain(top, p1, 1))
	if !errors.Is(err, diskless.ErrShardFailed) || !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("commit to failed shard: %v", err)
	}
	if r := e.find(top, p1, 0, 0); r.Err != kerr.KafkaStorageError {
		t.Fatalf("find on failed shard: %s", errName(r.Err))
	}
	if r := e.c.ListOffsets(context.Background(), diskless.TopicPartition{TopicID: top.ID, Partition: p1}, diskless.ListOffsetsLatest); r.Err != kerr.KafkaStorageError {
		t.Fatalf("list offsets on failed shard: %s", errName(r.Err))
	}
	// The other shard is unaffected.
	if r := e.commit(nextKey(), plain(top, p0, 1))[0]; r.Err != nil {
		t.Fatalf("healthy shard: %s", resName(r))
	}
	// A restart with a working disk recovers.
	logs[1].failReplay.Store(false)
	e.reopen()
	if r := e.commit(nextKey(), plain(top, p1, 1))[0]; r.Err != nil || r.BaseOffset != 1 {
		t.Fatalf("after restart: %+v", r)
	}
}

// TestCoordinatorErr: Err is nil while every shard serves, names the
// failed shard and its cause (wrapping ErrShardFailed) once a shard could
// not rebuild its state for good (its log corrupt: one that cannot be
// read for now is retried, TestShardHealthRebuildRetrying), is safe to
// call while commits run, and is nil again after a restart on a working
// disk; ErrClosed after Close.
func TestCoordinatorErr(t *testing.T) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	e := newEnv(t, 3, withTestLogs(logs, mu))
	top := e.createTopic("t", 6, nil)
	var p1, p2 int32 = -1, -1 // partitions on shards 1 and 2
	for p := range int32(6) {
		switch e.c.ShardFor(top.ID, p) {
		case 1:
			p1 = p
		case 2:
			p2 = p
		}
	}
	if err := e.c.Err(); err != nil {
		t.Fatalf("Err of a healthy coordinator: %v", err)
	}

	// Health checks run concurrently with commits and the failure.
	stop := make(chan struct{})
	var checks sync.WaitGroup
	for range 4 {
		checks.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := e.c.Err(); err != nil && !errors.Is(err, diskless.ErrShardFailed) {
					t.Errorf("Err: %v", err)
				}
			}
		})
	}
	e.commit(nextKey(), plain(top, p2, 1))
	logs[1].setFail(func([][]byte) (bool, error) { return false, errors.New("disk gone") })
	logs[1].mu.Lock()
	logs[1].replayErrs = []error{fmt.Errorf("%w: injected replay failure", metalog.ErrCorrupt)}
	logs[1].mu.Unlock()
	if _, err := e.tryCommit(nextKey(), plain(top, p1, 1)); err == nil {
		t.Fatal("commit with failing log succeeded")
	}
	e.commit(nextKey(), plain(top, p2, 1))
	close(stop)
	checks.Wait()

	err := e.c.Err()
	if !errors.Is(err, diskless.ErrShardFailed) {
		t.Fatalf("Err with shard 1 failed: %v, want ErrShardFailed", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "shard 1: ") || !strings.Contains(msg, "injected replay failure") ||
		strings.Contains(msg, "shard 0") || strings.Contains(msg, "shard 2") {
		t.Fatalf("Err = %q, want it to name shard 1 and its cause, and no other shard", msg)
	}

	logs[1].setFail(nil)
	e.reopen()
	if err := e.c.Err(); err != nil {
		t.Fatalf("Err after restart: %v", err)
	}
	e.c.Close()
	if err := e.c.Err(); !errors.Is(err, diskless.ErrClosed) {
		t.Fatalf("Err after Close: %v, want ErrClosed", err)
	}
}

func TestProducerIDsUniqueAcrossReopen(t *testing.T) {
	e := newEnv(t, 2)
	seen := map[int64]bool{}
	var mu sync.Mutex
	alloc := func(n int) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range n / 8 {
					id, err := e.c.AllocateProducerID(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if seen[id] || id < 0 {
						t.Errorf("producer id %d handed out twice", id)
					}
					seen[id] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	alloc(1600)
	e.reopen()
	alloc(2400)
	e.reopen()
	alloc(800)
	if len(seen) != 4800 {
		t.Fatalf("%d distinct ids, want 4800", len(seen))
	}
}

func TestCreateTopic(t *testing.T) {
	e := newEnv(t, 3)
	first := e.createTopic("orders", 5, map[string]string{"retention.ms": "1000"})
	if first.ID == (diskless.TopicID{}) || first.Partitions != 5 || first.Config.RetentionMs != 1000 || first.Config.Raw["retention.ms"] != "1000" {
		t.Fatalf("created %+v", first)
	}
	cases := []struct {
		name       string
		topic      string
		partitions int32
		configs    map[string]string
		want       *kerr.Error
		wantConfig bool
	}{
		{"exists", "orders", 1, nil, kerr.TopicAlreadyExists, false},
		{"empty name", "", 1, nil, kerr.InvalidTopicException, false},
		{"dot", ".", 1, nil, kerr.InvalidTopicException, false},
		{"dot dot", "..", 1, nil, kerr.InvalidTopicException, false},
		{"bad character", "a/b", 1, nil, kerr.InvalidTopicException, false},
		{"space", "a b", 1, nil, kerr.InvalidTopicException, false},
		{"too long", strings.Repeat("x", 250), 1, nil, kerr.InvalidTopicException, false},
		{"collides in metrics", "orders_", 1, nil, nil, false},
		{"zero partitions", "z", 0, nil, kerr.InvalidPartitions, false},
		{"too many partitions", "z", MaxPartitionsPerTopic + 1, nil, kerr.InvalidPartitions, false},
		{"bad config value", "z", 1, map[string]string{"retention.ms": "soon"}, nil, true},
		{"unknown config", "z", 1, map[string]string{"no.such.config": "1"}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.c.CreateTopic(context.Background(), tc.topic, tc.partitions, tc.configs)
			if tc.wantConfig {
				var ce interface{ Error() string }
				if err == nil || !strings.Contains(fmt.Sprintf("%T", err), "topicconfig.Error") {
					t.Fatalf("err %v (%T), want *topicconfig.Error", err, err)
				}
				_ = ce
				return
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			var ke *kerr.Error
			if !errors.As(err, &ke) || ke != tc.want {
				t.Fatalf("err %v, want %s", err, tc.want.Message)
			}
		})
	}
	if _, err := e.c.CreateTopic(context.Background(), "orders.", 1, nil); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("'.' vs '_' collision: %v", err)
	}
	max249 := strings.Repeat("y", 249)
	e.createTopic(max249, 1, nil)

	var names []string
	for _, tp := range e.c.Topics() {
		names = append(names, tp.Name)
	}
	if want := []string{"orders", "orders_", max249}; !reflect.DeepEqual(names, want) {
		t.Fatalf("Topics() = %v, want %v", names, want)
	}
	got, ok := e.c.TopicByID(first.ID)
	if !ok || got.Name != "orders" {
		t.Fatalf("TopicByID = %+v %v", got, ok)
	}
	if got.Config.Raw["retention.ms"] != "1000" {
		t.Fatalf("configs: %v", got.Config.Raw)
	}
	// Lookups are on every produce and fetch: they must not allocate.
	if n := testing.AllocsPerRun(100, func() { e.c.Topic("orders") }); n != 0 {
		t.Fatalf("Topic allocates %v times per call", n)
	}
	if _, ok := e.c.Topic("nope"); ok {
		t.Fatal("Topic(nope) found")
	}
	// Every partition is on the shard ShardFor names, and starts empty.
	for p := range first.Partitions {
		if r := e.find(first, p, 0, 0); r.Err != nil || r.HighWatermark != 0 {
			t.Fatalf("partition %d: %+v", p, r)
		}
	}
	e.reopen()
	if again, ok := e.c.Topic("orders"); !ok || again.ID != first.ID || !reflect.DeepEqual(again.Config, first.Config) {
		t.Fatalf("after restart: %+v", again)
	}
}

// TestCreateTopicCrashBeforeCatalog: partition records durable, catalog
// record not: the topic must not exist, before or after a restart, and can
// be created again.
func TestCreateTopicCrashBeforeCatalog(t *testing.T) {
	logs, mu := map[int32]*testLog{}, &sync.Mutex{}
	e := newEnv(t, 2, withTestLogs(logs, mu))
	logs[0].setFail(func(bodies [][]byte) (bool, error) {
		for _, b := range bodies {
			if b[1] == byte(records.KeyTopicConfig) {
				return false, errors.New("crash before the catalog record")
			}
		}
		return false, nil
	})
	if _, err := e.c.CreateTopic(context.Background(), "t", 8, nil); err == nil {
		t.Fatal("CreateTopic succeeded")
	}
	if _, ok := e.c.Topic("t"); ok {
		t.Fatal("half-created topic visible")
	}
	// The orphan partitions are durable but ignored.
	orphans := 0
	for _, s := range e.c.shards {
		s.mu.RLock()
		orphans += len(s.mu.st.partitions)
		s.mu.RUnlock()
	}
	if orphans != 8 {
		t.Fatalf("%d partition records, want 8", orphans)
	}
	e.reopen()
	if _, ok := e.c.Topic("t"); ok {
		t.Fatal("half-created topic visible after restart")
	}
	top := e.createTopic("t", 2, nil)
	if r := e.commit(nextKey(), plain(top, 1, 1))[0]; r.Err != nil {
		t.Fatalf("commit to re-created topic: %s", resName(r))
	}
}

func TestConfigValidate(t *testing.T) {
	valid := Config{Dir: "/tmp/x", NumShards: 1}
	cases := []struct {
		name   string
		mutate func(*Config)
		key    string // expected in the error; "" means valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no dir", func(c *Config) { c.Dir = "" }, "Dir"},
		{"no dir but OpenLog", func(c *Config) {
			c.Dir = ""
			c.OpenLog = func(int32) (metalog.Log, error) { return nil, nil }
		}, ""},
		{"zero shards", func(c *Config) { c.NumShards = 0 }, "diskless.metadata.topic.num.partitions"},
		{"too many shards", func(c *Config) { c.NumShards = MaxShards + 1 }, "diskless.metadata.topic.num.partitions"},
		{"negative node id", func(c *Config) { c.NodeID = -1 }, "node.id"},
		{"negative expiration", func(c *Config) { c.ProducerIDExpirationMs = -5 }, "producer.id.expiration.ms"},
		{"bad snapshot interval", func(c *Config) { c.SnapshotIntervalRecords = -2 }, "SnapshotIntervalRecords"},
		{"negative deletion delay", func(c *Config) { c.FileDeletionDelay = -time.Second }, "diskless.file.deletion.delay.ms"},
		{"short orphan grace", func(c *Config) { c.OrphanScanGracePeriod = time.Minute }, "diskless.coordinator.orphan.scan.grace.period.ms"},
		{"minimal orphan grace", func(c *Config) { c.OrphanScanGracePeriod = MinOrphanScanGracePeriod }, ""},
		{"bad key prefix", func(c *Config) { c.ObjectKeyPrefix = "wal/" }, "diskless.object.key.prefix"},
		{"nested key prefix", func(c *Config) { c.ObjectKeyPrefix = "a/b" }, ""},
		{"loops disabled", func(c *Config) { c.RetentionCheckInterval, c.OrphanScanInterval = -1, -1 }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mutate(&c)
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.key)
			}
			if _, err := Open(c); err == nil {
				t.Fatal("Open accepted an invalid config")
			}
		})
	}
}

func TestOpenRefusesShardCountChange(t *testing.T) {
	t.Run("fewer shards", func(t *testing.T) {
		e := newEnv(t, 3)
		e.c.Close()
		e.c = nil
		cfg := e.cfg
		cfg.NumShards = 2
		if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "diskless.metadata.topic.num.partitions") {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("more shards", func(t *testing.T) {
		e := newEnv(t, 1)
		e.createTopic("t", 8, nil)
		e.c.Close()
		e.c = nil
		cfg := e.cfg
		cfg.NumShards = 4
		if _, err := Open(cfg); err == nil || !strings.Contains(err.Error(), "diskless.metadata.topic.num.partitions") {
			t.Fatalf("Open: %v", err)
		}
	})
}

func TestCloseStopsEverything(t *testing.T) {
	e := newEnv(t, 2)
	top := e.createTopic("t", 1, nil)
	if err := e.c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := e.tryCommit(nextKey(), plain(top, 0, 1)); !errors.Is(err, diskless.ErrClosed) {
		t.Fatalf("commit after close: %v", err)
	}
	if _, err := e.c.AllocateProducerID(context.Background()); !errors.Is(err, diskless.ErrClosed) {
		t.Fatalf("allocate after close: %v", err)
	}
	if _, err := e.c.CreateTopic(context.Background(), "u", 1, nil); !errors.Is(err, diskless.ErrClosed) {
		t.Fatalf("create after close: %v", err)
	}
	e.c = nil
}

func TestCloseWithQueuedRequests(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	gate := holdShard(t, e.c.shards[0])
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			_, err := e.tryCommit(nextKey(), plain(top, 0, 1))
			errs <- err
		}()
	}
	waitQueued(t, e.c.shards[0], 20)
	closed := make(chan error)
	go func() { closed <- e.c.Close() }()
	time.Sleep(10 * time.Millisecond)
	close(gate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := <-errs; err != nil && !errors.Is(err, diskless.ErrClosed) {
			t.Fatalf("queued commit: %v", err)
		}
	}
	e.c = nil
}

// TestSnapshotEquivalence: the state loaded from a snapshot plus the
// records after it equals the state replayed from record 0, also after
// closed files were forgotten and their slots reused.
func TestSnapshotEquivalence(t *testing.T) {
	e := newEnv(t, 2, func(c *Config) { c.SnapshotIntervalRecords = -1 })
	workload(t, e, 30)
	if n := churnFiles(t, e, 24); n == 0 {
		t.Fatal("no file forgotten")
	}
	full := stateBytes(e.c)
	e.c.Close()
	e.c = nil
	// Copy the logs, snapshot the copy's state at its current end, and
	// check a load from the snapshot gives the same bytes.
	for i, s := range full {
		l, err := metalog.OpenFileLog(filepath.Join(e.cfg.Dir, fmt.Sprintf("shard-%d", i)), discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		next, err := l.Replay(ctx, 0, func(int64, []byte) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if err := l.PrepareSnapshot(ctx, next); err != nil {
			t.Fatal(err)
		}
		if err := l.WriteSnapshot(ctx, next, s); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateBefore(ctx, next); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	e.open()
	if got := stateBytes(e.c); !reflect.DeepEqual(got, full) {
		t.Fatal("state from snapshot differs from replayed state")
	}
	for i, s := range full {
		st := newState(int32(i)+1, DefaultProducerIDExpirationMs, discardLogger())
		if err := st.decodeSnapshot(s); !errors.Is(err, errBadSnapshot) {
			t.Fatalf("snapshot of shard %d loaded into shard %d: %v", i, i+1, err)
		}
	}
}

func TestSnapshotFileRemovedOldSegments(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = 4 })
	top := e.createTopic("t", 1, nil)
	for range 20 {
		e.commit(nextKey(), plain(top, 0, 1))
	}
	// Close joins the snapshot being written, which deletes what it
	// supersedes.
	e.c.Close()
	e.c = nil
	entries, _ := os.ReadDir(filepath.Join(e.cfg.Dir, "shard-0"))
	if len(entries) != 2 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		t.Fatalf("files %v, want one segment and one snapshot", names)
	}
}
