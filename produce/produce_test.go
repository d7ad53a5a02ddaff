package produce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeCatalog knows two topics: "ct" (CreateTime, 3 partitions) and "lat"
// (LogAppendTime, 1 partition, max.message.bytes 4000).
type fakeCatalog struct{ topics map[string]diskless.Topic }

func newCatalog() *fakeCatalog {
	ct := topicconfig.Defaults()
	lat, _ := topicconfig.Parse(map[string]string{"message.timestamp.type": "LogAppendTime", "max.message.bytes": "4000"})
	return &fakeCatalog{topics: map[string]diskless.Topic{
		"ct":  {ID: diskless.TopicID{1}, Name: "ct", Partitions: 3, Config: ct},
		"lat": {ID: diskless.TopicID{2}, Name: "lat", Partitions: 1, Config: lat},
	}}
}

func (c *fakeCatalog) Topic(name string) (diskless.Topic, bool) {
	t, ok := c.topics[name]
	return t, ok
}

func (c *fakeCatalog) TopicByID(id diskless.TopicID) (diskless.Topic, bool) {
	for _, t := range c.topics {
		if t.ID == id {
			return t, true
		}
	}
	return diskless.Topic{}, false
}

// fakeUploader stores objects in memory. block, when set, is called with the
// upload's sequence number (1-based) before it completes; fail makes it
// return an error; hang makes every upload wait for its context's end, as
// a store that never answers would.
type fakeUploader struct {
	mu      sync.Mutex
	n       int
	objects map[string][]byte
	block   func(n int)
	fail    error
	hang    bool
}

func (u *fakeUploader) Upload(ctx context.Context, data []byte) (string, error) {
	u.mu.Lock()
	u.n++
	n, block, fail, hang := u.n, u.block, u.fail, u.hang
	u.mu.Unlock()
	if hang {
		<-ctx.Done()
		return "", ctx.Err()
	}
	if block != nil {
		block(n)
	}
	if fail != nil {
		return "", fail
	}
	key := fmt.Sprintf("wal/%04d", n)
	u.mu.Lock()
	if u.objects == nil {
		u.objects = map[string][]byte{}
	}
	u.objects[key] = data
	u.mu.Unlock()
	return key, nil
}

// fakeCommitter assigns offsets per partition like a coordinator would,
// one append time per commit, and records the order of object keys; a
// batch of a partition in refuse gets that error instead (set it before
// the first produce). hold, when set, is waited for before each commit, as
// a coordinator that cannot reach its log holds it.
type fakeCommitter struct {
	mu     sync.Mutex
	hwm    map[diskless.TopicPartition]int64
	order  []string
	got    map[string][]diskless.CommitBatch
	refuse map[diskless.TopicPartition]*kerr.Error
	hold   chan struct{}
}

func (c *fakeCommitter) Commit(_ context.Context, key string, _ int64, bs []diskless.CommitBatch) []diskless.CommitBatchResult {
	if c.hold != nil {
		<-c.hold
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hwm == nil {
		c.hwm, c.got = map[diskless.TopicPartition]int64{}, map[string][]diskless.CommitBatch{}
	}
	c.order = append(c.order, key)
	c.got[key] = bs
	rs := make([]diskless.CommitBatchResult, len(bs))
	for i, b := range bs {
		tp := diskless.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
		if e := c.refuse[tp]; e != nil {
			rs[i] = diskless.CommitBatchResult{Err: e}
			continue
		}
		rs[i] = diskless.CommitBatchResult{BaseOffset: c.hwm[tp], LogAppendTime: 4242, LogStartOffset: 0}
		c.hwm[tp] += int64(b.LastOffsetDelta) + 1
	}
	return rs
}

type fakeCache struct {
	mu   sync.Mutex
	keys []string
}

func (c *fakeCache) Put(key string, _ []byte) {
	c.mu.Lock()
	c.keys = append(c.keys, key)
	c.mu.Unlock()
}

type rig struct {
	h     *Handler
	up    *fakeUploader
	cm    *fakeCommitter
	cache *fakeCache
}

func newRig(t *testing.T, cfg Config) *rig {
	t.Helper()
	r := &rig{up: &fakeUploader{}, cm: &fakeCommitter{}, cache: &fakeCache{}}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h, err := New(cfg, newCatalog(), r.up, r.cm, r.cache)
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	t.Cleanup(func() { h.Close(context.Background()) })
	return r
}

type part struct {
	partition int32
	records   []byte
}

func request(version int16, acks int16, topic string, parts ...part) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = version, acks, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p.partition, p.records
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

func good(n int) []byte {
	return batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("v", n)...)
}

func codes(resp *kmsg.ProduceResponse) []int16 {
	var cs []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			cs = append(cs, p.ErrorCode)
		}
	}
	return cs
}

// wantAll fails t unless resp answers n partitions, all with code want.
func wantAll(t *testing.T, resp *kmsg.ProduceResponse, n int, want int16, what string) {
	t.Helper()
	cs := codes(resp)
	if len(cs) != n {
		t.Fatalf("%s: %d partitions answered, want %d", what, len(cs), n)
	}
	for _, c := range cs {
		if c != want {
			t.Fatalf("%s: code %d, want %d", what, c, want)
		}
	}
}

func TestProduceAnswersEachPartition(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond})
	corrupt := good(2)
	corrupt[len(corrupt)-1] ^= 1
	req := request(9, -1, "ct", part{0, good(3)}, part{1, corrupt}, part{7, good(1)}, part{2, good(2)})
	unknown := kmsg.NewProduceRequestTopic()
	unknown.Topic = "nope"
	unknown.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: good(1)}}
	req.Topics = append(req.Topics, unknown)

	resp := r.h.Produce(context.Background(), req)()
	want := []int16{0, kerr.CorruptMessage.Code, kerr.UnknownTopicOrPartition.Code, 0, kerr.UnknownTopicOrPartition.Code}
	if got := codes(resp); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	ps := resp.Topics[0].Partitions
	if ps[0].BaseOffset != 0 || ps[3].BaseOffset != 0 || ps[0].LogAppendTime != -1 || ps[1].BaseOffset != -1 {
		t.Fatalf("partitions: %+v", ps)
	}
	if len(r.cm.order) != 1 || len(r.cm.got[r.cm.order[0]]) != 2 {
		t.Fatalf("commits %v: want one file with the two valid batches", r.cm.order)
	}
	if len(r.cache.keys) != 1 || r.cache.keys[0] != r.cm.order[0] {
		t.Fatalf("uploaded object not offered to the cache: %v", r.cache.keys)
	}
	// The committed coordinates point at the batches in the object.
	obj := r.up.objects[r.cm.order[0]]
	for _, b := range r.cm.got[r.cm.order[0]] {
		h, _, err := batch.Parse(obj[b.ByteOffset : b.ByteOffset+b.ByteSize])
		if err != nil || h.ComputeCRC() != h.CRC() || int32(h.Len()) != b.ByteSize {
			t.Fatalf("batch at %d: %v", b.ByteOffset, err)
		}
	}
}

func TestProduceRequestLevelErrors(t *testing.T) {
	txn := request(9, -1, "ct", part{0, good(1)})
	id := "txn"
	txn.TransactionID = &id
	cases := []struct {
		name string
		req  *kmsg.ProduceRequest
		want *kerr.Error
	}{
		{"acks 2", request(9, 2, "ct", part{0, good(1)}), kerr.InvalidRequiredAcks},
		{"transactional", txn, kerr.InvalidRequest},
		{"v2 message format", request(2, -1, "ct", part{0, good(1)}), kerr.UnsupportedForMessageFormat},
		{"zstd before v7", request(6, -1, "ct", part{0, batchtest.Make(batchtest.Options{Codec: batch.CodecZstd, BaseTimestamp: time.Now().UnixMilli(), ProducerID: -1, BaseSequence: -1}, batchtest.Values("z", 1)...)}), kerr.UnsupportedCompressionType},
		{"too large for the topic", request(9, -1, "lat", part{0, batchtest.Make(batchtest.Plain(1), batchtest.Record{Value: make([]byte, 5000)})}), kerr.MessageTooLarge},
	}
	r := newRig(t, Config{CommitInterval: time.Millisecond})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantAll(t, r.h.Produce(context.Background(), c.req)(), len(c.req.Topics[0].Partitions), c.want.Code, c.want.Message)
		})
	}
	if len(r.cm.order) != 0 {
		t.Fatalf("refused requests were committed: %v", r.cm.order)
	}
}

func TestProduceByTopicID(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond})
	req := request(13, -1, "", part{0, good(1)})
	req.Topics[0].TopicID = diskless.TopicID{2}
	unknown := kmsg.NewProduceRequestTopic()
	unknown.TopicID = diskless.TopicID{9}
	unknown.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: good(1)}}
	req.Topics = append(req.Topics, unknown)
	resp := r.h.Produce(context.Background(), req)()
	if got := codes(resp); got[0] != 0 || got[1] != kerr.UnknownTopicID.Code {
		t.Fatalf("codes %v", got)
	}
	if resp.Topics[0].TopicID != req.Topics[0].TopicID {
		t.Fatal("response does not echo the topic id")
	}
	// LogAppendTime topics report the commit's append time.
	if p := resp.Topics[0].Partitions[0]; p.LogAppendTime != 4242 {
		t.Fatalf("log append time %d, want the commit's 4242", p.LogAppendTime)
	}
}

func TestAcksZeroStoresWithoutAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{CommitInterval: time.Second})
		start := time.Now()
		if resp := r.h.Produce(context.Background(), request(9, 0, "ct", part{0, good(1)}))(); resp != nil {
			t.Fatalf("acks=0 got a response: %+v", resp)
		}
		if time.Since(start) != 0 {
			t.Fatal("acks=0 held the connection until its file committed")
		}
		if err := r.h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(r.cm.order) != 1 {
			t.Fatalf("acks=0 batch not committed: %v", r.cm.order)
		}
	})
}

func TestDuplicatePartitionRefused(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond})
	resp := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}, part{1, good(1)}, part{0, good(2)}))()
	want := []int16{kerr.InvalidRequest.Code, 0, kerr.InvalidRequest.Code}
	if got := codes(resp); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if n := len(r.cm.got[r.cm.order[0]]); n != 1 {
		t.Fatalf("%d batches committed, want only partition 1's", n)
	}
}

// TestDuplicatesFoundUpFront: every copy of a partition named more than
// once gets INVALID_REQUEST, whichever way it is named twice and whatever
// its batch holds, unless the topic or partition is unknown (that error
// wins); the other partitions are served. Both ways of finding them (every
// pair compared, and the map above duplicateScanMax partitions) agree.
func TestDuplicatesFoundUpFront(t *testing.T) {
	const (
		ok      = 0
		dup     = 42 // kerr.InvalidRequest
		unknown = 3  // kerr.UnknownTopicOrPartition
	)
	bad := good(1)
	bad[len(bad)-1] ^= 1
	twoEntries := func(version int16, a, b string) *kmsg.ProduceRequest {
		req := request(version, -1, a, part{0, good(1)}, part{1, good(1)})
		other := request(version, -1, b, part{1, good(1)}, part{2, good(1)})
		req.Topics = append(req.Topics, other.Topics[0])
		return req
	}
	byID := func(ids ...byte) *kmsg.ProduceRequest {
		req := request(13, -1, "", part{0, good(1)})
		req.Topics = nil
		for _, id := range ids {
			rt := kmsg.NewProduceRequestTopic()
			rt.TopicID = diskless.TopicID{id}
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = good(1)
			rt.Partitions = []kmsg.ProduceRequestTopicPartition{rp}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}
	large := func() *kmsg.ProduceRequest {
		parts := []part{{0, good(1)}, {1, good(1)}, {2, good(1)}}
		for p := int32(3); p < 18; p++ {
			parts = append(parts, part{p, good(1)})
		}
		return request(9, -1, "ct", append(parts, part{1, good(1)})...)
	}
	largeWant := []int16{ok, dup, ok}
	for range 15 {
		largeWant = append(largeWant, unknown)
	}
	largeWant = append(largeWant, dup)
	for _, tc := range []struct {
		name string
		req  *kmsg.ProduceRequest
		want []int16
	}{
		{"in one topic entry", request(9, -1, "ct", part{0, good(1)}, part{1, good(1)}, part{0, good(2)}), []int16{dup, ok, dup}},
		{"three copies", request(9, -1, "ct", part{2, good(1)}, part{2, good(1)}, part{0, good(1)}, part{2, good(1)}), []int16{dup, dup, ok, dup}},
		{"the first copy's batch is corrupt", request(9, -1, "ct", part{0, bad}, part{0, good(1)}), []int16{dup, dup}},
		{"in two entries of one topic", twoEntries(9, "ct", "ct"), []int16{ok, dup, dup, ok}},
		{"same partition, other topics", twoEntries(9, "ct", "lat"), []int16{ok, ok, unknown, unknown}},
		{"unknown topic named twice", twoEntries(9, "nope", "nope"), []int16{unknown, unknown, unknown, unknown}},
		{"unknown partition named twice", request(9, -1, "ct", part{7, good(1)}, part{7, good(1)}, part{1, good(1)}), []int16{unknown, unknown, ok}},
		{"by topic id (v13)", byID(1, 2, 1), []int16{dup, ok, dup}},
		{"more partitions than compared pairwise", large(), largeWant},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, Config{CommitInterval: time.Millisecond})
			resp := r.h.Produce(context.Background(), tc.req)()
			if got := codes(resp); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("codes %v, want %v", got, tc.want)
			}
			served := 0
			for _, c := range tc.want {
				if c == ok {
					served++
				}
			}
			committed := 0
			for _, bs := range r.cm.got {
				committed += len(bs)
			}
			if committed != served {
				t.Fatalf("%d batches committed, want %d (the partitions served)", committed, served)
			}
		})
	}
}

// TestZeroTimeoutWithRoom: a request whose timeout is 0 still goes in when
// memory is free, as Kafka accepts it.
func TestZeroTimeoutWithRoom(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond})
	req := request(9, -1, "ct", part{0, good(1)})
	req.TimeoutMillis = 0
	if c := codes(r.h.Produce(context.Background(), req)())[0]; c != 0 {
		t.Fatalf("code %d", c)
	}
}

// TestSealByBatchCount: a file never holds more than MaxBatchesPerFile
// batches, and a request with more is refused.
func TestSealByBatchCount(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Hour, MaxBatchesPerFile: 2})
	w1 := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}))
	w2 := r.h.Produce(context.Background(), request(9, -1, "ct", part{1, good(1)}, part{2, good(1)}))
	// The second request did not fit with the first: the first file was
	// sealed at once and committed without waiting for its age.
	if c := codes(w1())[0]; c != 0 {
		t.Fatalf("first request: code %d", c)
	}
	big := request(9, -1, "ct", part{0, good(1)}, part{1, good(1)}, part{2, good(1)})
	wantAll(t, r.h.Produce(context.Background(), big)(), 3, kerr.InvalidRequest.Code, "request over MaxBatchesPerFile")
	r.h.Close(context.Background())
	if c := codes(w2()); c[0] != 0 || c[1] != 0 {
		t.Fatalf("second request: codes %v", c)
	}
	for key, bs := range r.cm.got {
		if len(bs) > 2 {
			t.Fatalf("file %s committed %d batches", key, len(bs))
		}
	}
}

// TestSealBySizeAndAge: a file is sealed as soon as it reaches
// BufferMaxBytes, and otherwise exactly CommitInterval after its first
// batch.
func TestSealBySizeAndAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{CommitInterval: time.Second, BufferMaxBytes: 1000, MaxPendingBytes: 1 << 20})
		start := time.Now()
		// Small: waits for the age seal.
		wait := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}))
		wait()
		if d := time.Since(start); d != time.Second {
			t.Fatalf("small file sealed after %v, want the commit interval (1s)", d)
		}
		// Large: sealed at once.
		start = time.Now()
		big := batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: make([]byte, 2000)})
		r.h.Produce(context.Background(), request(9, -1, "ct", part{1, big}))()
		if d := time.Since(start); d != 0 {
			t.Fatalf("full file sealed after %v, want at once", d)
		}
		if len(r.cm.order) != 2 {
			t.Fatalf("%d files committed, want 2", len(r.cm.order))
		}
	})
}

// TestCommitOrderIsSealOrder: a later file whose upload finishes first still
// commits after the earlier one (DESIGN §Produce step 6).
func TestCommitOrderIsSealOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{CommitInterval: time.Millisecond, UploadConcurrency: 2})
		r.up.block = func(n int) {
			if n == 1 {
				time.Sleep(time.Second) // the first file uploads slowly
			}
		}
		w1 := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}))
		time.Sleep(10 * time.Millisecond) // first file sealed and uploading
		w2 := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}))
		p2 := w2().Topics[0].Partitions[0]
		p1 := w1().Topics[0].Partitions[0]
		if p1.BaseOffset != 0 || p2.BaseOffset != 1 {
			t.Fatalf("offsets %d then %d: commit order must follow seal order", p1.BaseOffset, p2.BaseOffset)
		}
		if r.cm.order[0] != "wal/0001" {
			t.Fatalf("commit order %v", r.cm.order)
		}
	})
}

// TestAnsweredByTimeout: a file whose commit does not complete (its
// coordinator cut off from the metadata log) answers its requests
// REQUEST_TIMED_OUT at their timeout, as Kafka's leader answers a produce
// not replicated in time, and is still committed later; a request with no
// timeout waits for the commit. Without the bound the request waited for
// the commit however long (a cut-off sidecar held one over 30 s).
func TestAnsweredByTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{CommitInterval: time.Millisecond})
		r.cm.hold = make(chan struct{})
		req := request(9, -1, "ct", part{0, good(1)}, part{1, good(1)})
		req.TimeoutMillis = 5000
		start := time.Now()
		resp := r.h.Produce(context.Background(), req)()
		if time.Since(start) != 5*time.Second {
			t.Fatalf("answered after %v, want its 5 s timeout", time.Since(start))
		}
		wantAll(t, resp, 2, kerr.RequestTimedOut.Code, "REQUEST_TIMED_OUT")
		untimed := request(9, -1, "ct", part{2, good(1)})
		untimed.TimeoutMillis = 0
		w := r.h.Produce(context.Background(), untimed)
		time.Sleep(time.Minute)
		close(r.cm.hold)
		if c := codes(w())[0]; c != 0 {
			t.Fatalf("no timeout: code %d, want the commit's answer", c)
		}
		r.h.Close(context.Background())
		if len(r.cm.order) != 2 {
			t.Fatalf("%d files committed, want 2 (the timed-out one too)", len(r.cm.order))
		}
	})
}

// TestMemoryBound: with the pipeline full, a request waits, up to its
// timeout, then gets REQUEST_TIMED_OUT and nothing of it is stored; when
// memory frees up, requests proceed.
func TestMemoryBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		r := newRig(t, Config{CommitInterval: time.Millisecond, BufferMaxBytes: 100, MaxPendingBytes: 300})
		r.up.block = func(n int) {
			if n == 1 {
				<-release
			}
		}
		first := batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: make([]byte, 200)})
		w1 := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, first}))
		second := request(9, -1, "ct", part{1, first})
		second.TimeoutMillis = 500
		start := time.Now()
		resp := r.h.Produce(context.Background(), second)()
		if c := codes(resp)[0]; c != kerr.RequestTimedOut.Code || time.Since(start) != 500*time.Millisecond {
			t.Fatalf("second request: code %d after %v, want REQUEST_TIMED_OUT after its 500ms timeout", c, time.Since(start))
		}
		close(release)
		if c := codes(w1())[0]; c != 0 {
			t.Fatalf("first request: code %d", c)
		}
		if c := codes(r.h.Produce(context.Background(), request(9, -1, "ct", part{1, first}))())[0]; c != 0 {
			t.Fatalf("after memory was freed: code %d", c)
		}
	})
}

func TestUploadFailureFailsTheFile(t *testing.T) {
	r := newRig(t, Config{CommitInterval: time.Millisecond})
	r.up.fail = errors.New("bucket gone")
	resp := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}, part{1, good(1)}))()
	wantAll(t, resp, 2, kerr.KafkaStorageError.Code, "KAFKA_STORAGE_ERROR")
	if len(r.cm.order) != 0 {
		t.Fatal("a file that failed to upload was committed")
	}
}

// TestCloseDrains: Close finishes the active file and its answers; later
// requests are turned away with a retriable error.
func TestCloseDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, Config{CommitInterval: time.Hour})
		wait := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(2)}))
		if err := r.h.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if c := codes(wait())[0]; c != 0 {
			t.Fatalf("request in flight at Close: code %d", c)
		}
		if c := codes(r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}))())[0]; c != kerr.NotLeaderForPartition.Code {
			t.Fatalf("request after Close: code %d, want NOT_LEADER_OR_FOLLOWER", c)
		}
		if err := r.h.Close(context.Background()); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestConfigValidate(t *testing.T) {
	_, err := New(Config{BufferMaxBytes: 100, MaxPendingBytes: 10}, newCatalog(), &fakeUploader{}, &fakeCommitter{}, nil)
	if err == nil {
		t.Fatal("max pending below buffer size accepted")
	}
}

// TestSealAtOrPastBuffer: the request that takes the active file to
// BufferMaxBytes or past it goes into that file, which is sealed at once: a
// file sealed by size holds between the buffer and the buffer plus one
// request, never well below the buffer (issue 9, write cost: sealing before
// the crossing request made objects of 6.3–7.2 MiB for an 8 MiB buffer).
func TestSealAtOrPastBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const buffer = 1000
		r := newRig(t, Config{CommitInterval: time.Second, BufferMaxBytes: buffer})
		mk := func() []byte {
			return batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: make([]byte, 300)})
		}
		reqSize := len(mk())
		var waits []func() *kmsg.ProduceResponse
		start := time.Now()
		for i := range 10 {
			waits = append(waits, r.h.Produce(context.Background(), request(9, -1, "ct", part{int32(i % 2), mk()})))
		}
		for _, w := range waits[:8] { // 10 × ~370 bytes: files of 3 requests, the last one by age
			w()
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("full files sealed after %v, want at once", d)
		}
		for _, w := range waits[8:] {
			w()
		}
		if len(r.up.objects) != 4 {
			t.Fatalf("%d objects, want 4 (3 full files and the rest by age)", len(r.up.objects))
		}
		full := 0
		for k, o := range r.up.objects {
			switch {
			case len(o) >= buffer && len(o) < buffer+reqSize:
				full++
			case len(o) == 1*reqSize:
			default:
				t.Errorf("object %s is %d bytes: neither in [buffer, buffer + one request) = [%d, %d) nor the age-sealed rest", k, len(o), buffer, buffer+reqSize)
			}
		}
		if full != 3 {
			t.Fatalf("%d files sealed at the buffer, want 3", full)
		}
	})
}

// TestRefusedBytesAreNotKept: when part of a request is refused, the
// pipeline keeps its own copy of the accepted batches, not views into the
// request's frame, which the server stops accounting for once it answers
// (acks=0 at once, or a client gone) while the memory bound counts only the
// accepted bytes.
func TestRefusedBytesAreNotKept(t *testing.T) {
	for _, acks := range []int16{0, -1} {
		t.Run(fmt.Sprintf("acks=%d", acks), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, Config{CommitInterval: time.Second})
				b, refused := good(1), good(100)
				refused[len(refused)-1] ^= 1 // breaks the CRC
				want := bytes.Clone(b)
				wait := r.h.Produce(context.Background(), request(9, acks, "ct", part{0, b}, part{1, refused}))
				clear(b) // as if the frame's memory were reused
				if resp := wait(); acks != 0 && (resp == nil || resp.Topics[0].Partitions[1].ErrorCode != kerr.CorruptMessage.Code) {
					t.Fatalf("answer %+v, want CORRUPT_MESSAGE on partition 1", resp)
				}
				if err := r.h.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got := r.up.objects[r.cm.order[0]]; !bytes.Equal(got, want) {
					t.Fatal("the stored batch changed with the request's frame: the pipeline kept a view, not a copy")
				}
			})
		})
	}
}

// TestCloseHonoursDeadline: with the store never answering and the
// pipeline's queues full (so that sealing blocks while holding the handler's
// lock), Close still returns ctx's error at its deadline, and every request
// is answered.
func TestCloseHonoursDeadline(t *testing.T) {
	old := queueDepth
	queueDepth = 1
	defer func() { queueDepth = old }()
	// Real time: a produce request waiting on the handler's mutex is not
	// durably blocked, so a synctest bubble's clock would never advance.
	{
		r := newRig(t, Config{CommitInterval: time.Millisecond, UploadConcurrency: 1})
		r.up.hang = true
		// Appending waits for the lock a blocked seal holds, so each
		// request is made from its own goroutine.
		answers := make(chan *kmsg.ProduceResponse, 5)
		for i := range 5 {
			go func() {
				answers <- r.h.Produce(context.Background(), request(9, -1, "ct", part{int32(i % 3), good(1)}))()
			}()
			time.Sleep(10 * time.Millisecond) // each its own file
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.h.Close(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Close past its deadline returned %v, want %v", err, context.DeadlineExceeded)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close still waiting 10s after it was called, long past its 200ms deadline")
		}
		for range 5 {
			resp := <-answers
			for _, tp := range resp.Topics {
				for _, p := range tp.Partitions {
					if p.ErrorCode == 0 {
						t.Fatal("a request whose file was never stored was answered with success")
					}
				}
			}
		}
	}
}

// nopUploader and nopCommitter keep nothing, so that BenchmarkProduce
// measures the handler and its pipeline alone.
type nopUploader struct{}

func (nopUploader) Upload(context.Context, []byte) (string, error) { return "wal/k", nil }

type nopCommitter struct{}

func (nopCommitter) Commit(_ context.Context, _ string, _ int64, bs []diskless.CommitBatch) []diskless.CommitBatchResult {
	return make([]diskless.CommitBatchResult, len(bs))
}

// BenchmarkProduce measures one acks=-1 request of three partitions of 1 KiB
// batches through validation, the active file, packing and the fake upload
// and commit, each request sealing its own file; "with-refused" adds a
// fourth partition whose batch is corrupt, so the accepted batches are
// copied out of the request.
func BenchmarkProduce(b *testing.B) {
	mk := func() []byte {
		return batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: make([]byte, 1<<10)})
	}
	corrupt := mk()
	corrupt[len(corrupt)-1] ^= 1
	for _, c := range []struct {
		name  string
		parts []part
	}{
		{"all-valid", []part{{0, mk()}, {1, mk()}, {2, mk()}}},
		{"with-refused", []part{{0, mk()}, {1, mk()}, {2, mk()}, {0, nil}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, err := New(Config{BufferMaxBytes: 1}, newCatalog(), nopUploader{}, nopCommitter{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer h.Close(context.Background())
			req := request(9, -1, "ct", c.parts...)
			if len(c.parts) == 4 {
				// The refused batch goes to another topic so that the
				// request names no partition twice.
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "lat"
				rt.Partitions = []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: corrupt}}
				req.Topics[0].Partitions = req.Topics[0].Partitions[:3]
				req.Topics = append(req.Topics, rt)
			}
			benchProduce(b, h.Produce, req, c.parts[:3])
		})
	}
}

// benchProduce sends req through produce, waiting for each answer, until
// b's loop ends; bytes per request are those of the accepted parts' batches.
func benchProduce(b *testing.B, produce func(context.Context, *kmsg.ProduceRequest) func() *kmsg.ProduceResponse,
	req *kmsg.ProduceRequest, accepted []part) {
	var n int64
	for _, p := range accepted {
		n += int64(len(p.records))
	}
	b.SetBytes(n)
	b.ReportAllocs()
	for b.Loop() {
		resp := produce(context.Background(), req)()
		if resp.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("code %d", resp.Topics[0].Partitions[0].ErrorCode)
		}
	}
}

// TestUploadFailureLogIsRateLimited: producers that keep sending while
// the store is down make one error line, not one per file (DESIGN
// §Logging); every request still gets KAFKA_STORAGE_ERROR.
func TestUploadFailureLogIsRateLimited(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	r := newRig(t, Config{CommitInterval: time.Millisecond, Logger: log})
	r.up.fail = errors.New("store down")
	for range 20 {
		resp := r.h.Produce(context.Background(), request(9, -1, "ct", part{0, good(1)}))()
		wantAll(t, resp, 1, kerr.KafkaStorageError.Code, "KAFKA_STORAGE_ERROR")
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "upload failed"); n != 1 {
		t.Fatalf("%d upload-failed lines for 20 failed files, want 1 (then a summary a minute):\n%s", n, logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
