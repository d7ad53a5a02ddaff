package produce

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

// orderFile is a file for commitOrder's tests: one batch per (partition,
// producer id) given.
func orderFile(seq uint64, keys ...[2]int64) *file {
	f := &file{seq: seq}
	for _, k := range keys {
		f.commits = append(f.commits, diskless.CommitBatch{TopicID: diskless.TopicID{1}, Partition: int32(k[0]), ProducerID: k[1]})
	}
	return f
}

// TestCommitOrder drives commitOrder through adds and finishes: a file may
// commit once no earlier unfinished file holds one of its (partition,
// producer) keys; batches without a producer id share their partition's
// key.
func TestCommitOrder(t *testing.T) {
	type step struct {
		add    *file  // register this file…
		may    bool   // …and whether it may commit at once
		finish uint64 // or finish the file of this seq…
		freed  []uint64
	}
	f := orderFile
	tests := []struct {
		name  string
		steps []step
	}{
		{"disjoint producers commit at once", []step{
			{add: f(1, [2]int64{0, 7}), may: true},
			{add: f(2, [2]int64{0, 8}), may: true}, // same partition, another producer
			{add: f(3, [2]int64{1, 7}), may: true}, // same producer, another partition
			{finish: 2}, {finish: 1}, {finish: 3},
		}},
		{"a producer's partition waits for the earlier file", []step{
			{add: f(1, [2]int64{0, 7}), may: true},
			{add: f(2, [2]int64{0, 7}, [2]int64{1, 8}), may: false},
			{finish: 1, freed: []uint64{2}},
			{finish: 2},
		}},
		{"waits for every earlier holder, in seal order", []step{
			{add: f(1, [2]int64{0, 7}), may: true},
			{add: f(2, [2]int64{0, 7}), may: false},
			{add: f(3, [2]int64{0, 7}, [2]int64{1, 9}), may: false},
			{finish: 1, freed: []uint64{2}},
			{finish: 2, freed: []uint64{3}},
			{finish: 3},
		}},
		{"two keys, two earlier files: free after both", []step{
			{add: f(1, [2]int64{0, 7}), may: true},
			{add: f(2, [2]int64{1, 8}), may: true},
			{add: f(3, [2]int64{0, 7}, [2]int64{1, 8}), may: false},
			{finish: 2},
			{finish: 1, freed: []uint64{3}},
			{finish: 3},
		}},
		{"a middle file finishing first frees nothing", []step{
			// 2 failed (its upload) before 1 finished: 3 still waits for 1.
			{add: f(1, [2]int64{0, 7}), may: true},
			{add: f(2, [2]int64{0, 7}), may: false},
			{add: f(3, [2]int64{0, 7}), may: false},
			{finish: 2},
			{finish: 1, freed: []uint64{3}},
			{finish: 3},
		}},
		{"batches without a producer id keep their partition's seal order", []step{
			{add: f(1, [2]int64{0, -1}), may: true},
			{add: f(2, [2]int64{1, -1}), may: true},
			{add: f(3, [2]int64{0, -1}), may: false},
			{add: f(4, [2]int64{0, 5}), may: true}, // an idempotent producer is its own key
			{finish: 1, freed: []uint64{3}},
			{finish: 2}, {finish: 3}, {finish: 4},
		}},
		{"a file of many partitions waits for the one key it shares", []step{
			{add: f(1, spread(7, 100)...), may: true},
			{add: f(2, append(spread(8, 100), [2]int64{57, 7})...), may: false}, // producer 7's partition 57
			{add: f(3, spread(9, 100)...), may: true},
			{add: f(4, spread(8, 100)...), may: false}, // producer 8 behind file 2
			{finish: 3},
			{finish: 1, freed: []uint64{2}},
			{finish: 2, freed: []uint64{4}},
			{finish: 4},
		}},
		{"several freed at once come in seal order", []step{
			{add: f(1, [2]int64{0, 1}, [2]int64{0, 2}), may: true},
			{add: f(2, [2]int64{0, 2}), may: false},
			{add: f(3, [2]int64{0, 1}), may: false},
			{finish: 1, freed: []uint64{2, 3}},
			{finish: 3}, {finish: 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newCommitOrder()
			files := map[uint64]*file{}
			for i, s := range tt.steps {
				if s.add != nil {
					files[s.add.seq] = s.add
					if got := o.add(s.add); got != s.may {
						t.Fatalf("step %d: add(%d) may commit %t, want %t", i, s.add.seq, got, s.may)
					}
					continue
				}
				var freed []uint64
				for _, g := range o.finish(files[s.finish]) {
					freed = append(freed, g.seq)
				}
				if !slices.Equal(freed, s.freed) {
					t.Fatalf("step %d: finish(%d) freed %v, want %v", i, s.finish, freed, s.freed)
				}
			}
			if len(o.holders) != 0 {
				t.Fatalf("keys left after every file finished: %v", o.holders)
			}
		})
	}
}

// spread is one batch of producer pid in each of partitions 0…n-1.
func spread(pid int64, n int) [][2]int64 {
	keys := make([][2]int64, n)
	for i := range keys {
		keys[i] = [2]int64{int64(i), pid}
	}
	return keys
}

func TestFileKeys(t *testing.T) {
	f := orderFile(1, [2]int64{0, 7}, [2]int64{0, 7}, [2]int64{1, 7}, [2]int64{0, 7}, [2]int64{0, -1}, [2]int64{0, -5})
	newCommitOrder().add(f)
	got := f.keys
	want := []orderKey{{diskless.TopicID{1}, 0, 7}, {diskless.TopicID{1}, 1, 7}, {diskless.TopicID{1}, 0, -1}}
	if !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
}

// seqCommitter is a committer that checks idempotent sequences as a
// coordinator shard does (SPEC §3, without epochs): per partition and
// producer, a batch's base sequence must follow the last one committed,
// else OUT_OF_ORDER_SEQUENCE_NUMBER; a producer without state starts
// anywhere. It assigns offsets per partition and records the commit order
// and each partition's log.
type seqCommitter struct {
	mu    sync.Mutex
	hwm   map[int32]int64
	last  map[[2]int64]int32 // (partition, producer) → last sequence
	order []string
	log   map[int32][]string // per partition: "producer:sequence" in offset order
}

func (c *seqCommitter) Commit(_ context.Context, key string, _ int64, bs []diskless.CommitBatch) []diskless.CommitBatchResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hwm == nil {
		c.hwm, c.last, c.log = map[int32]int64{}, map[[2]int64]int32{}, map[int32][]string{}
	}
	c.order = append(c.order, key)
	rs := make([]diskless.CommitBatchResult, len(bs))
	for i, b := range bs {
		k := [2]int64{int64(b.Partition), b.ProducerID}
		if last, ok := c.last[k]; b.ProducerID >= 0 && ok && b.BaseSequence != last+1 {
			rs[i].Err = kerr.OutOfOrderSequenceNumber
			continue
		}
		if b.ProducerID >= 0 {
			c.last[k] = b.LastSequence
		}
		rs[i].BaseOffset = c.hwm[b.Partition]
		c.hwm[b.Partition] += int64(b.LastOffsetDelta) + 1
		c.log[b.Partition] = append(c.log[b.Partition], fmt.Sprintf("%d:%d", b.ProducerID, b.BaseSequence))
	}
	return rs
}

// idem is a one-record batch of an idempotent producer at sequence seq.
func idem(pid int64, seq int32) []byte {
	o := batchtest.Plain(time.Now().UnixMilli())
	o.ProducerID, o.ProducerEpoch, o.BaseSequence = pid, 0, seq
	return batchtest.Make(o, batchtest.Values("v", 1)...)
}

// plain is a one-record batch without a producer id.
func plain() []byte {
	return batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("v", 1)...)
}

// holdFirst is an uploader whose first upload waits until release is
// closed; the others succeed at once.
func holdFirst(release <-chan struct{}) *fakeUploader {
	return &fakeUploader{block: func(n int) {
		if n == 1 {
			<-release
		}
	}}
}

// newOrderHandler is the commit order tests' handler, inside a synctest
// bubble: up to 4 uploads at once, each request's file sealed by age
// (1 ms) on its own (produceSealed). The caller closes it.
func newOrderHandler(t *testing.T, up Uploader, cm Committer) *Handler {
	t.Helper()
	h, err := New(Config{CommitInterval: time.Millisecond, UploadConcurrency: 4, Logger: slog.New(slog.DiscardHandler)},
		newCatalog(), up, cm, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// produceSealed sends one batch to partition p of topic "ct" and waits
// (in the bubble's time) until its file has sealed by age and its upload
// has gone as far as it can, so that the next request gets a file of its
// own. It returns the answer of partition p.
func produceSealed(t *testing.T, h *Handler, p int32, records []byte) func() kmsg.ProduceResponseTopicPartition {
	w := h.Produce(context.Background(), request(9, -1, "ct", part{p, records}))
	synctest.Wait()
	time.Sleep(2 * time.Millisecond)
	return func() kmsg.ProduceResponseTopicPartition { return w().Topics[0].Partitions[0] }
}

// offsetOf is a partition's base offset, failing the test on an error.
func offsetOf(t *testing.T, what string, p kmsg.ProduceResponseTopicPartition) int64 {
	t.Helper()
	if p.ErrorCode != 0 {
		t.Fatalf("%s: error %d", what, p.ErrorCode)
	}
	return p.BaseOffset
}

// TestLaterFileCommitsPastSlowUpload: file 1 (producer 7) uploads slowly;
// file 2 (producer 8, same partition) is uploaded and committed before it
// and answered first, with the partition's first offset; file 3 (producer
// 7 again, the next sequence) waits for file 1 and commits after it, so
// producer 7's batches keep their order and no sequence is refused.
func TestLaterFileCommitsPastSlowUpload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		cm := &seqCommitter{}
		h := newOrderHandler(t, holdFirst(release), cm)
		defer h.Close(context.Background())
		w1 := produceSealed(t, h, 0, idem(7, 0)) // file 1: held
		w2 := produceSealed(t, h, 0, idem(8, 0)) // file 2: another producer
		w3 := produceSealed(t, h, 0, idem(7, 1)) // file 3: producer 7's next batch
		if off := offsetOf(t, "file 2", w2()); off != 0 {
			t.Fatalf("file 2 at offset %d, want 0: it must not wait for file 1", off)
		}
		synctest.Wait()
		if got := cm.order; !slices.Equal(got, []string{"wal/0002"}) {
			t.Fatalf("commits %v before file 1's upload ended, want only file 2's", got)
		}
		close(release)
		if o1, o3 := offsetOf(t, "file 1", w1()), offsetOf(t, "file 3", w3()); o1 != 1 || o3 != 2 {
			t.Fatalf("producer 7 at offsets %d then %d, want 1 then 2", o1, o3)
		}
		if got := cm.order; !slices.Equal(got, []string{"wal/0002", "wal/0001", "wal/0003"}) {
			t.Fatalf("commit order %v", got)
		}
		if got := cm.log[0]; !slices.Equal(got, []string{"8:0", "7:0", "7:1"}) {
			t.Fatalf("partition 0 holds %v", got)
		}
	})
}

// TestEarlierFileFailsAfterLaterCommitted: file 1 (producer 7, sequence 0)
// is still uploading when file 2 (producer 8) commits; then file 1's
// upload fails: its batch gets KAFKA_STORAGE_ERROR, and file 3 (producer
// 7, sequence 1) — decided only after file 1 — is refused
// OUT_OF_ORDER_SEQUENCE_NUMBER by the shard as when every file waited for
// the one before: a Kafka client resends from the first failed batch
// (DESIGN §Produce step 6).
func TestEarlierFileFailsAfterLaterCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		cm := &seqCommitter{}
		// Producer 7 already has state at the shard: sequence 0 is next.
		cm.Commit(context.Background(), "wal/earlier", 0, []diskless.CommitBatch{{Partition: 0, ProducerID: 7, BaseSequence: -1, LastSequence: -1}})
		h := newOrderHandler(t, &failingUploader{fail: map[int]bool{1: true}, release: release}, cm)
		defer h.Close(context.Background())
		w1 := produceSealed(t, h, 0, idem(7, 0))
		w2 := produceSealed(t, h, 0, idem(8, 0))
		w3 := produceSealed(t, h, 0, idem(7, 1))
		if c := w2().ErrorCode; c != 0 {
			t.Fatalf("file 2: error %d", c)
		}
		synctest.Wait()
		if len(cm.order) != 2 {
			t.Fatalf("commits %v before file 1 failed, want file 2's alone after the first", cm.order)
		}
		close(release)
		if c := w1().ErrorCode; c != kerr.KafkaStorageError.Code {
			t.Fatalf("file 1: error %d, want KAFKA_STORAGE_ERROR", c)
		}
		if c := w3().ErrorCode; c != kerr.OutOfOrderSequenceNumber.Code {
			t.Fatalf("file 3: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", c)
		}
	})
}

// TestBatchesWithoutProducerKeepSealOrder: batches without a producer id
// have no sequence for the shard to check, so only the commit order keeps
// a non-idempotent producer's batches of a partition in the order it sent
// them. File 1 (partition 0) uploads slowly; file 2 (partition 0 again)
// waits for it although it is uploaded first, while file 3 (partition 1)
// commits at once.
func TestBatchesWithoutProducerKeepSealOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		cm := &seqCommitter{}
		h := newOrderHandler(t, holdFirst(release), cm)
		defer h.Close(context.Background())
		w1 := produceSealed(t, h, 0, plain())
		w2 := produceSealed(t, h, 0, plain())
		w3 := produceSealed(t, h, 1, plain())
		if off := offsetOf(t, "file 3", w3()); off != 0 {
			t.Fatalf("file 3 at offset %d, want 0", off)
		}
		synctest.Wait()
		if got := cm.order; !slices.Equal(got, []string{"wal/0003"}) {
			t.Fatalf("commits %v before file 1's upload ended, want only file 3's: file 2 must wait for file 1", got)
		}
		close(release)
		if o1, o2 := offsetOf(t, "file 1", w1()), offsetOf(t, "file 2", w2()); o1 != 0 || o2 != 1 {
			t.Fatalf("partition 0: file 1 at offset %d, file 2 at %d, want 0 then 1", o1, o2)
		}
		if got := cm.order; !slices.Equal(got, []string{"wal/0003", "wal/0001", "wal/0002"}) {
			t.Fatalf("commit order %v", got)
		}
	})
}

// failingUploader fails the uploads whose number is in fail once release
// is closed; the others succeed at once.
type failingUploader struct {
	mu      sync.Mutex
	n       int
	fail    map[int]bool
	release chan struct{}
}

func (u *failingUploader) Upload(ctx context.Context, data []byte) (string, error) {
	u.mu.Lock()
	u.n++
	n := u.n
	u.mu.Unlock()
	if u.fail[n] {
		<-u.release
		return "", fmt.Errorf("upload %d: store gone", n)
	}
	return fmt.Sprintf("wal/%04d", n), nil
}

// TestDrainWaitsForEarlierFiles: a later file answered first does not end
// Drain while an earlier one is unanswered.
func TestDrainWaitsForEarlierFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := newOrderHandler(t, holdFirst(release), &seqCommitter{})
		defer h.Close(context.Background())
		w1 := produceSealed(t, h, 0, idem(7, 0))
		w2 := h.Produce(context.Background(), request(9, -1, "ct", part{1, idem(8, 0)}))
		w2() // answered, file 1 still uploading
		drained := make(chan error, 1)
		go func() { drained <- h.Drain(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-drained:
			t.Fatalf("Drain returned (%v) while file 1 was unanswered", err)
		default:
		}
		close(release)
		w1()
		if err := <-drained; err != nil {
			t.Fatal(err)
		}
	})
}
