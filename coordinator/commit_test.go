package coordinator

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

func TestOffsetsDenseFromZero(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 2, nil)
	var (
		next  = map[int32]int64{}
		lastT int64
	)
	for file := range 5 {
		batches := []diskless.CommitBatch{plain(top, 0, 3), plain(top, 1, 1), plain(top, 0, 10)}
		res := e.commit(nextKey(), batches...)
		for i, r := range res {
			p := batches[i].Partition
			if r.Err != nil || r.BaseOffset != next[p] || r.Duplicate || r.LogStartOffset != 0 {
				t.Fatalf("file %d batch %d: %+v, want base offset %d", file, i, r, next[p])
			}
			next[p] += int64(batches[i].LastOffsetDelta) + 1
			if r.LogAppendTime != res[0].LogAppendTime {
				t.Fatalf("file %d: two log-append times in one file: %d, %d", file, r.LogAppendTime, res[0].LogAppendTime)
			}
		}
		if res[0].LogAppendTime < lastT {
			t.Fatalf("log-append time went back from %d to %d", lastT, res[0].LogAppendTime)
		}
		lastT = res[0].LogAppendTime
		// The clock going backwards never makes append times go back.
		e.clock.Advance(-time.Duration(file) * time.Second)
	}
	for p, hwm := range next {
		r := e.find(top, p, 0, math.MaxInt32)
		if r.Err != nil || r.HighWatermark != hwm {
			t.Fatalf("partition %d: %+v, want high watermark %d", p, r, hwm)
		}
		want := int64(0)
		for _, b := range r.Runs {
			if b.BaseOffset != want {
				t.Fatalf("partition %d: batch at %d, want %d (gap or overlap)", p, b.BaseOffset, want)
			}
			want = b.LastOffset + 1
		}
		if want != hwm {
			t.Fatalf("partition %d: batches end at %d, high watermark %d", p, want, hwm)
		}
	}
}

func TestLogAppendTimeIsClockAtCommit(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	r := e.commit(nextKey(), plain(top, 0, 1))[0]
	if r.LogAppendTime != e.clock.Ms() {
		t.Fatalf("log-append time %d, clock %d", r.LogAppendTime, e.clock.Ms())
	}
	e.clock.Advance(-time.Hour)
	r2 := e.commit(nextKey(), plain(top, 0, 1))[0]
	if r2.LogAppendTime != r.LogAppendTime {
		t.Fatalf("after the clock went back: %d, want %d", r2.LogAppendTime, r.LogAppendTime)
	}
}

// step is one batch of an idempotence scenario and its expected answer.
type step struct {
	epoch   int16
	baseSeq int32
	n       int32
	// sameFile puts the batch in the same file as the previous step.
	sameFile bool
	// advance moves the clock before the step.
	advance time.Duration
	want    *kerr.Error
	// dupOf is the index of the step whose offsets a duplicate gets; -1
	// for a new batch.
	dupOf int
}

func TestIdempotentProducer(t *testing.T) {
	ok := func(epoch int16, seq, n int32) step { return step{epoch: epoch, baseSeq: seq, n: n, dupOf: -1} }
	fail := func(epoch int16, seq, n int32, err *kerr.Error) step {
		return step{epoch: epoch, baseSeq: seq, n: n, want: err, dupOf: -1}
	}
	dup := func(epoch int16, seq, n int32, of int) step { return step{epoch: epoch, baseSeq: seq, n: n, dupOf: of} }
	same := func(s step) step { s.sameFile = true; return s }
	after := func(d time.Duration, s step) step { s.advance = d; return s }
	const expiry = DefaultProducerIDExpirationMs * int64(time.Millisecond)

	cases := []struct {
		name  string
		steps []step
	}{
		{"new producer accepts any first sequence", []step{ok(0, 17, 3), ok(0, 20, 1)}},
		{"continuing sequence", []step{ok(0, 0, 5), ok(0, 5, 5), ok(0, 10, 1)}},
		{"duplicate of the last batch", []step{ok(0, 0, 5), dup(0, 0, 5, 0)}},
		{"duplicate of the fifth-last batch", []step{
			ok(0, 0, 1), ok(0, 1, 1), ok(0, 2, 1), ok(0, 3, 1), ok(0, 4, 1), dup(0, 0, 1, 0)}},
		{"batch older than the window is out of order", []step{
			ok(0, 0, 1), ok(0, 1, 1), ok(0, 2, 1), ok(0, 3, 1), ok(0, 4, 1), ok(0, 5, 1),
			fail(0, 0, 1, kerr.OutOfOrderSequenceNumber)}},
		{"duplicate needs exact sequence range", []step{ok(0, 0, 5), fail(0, 0, 4, kerr.OutOfOrderSequenceNumber)}},
		{"gap is out of order", []step{ok(0, 0, 5), fail(0, 6, 1, kerr.OutOfOrderSequenceNumber)}},
		{"rejected batch changes nothing", []step{
			ok(0, 0, 5), fail(0, 6, 1, kerr.OutOfOrderSequenceNumber), ok(0, 5, 1)}},
		{"older epoch is fenced", []step{ok(3, 0, 1), fail(2, 1, 1, kerr.InvalidProducerEpoch)}},
		{"newer epoch resets at 0", []step{ok(1, 0, 5), ok(2, 0, 1), ok(2, 1, 1), fail(1, 2, 1, kerr.InvalidProducerEpoch)}},
		{"newer epoch must start at 0", []step{ok(1, 0, 5), fail(2, 5, 1, kerr.OutOfOrderSequenceNumber)}},
		{"newer epoch forgets old batches", []step{ok(1, 0, 5), ok(2, 0, 5), dup(2, 0, 5, 1)}},
		{"sequence wraps at INT32_MAX", []step{
			ok(0, math.MaxInt32-1, 2), ok(0, 0, 3), dup(0, math.MaxInt32-1, 2, 0)}},
		{"batch spanning the wrap", []step{ok(0, math.MaxInt32-1, 4), ok(0, 2, 1)}},
		{"duplicate within the same file", []step{ok(0, 0, 5), same(dup(0, 0, 5, 0))}},
		{"sequence continues within the same file", []step{ok(0, 0, 5), same(ok(0, 5, 5)), same(dup(0, 5, 5, 1))}},
		{"out of order within the same file", []step{ok(0, 0, 5), same(fail(0, 7, 1, kerr.OutOfOrderSequenceNumber))}},
		{"state kept until expiry", []step{
			ok(0, 0, 5), after(time.Duration(expiry)-time.Millisecond, fail(0, 9, 1, kerr.OutOfOrderSequenceNumber))}},
		{"expired producer accepts any sequence", []step{
			ok(0, 0, 5), after(time.Duration(expiry), ok(0, 9, 1)), fail(0, 20, 1, kerr.OutOfOrderSequenceNumber)}},
		{"expired producer accepts an older epoch", []step{ok(5, 0, 5), after(time.Duration(expiry)+time.Hour, ok(1, 3, 1))}},
		{"activity refreshes expiry", []step{
			ok(0, 0, 1), after(time.Duration(expiry)/2, ok(0, 1, 1)),
			after(time.Duration(expiry)/2+time.Second, fail(0, 7, 1, kerr.OutOfOrderSequenceNumber))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			top := e.createTopic("t", 1, nil)
			runSteps(t, e, top, tc.steps)
		})
	}
}

// runSteps commits the steps (grouping sameFile steps into one file) and
// checks every answer; results[i] is step i's answer.
func runSteps(t *testing.T, e *env, top diskless.Topic, steps []step) []diskless.CommitBatchResult {
	t.Helper()
	const pid = 7
	var results []diskless.CommitBatchResult
	hwm := int64(0)
	for i := 0; i < len(steps); {
		j := i + 1
		for j < len(steps) && steps[j].sameFile {
			j++
		}
		e.clock.Advance(steps[i].advance)
		var batches []diskless.CommitBatch
		for _, s := range steps[i:j] {
			batches = append(batches, idem(top, 0, pid, s.epoch, s.baseSeq, s.n))
		}
		results = append(results, e.commit(nextKey(), batches...)...)
		for k := i; k < j; k++ {
			s, r := steps[k], results[k]
			switch {
			case s.want != nil:
				if r.Err != s.want || r.BaseOffset != -1 {
					t.Fatalf("step %d: %s (base %d), want %s", k, resName(r), r.BaseOffset, s.want.Message)
				}
			case s.dupOf >= 0:
				o := results[s.dupOf]
				if r.Err != nil || !r.Duplicate || r.BaseOffset != o.BaseOffset || r.LogAppendTime != o.LogAppendTime {
					t.Fatalf("step %d: %+v, want duplicate of step %d %+v", k, r, s.dupOf, o)
				}
			default:
				if r.Err != nil || r.Duplicate || r.BaseOffset != hwm {
					t.Fatalf("step %d: %s dup=%v base %d, want NONE at %d", k, resName(r), r.Duplicate, r.BaseOffset, hwm)
				}
				hwm += int64(s.n)
			}
		}
		i = j
	}
	if got := e.find(top, 0, 0, 0).HighWatermark; got != hwm {
		t.Fatalf("high watermark %d, want %d (duplicates must not be stored)", got, hwm)
	}
	return results
}

func TestDuplicateDetectionSurvivesRestart(t *testing.T) {
	for _, snapshots := range []int64{-1, 1} {
		t.Run(map[int64]string{-1: "replay", 1: "snapshot"}[snapshots], func(t *testing.T) {
			e := newEnv(t, 1, func(c *Config) { c.SnapshotIntervalRecords = snapshots })
			top := e.createTopic("t", 1, nil)
			first := e.commit(nextKey(), idem(top, 0, 9, 1, 0, 4), idem(top, 0, 9, 1, 4, 4))
			e.reopen()
			res := e.commit(nextKey(), idem(top, 0, 9, 1, 4, 4), idem(top, 0, 9, 1, 8, 1), idem(top, 0, 9, 0, 9, 1))
			if r := res[0]; !r.Duplicate || r.BaseOffset != first[1].BaseOffset || r.LogAppendTime != first[1].LogAppendTime {
				t.Fatalf("retry after restart: %+v, want duplicate of %+v", r, first[1])
			}
			if r := res[1]; r.Err != nil || r.BaseOffset != 8 {
				t.Fatalf("next batch after restart: %+v", r)
			}
			if r := res[2]; r.Err != kerr.InvalidProducerEpoch {
				t.Fatalf("old epoch after restart: %s", resName(r))
			}
		})
	}
}

func TestProducerExpirySurvivesRestart(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.ProducerIDExpirationMs = 1000 })
	top := e.createTopic("t", 1, nil)
	e.commit(nextKey(), idem(top, 0, 3, 0, 0, 1))
	e.reopen()
	if r := e.commit(nextKey(), idem(top, 0, 3, 0, 5, 1))[0]; r.Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("before expiry: %s", resName(r))
	}
	e.clock.Advance(1000 * time.Millisecond)
	if r := e.commit(nextKey(), idem(top, 0, 3, 0, 5, 1))[0]; r.Err != nil {
		t.Fatalf("after expiry: %s", resName(r))
	}
}

func TestProducerSweepDropsExpiredState(t *testing.T) {
	e := newEnv(t, 1, func(c *Config) { c.ProducerIDExpirationMs = 1000 })
	top := e.createTopic("t", 1, nil)
	for pid := range int64(10) {
		e.commit(nextKey(), idem(top, 0, pid, 0, 0, 1))
	}
	e.clock.Advance(2 * producerSweepIntervalMs * time.Millisecond)
	e.commit(nextKey(), idem(top, 0, 100, 0, 0, 1))
	s := e.c.shards[0]
	s.mu.RLock()
	n := len(s.mu.st.partitions[diskless.TopicPartition{TopicID: top.ID, Partition: 0}].producers)
	s.mu.RUnlock()
	if n != 1 {
		t.Fatalf("%d producer states after sweep, want 1", n)
	}
}

func TestCommitPerBatchErrors(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 2, nil)
	unknown := diskless.Topic{ID: diskless.TopicID{9, 9, 9}}
	bad := func(f func(*diskless.CommitBatch)) diskless.CommitBatch {
		b := plain(top, 0, 1)
		f(&b)
		return b
	}
	cases := []struct {
		name string
		b    diskless.CommitBatch
		want *kerr.Error
	}{
		{"ok", plain(top, 1, 2), nil},
		{"unknown topic", plain(unknown, 0, 1), kerr.UnknownTopicOrPartition},
		{"partition out of range", plain(top, 2, 1), kerr.UnknownTopicOrPartition},
		{"negative partition", plain(top, -1, 1), kerr.UnknownTopicOrPartition},
		{"magic 1", bad(func(b *diskless.CommitBatch) { b.Magic = 1 }), kerr.InvalidRecord},
		{"negative last offset delta", bad(func(b *diskless.CommitBatch) { b.LastOffsetDelta = -1 }), kerr.InvalidRecord},
		{"zero size", bad(func(b *diskless.CommitBatch) { b.ByteSize = -5 }), kerr.InvalidRecord},
		{"timestamp type 2", bad(func(b *diskless.CommitBatch) { b.TimestampType = 2 }), kerr.InvalidRecord},
		{"idempotent without sequence", bad(func(b *diskless.CommitBatch) { b.ProducerID, b.BaseSequence = 5, -1 }), kerr.InvalidRecord},
		{"last sequence mismatch", bad(func(b *diskless.CommitBatch) { b.ProducerID, b.BaseSequence, b.LastSequence = 5, 0, 3 }), kerr.InvalidRecord},
	}
	var batches []diskless.CommitBatch
	for _, tc := range cases {
		batches = append(batches, tc.b)
	}
	req := commitRequest(e.c, nextKey(), batches...)
	req.Batches[6].ByteOffset = 0 // zero-size batch: keep the file size valid
	res, err := e.c.CommitFile(context.Background(), 0, req)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		if res[i].Err != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, resName(res[i]), errName(tc.want))
		}
	}
	// A batch past the end of the file is refused too.
	req = commitRequest(e.c, nextKey(), plain(top, 0, 1))
	req.FileSize = 50
	if res, _ := e.c.CommitFile(context.Background(), 0, req); res[0].Err != kerr.InvalidRecord {
		t.Fatalf("batch past end of file: %s", resName(res[0]))
	}
}

func TestCommitRequestValidation(t *testing.T) {
	e := newEnv(t, 2)
	top := e.createTopic("t", 1, nil)
	shard := e.c.ShardFor(top.ID, 0)
	valid := func() *diskless.CommitFileRequest { return commitRequest(e.c, nextKey(), plain(top, 0, 1)) }
	cases := []struct {
		name   string
		shard  int32
		mutate func(*diskless.CommitFileRequest)
	}{
		{"shard out of range", 2, func(*diskless.CommitFileRequest) {}},
		{"negative shard", -1, func(*diskless.CommitFileRequest) {}},
		{"empty key", shard, func(r *diskless.CommitFileRequest) { r.ObjectKey = "" }},
		{"key too long", shard, func(r *diskless.CommitFileRequest) { r.ObjectKey = string(make([]byte, diskless.MaxObjectKeyBytes+1)) }},
		{"format", shard, func(r *diskless.CommitFileRequest) { r.ObjectFormat = 2 }},
		{"negative size", shard, func(r *diskless.CommitFileRequest) { r.FileSize = -1 }},
		{"owners miss shard", shard, func(r *diskless.CommitFileRequest) { r.OwnerIDs = []int32{1 - shard} }},
		{"owners unsorted", shard, func(r *diskless.CommitFileRequest) { r.OwnerIDs = []int32{1, 0} }},
		{"too many batches", shard, func(r *diskless.CommitFileRequest) {
			r.Batches = make([]diskless.CommitBatch, diskless.MaxCommitBatches+1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := valid()
			tc.mutate(r)
			if _, err := e.c.CommitFile(context.Background(), tc.shard, r); !errors.Is(err, diskless.ErrInvalidCommit) {
				t.Fatalf("err %v, want ErrInvalidCommit", err)
			}
		})
	}
	if _, err := e.c.CommitFile(context.Background(), shard, nil); !errors.Is(err, diskless.ErrInvalidCommit) {
		t.Fatalf("nil request: %v", err)
	}
}

func TestCommitIdempotentByObjectKey(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	key := nextKey()
	batches := []diskless.CommitBatch{idem(top, 0, 1, 0, 0, 2), idem(top, 0, 1, 0, 9, 1), plain(top, 0, 3)}
	first := e.commit(key, batches...)
	if first[1].Err != kerr.OutOfOrderSequenceNumber {
		t.Fatalf("setup: %s", resName(first[1]))
	}
	e.clock.Advance(time.Minute)
	again := e.commit(key, batches...)
	for i := range first {
		if again[i] != first[i] {
			t.Fatalf("repeat %d: %+v, want %+v", i, again[i], first[i])
		}
	}
	if hwm := e.find(top, 0, 0, 0).HighWatermark; hwm != 5 {
		t.Fatalf("high watermark %d after a repeated commit, want 5", hwm)
	}

	// After a restart the answer is rebuilt from the committed file.
	e.reopen()
	rebuilt := e.commit(key, batches...)
	for _, i := range []int{0, 2} {
		want := first[i]
		want.Duplicate = true
		if rebuilt[i] != want {
			t.Fatalf("after restart %d: %+v, want %+v", i, rebuilt[i], want)
		}
	}
	if rebuilt[1].Err != kerr.KafkaStorageError {
		t.Fatalf("refused batch after restart: %s", resName(rebuilt[1]))
	}
	if hwm := e.find(top, 0, 0, 0).HighWatermark; hwm != 5 {
		t.Fatalf("high watermark %d after restart and repeat, want 5", hwm)
	}

	// The same key with other batches is answered from the file too: only
	// batches the file holds are known.
	req := commitRequest(e.c, key, batches[2], plain(top, 0, 1))
	req.Batches[0].ByteOffset = 200
	res, err := e.c.CommitFile(context.Background(), 0, req)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].BaseOffset != first[2].BaseOffset || !res[0].Duplicate || res[1].Err != kerr.KafkaStorageError {
		t.Fatalf("same key, other batches: %+v", res)
	}
}

func TestCommitSameKeyTwiceInOneGroup(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	gate := holdShard(t, e.c.shards[0])
	key := nextKey()
	req := commitRequest(e.c, key, plain(top, 0, 2))
	out := make(chan []diskless.CommitBatchResult, 2)
	for range 2 {
		go func() {
			res, err := e.c.CommitFile(context.Background(), 0, req)
			if err != nil {
				t.Error(err)
			}
			out <- res
		}()
	}
	waitQueued(t, e.c.shards[0], 2)
	close(gate)
	a, b := <-out, <-out
	if a[0] != b[0] || a[0].BaseOffset != 0 {
		t.Fatalf("answers %+v and %+v", a[0], b[0])
	}
	if hwm := e.find(top, 0, 0, 0).HighWatermark; hwm != 2 {
		t.Fatalf("high watermark %d, want 2", hwm)
	}
}

// holdShard makes s's driver block until the returned channel is closed,
// by queuing an admin request whose build waits on it.
func holdShard(t *testing.T, s *shard) chan struct{} {
	t.Helper()
	gate := make(chan struct{})
	started := make(chan struct{})
	go s.do(&request{ctx: context.Background(), build: func(*state) ([]records.Record, error) {
		close(started)
		<-gate
		return nil, nil
	}})
	<-started
	return gate
}

func waitQueued(t *testing.T, s *shard, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.reqs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests queued, want %d", len(s.reqs), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCommitContextDoneBeforeTaken(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("t", 1, nil)
	gate := holdShard(t, e.c.shards[0])
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := e.c.CommitFile(ctx, 0, commitRequest(e.c, nextKey(), plain(top, 0, 1)))
		errc <- err
	}()
	waitQueued(t, e.c.shards[0], 1)
	cancel()
	close(gate)
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if hwm := e.find(top, 0, 0, 0).HighWatermark; hwm != 0 {
		t.Fatalf("cancelled commit was applied: high watermark %d", hwm)
	}
}

func TestLogAppendTimeTopic(t *testing.T) {
	e := newEnv(t, 1)
	top := e.createTopic("lat", 1, map[string]string{topicconfig.TimestampType: topicconfig.TimestampTypeLogAppend})
	if !top.Config.LogAppendTime {
		t.Fatal("topic config not parsed")
	}
	b := withMaxTs(plain(top, 0, 1), 5)
	b.TimestampType = batch.TimestampLogAppendTime
	r := e.commit(nextKey(), b)[0]
	got := e.find(top, 0, 0, 0).Runs[0]
	if got.TimestampType != batch.TimestampLogAppendTime || got.LogAppendTime != r.LogAppendTime ||
		got.BatchMaxTimestamp != 5 || got.MaxTimestamp() != r.LogAppendTime {
		t.Fatalf("coordinate %+v, commit %+v", got, r)
	}
}

// TestCommitRecordLayout checks that record 102 built by commitFile (one
// array per level, sub-sliced) encodes to the bytes of the record built
// batch by batch — topics in order of their first accepted batch,
// partitions within a topic likewise, batches in request order — over
// files mixing interleaved topics and partitions, refused batches and
// duplicates, grouped or not, with the scratch reused from file to file.
func TestCommitRecordLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	topics := []diskless.Topic{{ID: diskless.TopicID{1}, Name: "a", Partitions: 3}, {ID: diskless.TopicID{2}, Name: "b", Partitions: 2}, {ID: diskless.TopicID{3}, Name: "c", Partitions: 1}}
	for _, top := range topics {
		for p := range top.Partitions {
			if err := st.apply(&records.PartitionCreated{TopicID: top.ID, TopicName: top.Name, Partition: p}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Partition c/0 is in the state but not in the catalog.
	known := func(id diskless.TopicID, p int32) *kerr.Error {
		if id == (diskless.TopicID{3}) {
			return kerr.UnknownTopicOrPartition
		}
		return nil
	}
	seq := map[diskless.TopicPartition]int32{}
	for file := range 30 {
		req := &diskless.CommitFileRequest{ObjectKey: nextKey(), ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment, FileSize: 1 << 20, OwnerIDs: []int32{0}}
		n := 1 + r.IntN(60)
		for i := range n {
			top := topics[r.IntN(len(topics))]
			p := r.Int32N(top.Partitions)
			if r.IntN(8) == 0 {
				p = 7 // unknown partition
			}
			tp := diskless.TopicPartition{TopicID: top.ID, Partition: p}
			b := plain(top, p, 1+r.Int32N(5))
			b.ByteOffset, b.ByteSize = int32(i)*100, 100
			switch r.IntN(6) {
			case 0:
				b.Magic = 1 // refused
			case 1, 2:
				b = idem(top, p, int64(p), 0, seq[tp], b.LastOffsetDelta+1)
				b.ByteOffset, b.ByteSize = int32(i)*100, 100
				if r.IntN(4) > 0 || seq[tp] == 0 {
					seq[tp] += b.LastOffsetDelta + 1
				} // else a duplicate of the previous one, or out of order
			}
			req.Batches = append(req.Batches, b)
		}
		if file%2 == 0 {
			// Grouped by topic and partition, as a WAL object is: the
			// accepted batches are then already in the record's order.
			slices.SortStableFunc(req.Batches, func(x, y diskless.CommitBatch) int {
				return diskless.ComparePartitions(diskless.TopicPartition{TopicID: x.TopicID, Partition: x.Partition}, diskless.TopicPartition{TopicID: y.TopicID, Partition: y.Partition})
			})
		}
		results, rec, parts := st.commitFile(req, int64(1000+file), known)

		want := &records.FileCommitted{ObjectKey: req.ObjectKey, ObjectFormat: req.ObjectFormat, FileSize: req.FileSize,
			UploaderBrokerID: req.UploaderBrokerID, OwnerIDs: req.OwnerIDs}
		topicIdx, partIdx := map[diskless.TopicID]int{}, map[diskless.TopicPartition]int{}
		for i, res := range results {
			if res.Err != nil || res.Duplicate {
				continue
			}
			b := &req.Batches[i]
			ti, ok := topicIdx[b.TopicID]
			if !ok {
				ti = len(want.Topics)
				topicIdx[b.TopicID] = ti
				want.Topics = append(want.Topics, records.FileTopic{TopicID: b.TopicID})
			}
			ft := &want.Topics[ti]
			pi, ok := partIdx[diskless.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}]
			if !ok {
				pi = len(ft.Partitions)
				partIdx[diskless.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}] = pi
				ft.Partitions = append(ft.Partitions, records.FilePartition{Partition: b.Partition})
			}
			ft.Partitions[pi].Batches = append(ft.Partitions[pi].Batches, acceptedBatch(b, res.BaseOffset, res.LogAppendTime))
		}
		if len(want.Topics) == 0 {
			if rec != nil || parts != nil {
				t.Fatalf("file %d: nothing accepted, record %+v", file, rec)
			}
			continue
		}
		if rec == nil {
			t.Fatalf("file %d: no record", file)
		}
		if got, exp := records.Append(nil, rec), records.Append(nil, want); string(got) != string(exp) {
			t.Fatalf("file %d: record differs from the batch-by-batch layout\n got %+v\nwant %+v", file, rec, want)
		}
		if len(parts) != len(partIdx) {
			t.Fatalf("file %d: %d partitions touched, want %d", file, len(parts), len(partIdx))
		}
		// (records.TestEncodeSizeBound holds Encode's size bound.)
		if bodies := records.Encode([]records.Record{rec, &records.RecordsDeleted{}}); string(bodies[0]) != string(records.Append(nil, want)) {
			t.Fatalf("file %d: records.Encode differs from records.Append", file)
		}
	}
}

// TestCommitFindsPartitions: commitFile's per-topic partition lists agree
// with the partition map through creation, topic deletion and snapshot
// loading, including a partition numbered beyond what CreateTopic makes
// (only a foreign log holds one), which is found through the map.
func TestCommitFindsPartitions(t *testing.T) {
	a, b := diskless.Topic{ID: diskless.TopicID{1}, Name: "a"}, diskless.Topic{ID: diskless.TopicID{2}, Name: "b"}
	st := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	for _, r := range []records.Record{
		&records.PartitionCreated{TopicID: a.ID, TopicName: "a", Partition: 5},
		&records.PartitionCreated{TopicID: a.ID, TopicName: "a", Partition: 1},
		&records.PartitionCreated{TopicID: a.ID, TopicName: "a", Partition: MaxPartitionsPerTopic + 3},
		&records.PartitionCreated{TopicID: b.ID, TopicName: "b", Partition: 0},
	} {
		if err := st.apply(r); err != nil {
			t.Fatal(err)
		}
	}
	known := func(diskless.TopicID, int32) *kerr.Error { return nil }
	commit := func(st *state, want map[diskless.TopicPartition]bool) {
		t.Helper()
		req := &diskless.CommitFileRequest{ObjectKey: nextKey(), ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment, FileSize: 1 << 20, OwnerIDs: []int32{0}}
		for _, tp := range []diskless.TopicPartition{{TopicID: a.ID, Partition: 5}, {TopicID: a.ID, Partition: 0}, {TopicID: a.ID, Partition: 1}, {TopicID: a.ID, Partition: MaxPartitionsPerTopic + 3}, {TopicID: a.ID, Partition: 6}, {TopicID: b.ID, Partition: 0}, {TopicID: diskless.TopicID{3}, Partition: 0}} {
			req.Batches = append(req.Batches, plain(diskless.Topic{ID: tp.TopicID}, tp.Partition, 1))
			req.Batches[len(req.Batches)-1].ByteSize = 1
		}
		res, _, _ := st.commitFile(req, 1000, known)
		for i, r := range res {
			tp := diskless.TopicPartition{TopicID: req.Batches[i].TopicID, Partition: req.Batches[i].Partition}
			if (r.Err == nil) != want[tp] {
				t.Fatalf("partition %v: %v, want found %v", tp, r.Err, want[tp])
			}
		}
	}
	found := map[diskless.TopicPartition]bool{{TopicID: a.ID, Partition: 5}: true, {TopicID: a.ID, Partition: 1}: true, {TopicID: a.ID, Partition: MaxPartitionsPerTopic + 3}: true, {TopicID: b.ID, Partition: 0}: true}
	commit(st, found)
	again := newState(0, DefaultProducerIDExpirationMs, discardLogger())
	if err := again.decodeSnapshot(st.appendSnapshot(nil)); err != nil {
		t.Fatal(err)
	}
	commit(again, found)
	if err := st.apply(&records.TopicDeleted{TopicID: a.ID}); err != nil {
		t.Fatal(err)
	}
	commit(st, map[diskless.TopicPartition]bool{{TopicID: b.ID, Partition: 0}: true})
}
