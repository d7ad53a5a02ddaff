package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/diskless"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeShards owns partition p of every topic in shard p % n, records every
// CommitFile call, and fails the first failures[shard] calls of a shard
// with failWith.
type fakeShards struct {
	n        int32
	failWith error
	mu       sync.Mutex
	failures map[int32]int
	calls    []diskless.CommitFileRequest
	shardOf  []int32 // shard of each call
	// answer, if set, answers each batch instead of accepting it.
	answer func(shard int32, b diskless.CommitBatch) diskless.CommitBatchResult
}

func (f *fakeShards) ShardFor(_ diskless.TopicID, p int32) int32 { return p % f.n }

func (f *fakeShards) CommitFile(_ context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, *req)
	f.shardOf = append(f.shardOf, shard)
	if f.failures[shard] > 0 {
		f.failures[shard]--
		return nil, f.failWith
	}
	rs := make([]diskless.CommitBatchResult, len(req.Batches))
	for i, b := range req.Batches {
		// Encode the shard and position so the test can check the mapping.
		rs[i].BaseOffset = int64(shard)*1000 + int64(b.ByteOffset)
		if f.answer != nil {
			rs[i] = f.answer(shard, b)
		}
	}
	return rs, nil
}

// deletes records the keys deleted through Config.Objects.
type deletes struct {
	mu   sync.Mutex
	keys []string
	err  error
}

func (d *deletes) Delete(_ context.Context, key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keys = append(d.keys, key)
	return d.err
}

// TestCommitDeletesUntakenObject: an object is deleted when every owner's
// first answer took none of its batches (refused or duplicates), and kept
// when one batch was taken, when an owner could not be reached, or when an
// answer came after a failed attempt (the failed one may have committed).
func TestCommitDeletesUntakenObject(t *testing.T) {
	refused := diskless.CommitBatchResult{Err: kerr.NotEnoughReplicas, BaseOffset: -1}
	dup := diskless.CommitBatchResult{Duplicate: true, BaseOffset: 3}
	ok := diskless.CommitBatchResult{BaseOffset: 5}
	all := func(r diskless.CommitBatchResult) func(int32, diskless.CommitBatch) diskless.CommitBatchResult {
		return func(int32, diskless.CommitBatch) diskless.CommitBatchResult { return r }
	}
	cases := []struct {
		name     string
		shards   int32
		parts    []int32
		answer   func(int32, diskless.CommitBatch) diskless.CommitBatchResult
		failures map[int32]int
		deleted  bool
	}{
		{"one shard, all refused", 1, []int32{0, 0}, all(refused), nil, true},
		{"one shard, all duplicates", 1, []int32{0, 0}, all(dup), nil, true},
		{"one shard, refused and duplicate", 1, []int32{0, 0}, func(_ int32, b diskless.CommitBatch) diskless.CommitBatchResult {
			if b.ByteOffset == 0 {
				return refused
			}
			return dup
		}, nil, true},
		{"one shard, one taken", 1, []int32{0, 0}, func(_ int32, b diskless.CommitBatch) diskless.CommitBatchResult {
			if b.ByteOffset == 0 {
				return refused
			}
			return ok
		}, nil, false},
		{"one shard, refused after a failed attempt", 1, []int32{0}, all(refused), map[int32]int{0: 1}, false},
		{"one shard, unreachable", 1, []int32{0}, all(refused), map[int32]int{0: 100}, false},
		{"two shards, all refused", 2, []int32{0, 1}, all(refused), nil, true},
		{"two shards, one taken", 2, []int32{0, 1}, func(s int32, _ diskless.CommitBatch) diskless.CommitBatchResult {
			if s == 1 {
				return ok
			}
			return refused
		}, nil, false},
		{"two shards, one unreachable", 2, []int32{0, 1}, all(refused), map[int32]int{1: 100}, false},
		{"two shards, one after a failed attempt", 2, []int32{0, 1}, all(refused), map[int32]int{1: 1}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeShards{n: tc.shards, answer: tc.answer, failWith: errors.New("down"), failures: tc.failures}
			d := &deletes{}
			c, err := New(Config{MaxAttempts: 3, Objects: d}, f)
			if err != nil {
				t.Fatal(err)
			}
			c.sleep = func(context.Context, time.Duration) error { return nil }
			rs := c.Commit(context.Background(), "wal/k", 20, batches(tc.parts...))
			if len(rs) != len(tc.parts) {
				t.Fatalf("%d results", len(rs))
			}
			if got := len(d.keys) == 1 && d.keys[0] == "wal/k"; got != tc.deleted || len(d.keys) > 1 {
				t.Fatalf("deletes %v, want deleted %v", d.keys, tc.deleted)
			}
		})
	}
	t.Run("delete fails", func(t *testing.T) {
		d := &deletes{err: errors.New("store down")}
		c, err := New(Config{Objects: d}, &fakeShards{n: 1, answer: all(refused)})
		if err != nil {
			t.Fatal(err)
		}
		if rs := c.Commit(context.Background(), "wal/k", 10, batches(0)); rs[0].Err != kerr.NotEnoughReplicas || len(d.keys) != 1 {
			t.Fatalf("results %+v, deletes %v", rs, d.keys)
		}
	})
}

func newCommitter(t *testing.T, shards Shards) *Committer {
	t.Helper()
	c, err := New(Config{NodeID: 7, MaxAttempts: 3}, shards)
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(context.Context, time.Duration) error { return nil }
	return c
}

func batches(partitions ...int32) []diskless.CommitBatch {
	bs := make([]diskless.CommitBatch, len(partitions))
	for i, p := range partitions {
		bs[i] = diskless.CommitBatch{Partition: p, ByteOffset: int32(i * 10), ByteSize: 10}
	}
	return bs
}

func TestCommitSplitsByShardAndMapsBack(t *testing.T) {
	f := &fakeShards{n: 3}
	c := newCommitter(t, f)
	in := batches(0, 1, 2, 3, 4, 0)
	rs := c.Commit(context.Background(), "wal/abc", 60, in)
	if len(f.calls) != 3 {
		t.Fatalf("%d CommitFile calls, want one per shard (3)", len(f.calls))
	}
	for i, call := range f.calls {
		if !slices.Equal(call.OwnerIDs, []int32{0, 1, 2}) || call.ObjectKey != "wal/abc" || call.FileSize != 60 ||
			call.UploaderBrokerID != 7 || call.ObjectFormat != diskless.ObjectFormatWriteAheadMultiSegment {
			t.Fatalf("call %d: %+v", i, call)
		}
		for _, b := range call.Batches {
			if b.Partition%3 != f.shardOf[i] {
				t.Fatalf("batch of partition %d sent to shard %d", b.Partition, f.shardOf[i])
			}
		}
	}
	for i, r := range rs {
		want := int64(in[i].Partition%3)*1000 + int64(in[i].ByteOffset)
		if r.Err != nil || r.BaseOffset != want {
			t.Fatalf("result %d = %+v, want base %d", i, r, want)
		}
	}
}

func TestCommitRetries(t *testing.T) {
	cases := []struct {
		name      string
		failWith  error
		failures  int
		wantCalls int
		wantErr   *kerr.Error
	}{
		{"transient then ok", fmt.Errorf("log fsync: %w", kerr.KafkaStorageError), 2, 3, nil},
		{"gives up after max attempts", errors.New("disk on fire"), 5, 3, kerr.KafkaStorageError},
		{"invalid commit is not retried", fmt.Errorf("bad: %w", diskless.ErrInvalidCommit), 5, 1, kerr.KafkaStorageError},
		{"failed shard is not retried", diskless.ErrShardFailed, 5, 1, kerr.KafkaStorageError},
		{"fenced shard is not retried and answers NOT_LEADER_OR_FOLLOWER", fmt.Errorf("shard 0: %w (%w)", diskless.ErrShardFenced, kerr.NotLeaderForPartition), 5, 1, kerr.NotLeaderForPartition},
		{"closed is not retried", diskless.ErrClosed, 5, 1, kerr.KafkaStorageError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeShards{n: 1, failWith: tc.failWith, failures: map[int32]int{0: tc.failures}}
			rs := newCommitter(t, f).Commit(context.Background(), "k", 20, batches(0, 0))
			if len(f.calls) != tc.wantCalls {
				t.Fatalf("%d calls, want %d", len(f.calls), tc.wantCalls)
			}
			for _, r := range rs {
				if r.Err != tc.wantErr {
					t.Fatalf("result error %v, want %v", r.Err, tc.wantErr)
				}
			}
		})
	}
}

// TestCommitPartialShardFailure: one shard failing fails only its batches.
func TestCommitPartialShardFailure(t *testing.T) {
	f := &fakeShards{n: 2, failWith: errors.New("down"), failures: map[int32]int{1: 100}}
	rs := newCommitter(t, f).Commit(context.Background(), "k", 40, batches(0, 1, 2, 3))
	for i, r := range rs {
		wantErr := i%2 == 1
		if (r.Err != nil) != wantErr {
			t.Fatalf("batch %d (partition %d): err %v", i, i, r.Err)
		}
	}
}

func TestCommitStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fakeShards{n: 1, failWith: context.Canceled, failures: map[int32]int{0: 100}}
	rs := newCommitter(t, f).Commit(ctx, "k", 10, batches(0))
	if len(f.calls) != 1 || rs[0].Err != kerr.KafkaStorageError {
		t.Fatalf("%d calls, result %+v", len(f.calls), rs[0])
	}
}

func TestConfigValidateNamesKey(t *testing.T) {
	if _, err := New(Config{MaxAttempts: -1}, &fakeShards{n: 1}); err == nil || !strings.Contains(err.Error(), "diskless.commit.max.attempts") {
		t.Fatalf("error %v does not name diskless.commit.max.attempts", err)
	}
	// Zero fields take their defaults, as in every package's Config.
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("the zero Config is refused: %v", err)
	}
	if err := (Config{InitialBackoff: time.Second, MaxBackoff: time.Millisecond}).Validate(); err == nil {
		t.Fatal("a backoff ceiling below its start is accepted")
	}
}

// nopShards owns every partition in shard 0 and answers every commit at
// once, so that BenchmarkCommit measures the committer's own work.
type nopShards struct{ n int32 }

func (s nopShards) ShardFor(_ diskless.TopicID, p int32) int32 { return p % s.n }

func (nopShards) CommitFile(_ context.Context, _ int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	return make([]diskless.CommitBatchResult, len(req.Batches)), nil
}

// BenchmarkCommit measures splitting a file of 1000 batches by shard and
// mapping the answers back, over shards that do nothing.
func BenchmarkCommit(b *testing.B) {
	for _, n := range []int32{1, 4} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			c, err := New(Config{}, nopShards{n: n})
			if err != nil {
				b.Fatal(err)
			}
			partitions := make([]int32, 1000)
			for i := range partitions {
				partitions[i] = int32(i % 100)
			}
			in := batches(partitions...)
			b.ReportAllocs()
			for b.Loop() {
				c.Commit(context.Background(), "wal/k", 1000, in)
			}
		})
	}
}
