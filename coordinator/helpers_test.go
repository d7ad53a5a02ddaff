package coordinator

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is an injectable clock for Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *fakeClock) Ms() int64 { return c.Now().UnixMilli() }

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a coordinator under test with its directory and clock, reopenable.
type env struct {
	t     *testing.T
	cfg   Config
	clock *fakeClock
	logs  *logBuffer
	c     *Coordinator
}

func newEnv(t *testing.T, shards int32, mutate ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, clock: newFakeClock(), logs: &logBuffer{}}
	e.cfg = Config{
		Dir:       t.TempDir(),
		NumShards: shards,
		NodeID:    1,
		Now:       e.clock.Now,
		Logger:    slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		// Tests drive the lifecycle's passes (runPurge, runDisablement)
		// themselves.
		LifecycleInterval: -1,
	}
	for _, m := range mutate {
		m(&e.cfg)
	}
	e.open()
	t.Cleanup(func() {
		if e.c != nil {
			e.c.Close()
		}
	})
	return e
}

func (e *env) open() {
	e.t.Helper()
	c, err := Open(e.cfg)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.c = c
}

func (e *env) reopen() {
	e.t.Helper()
	if err := e.c.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.c = nil
	e.open()
}

// reopenSame restarts e's coordinator (reopen) and fails the test unless
// every shard's state encodes as it did before (stateBytes); it returns
// that encoding.
func (e *env) reopenSame() [][]byte {
	e.t.Helper()
	before := stateBytes(e.c)
	e.reopen()
	if !reflect.DeepEqual(stateBytes(e.c), before) {
		e.t.Fatal("state differs after restart")
	}
	return before
}

func (e *env) createTopic(name string, partitions int32, configs map[string]string) diskless.Topic {
	e.t.Helper()
	tp, err := e.c.CreateTopic(context.Background(), name, partitions, configs)
	if err != nil {
		e.t.Fatalf("CreateTopic(%s): %v", name, err)
	}
	return tp
}

var keySeq atomic.Int64

func nextKey() string { return fmt.Sprintf("wal/%08d", keySeq.Add(1)) }

// commit commits batches (all owned by one shard) under key and fails the
// test on a request error.
func (e *env) commit(key string, batches ...diskless.CommitBatch) []diskless.CommitBatchResult {
	e.t.Helper()
	res, err := e.tryCommit(key, batches...)
	if err != nil {
		e.t.Fatalf("CommitFile(%s): %v", key, err)
	}
	return res
}

func (e *env) tryCommit(key string, batches ...diskless.CommitBatch) ([]diskless.CommitBatchResult, error) {
	e.t.Helper()
	req := commitRequest(e.c, key, batches...)
	return e.c.CommitFile(context.Background(), req.OwnerIDs[0], req)
}

// commitRequest lays batches out back to back in one file, all for the
// shard of the first batch.
func commitRequest(c *Coordinator, key string, batches ...diskless.CommitBatch) *diskless.CommitFileRequest {
	shard := int32(0)
	if len(batches) > 0 {
		shard = c.ShardFor(batches[0].TopicID, batches[0].Partition)
	}
	req := &diskless.CommitFileRequest{
		ObjectKey:        key,
		ObjectFormat:     diskless.ObjectFormatWriteAheadMultiSegment,
		UploaderBrokerID: 1,
		OwnerIDs:         []int32{shard},
	}
	off := int32(0)
	for _, b := range batches {
		if b.ByteOffset == 0 {
			b.ByteOffset = off
		}
		if b.ByteSize == 0 {
			b.ByteSize = 100
		}
		off = b.ByteOffset + b.ByteSize
		req.Batches = append(req.Batches, b)
	}
	req.FileSize = int64(off)
	return req
}

// plain returns a non-idempotent batch of n records.
func plain(t diskless.Topic, partition int32, n int32) diskless.CommitBatch {
	return diskless.CommitBatch{
		TopicID:           t.ID,
		Partition:         partition,
		Magic:             2,
		LastOffsetDelta:   n - 1,
		BatchMaxTimestamp: 1000,
		TimestampType:     batch.TimestampCreateTime,
		ProducerID:        -1,
		ProducerEpoch:     -1,
		BaseSequence:      -1,
		LastSequence:      -1,
	}
}

// idem returns an idempotent batch of n records.
func idem(t diskless.Topic, partition int32, pid int64, epoch int16, baseSeq, n int32) diskless.CommitBatch {
	b := plain(t, partition, n)
	b.ProducerID, b.ProducerEpoch = pid, epoch
	b.BaseSequence, b.LastSequence = baseSeq, batch.AddSequence(baseSeq, n-1)
	return b
}

func withSize(b diskless.CommitBatch, size int32) diskless.CommitBatch { b.ByteSize = size; return b }

// withByteOffset places b at off in its object (commitRequest lays the
// others back to back after it): a gap before b keeps it out of the run
// of the batch before.
func withByteOffset(b diskless.CommitBatch, off int32) diskless.CommitBatch {
	b.ByteOffset = off
	return b
}

func withMaxTs(b diskless.CommitBatch, ts int64) diskless.CommitBatch {
	b.BatchMaxTimestamp = ts
	return b
}

func errName(err error) string {
	if err == nil {
		return "NONE"
	}
	return err.Error()
}

func resName(r diskless.CommitBatchResult) string {
	if r.Err != nil {
		return r.Err.Message
	}
	return "NONE"
}

func (e *env) find(t diskless.Topic, partition int32, offset int64, maxBytes int32) diskless.FindBatchesResult {
	return e.c.FindBatches(context.Background(), []diskless.FindBatchesRequest{{TopicID: t.ID, Partition: partition, Offset: offset, MaxBytes: maxBytes}})[0]
}

// stateBytes returns the snapshot encoding of every shard's state, which
// is equal for equal states.
func stateBytes(c *Coordinator) [][]byte {
	out := make([][]byte, len(c.shards))
	for i, s := range c.shards {
		s.mu.RLock()
		out[i] = s.mu.st.appendSnapshot(nil)
		s.mu.RUnlock()
	}
	return out
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// appendSnapshot appends the encoding of s to dst, as a snapshot of it
// would.
func (s *state) appendSnapshot(dst []byte) []byte { return s.freeze().appendTo(dst) }
