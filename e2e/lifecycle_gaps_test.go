package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/wal"
)

// localObjects returns the WAL objects of a sidecar with the local store
// (data.dir/objects), by path, each with the producer ids of its batches
// (wal.Walk over the object's bytes).
func localObjects(t *testing.T, sc *Sidecar) map[string][]int64 {
	t.Helper()
	root := filepath.Join(sc.DataDir, "objects")
	out := map[string][]int64{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted under the walk
			}
			return err
		}
		if d.IsDir() {
			if d.Name() == ".staging" {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		var pids []int64
		if err := wal.Walk(b, func(_ int, h batch.Header) error {
			if !slices.Contains(pids, h.ProducerID()) {
				pids = append(pids, h.ProducerID())
			}
			return nil
		}); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		out[path] = pids
		return nil
	})
	mustNoErr(t, "listing the objects", err)
	return out
}

// waitUntil polls ok every 50 ms until it holds, failing the test after
// within.
func waitUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeleteTopicDeletesOnlyItsObjects: topics A and B take records, A
// alone, then both at once (so that objects hold batches of both), then B
// alone; kafka-topics deletes A. With diskless.file.deletion.delay.ms=1000
// every object holding only A's batches leaves the store, every object
// holding one of B's stays, and B's records are all consumed as produced,
// byte for byte. Each topic is told in the objects by its producer's id.
func TestDeleteTopicDeletesOnlyItsObjects(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	sc := StartSidecar(t, "", "diskless.file.deletion.delay.ms=1000")
	ctx := testCtx(t, 4*time.Minute)
	const topicA, topicB = "del-a", "del-b"
	createTopic(t, ctx, sc, topicA, 2, nil)
	createTopic(t, ctx, sc, topicB, 2, nil)
	newProducer := func(topic string) (*kgo.Client, int64) {
		cl := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		id, _, err := cl.ProducerID(ctx)
		mustNoErr(t, "ProducerID "+topic, err)
		return cl, id
	}
	prodA, pidA := newProducer(topicA)
	prodB, pidB := newProducer(topicB)
	if pidA == pidB {
		t.Fatalf("both producers have id %d", pidA)
	}
	rnd := rand.New(rand.NewPCG(11, 12))
	var (
		mu    sync.Mutex
		sentB []*kgo.Record
	)
	produce := func(cl *kgo.Client, topic string, n int) {
		for i := range n {
			mu.Lock()
			v := make([]byte, 50+rnd.IntN(2000))
			for j := range v {
				v[j] = byte(rnd.Uint32())
			}
			mu.Unlock()
			r := &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", topic, i), Value: v}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Errorf("produce to %s: %v", topic, err)
				return
			}
			if topic == topicB {
				mu.Lock()
				sentB = append(sentB, r)
				mu.Unlock()
			}
		}
	}
	produce(prodA, topicA, 4)
	var wg sync.WaitGroup
	wg.Go(func() { produce(prodA, topicA, 20) })
	wg.Go(func() { produce(prodB, topicB, 20) })
	wg.Wait()
	produce(prodB, topicB, 4)
	if t.Failed() {
		t.FailNow()
	}

	var onlyA, holdsB []string
	shared := 0
	for path, pids := range localObjects(t, sc) {
		a, b := slices.Contains(pids, pidA), slices.Contains(pids, pidB)
		switch {
		case a && b:
			shared++
			holdsB = append(holdsB, path)
		case b:
			holdsB = append(holdsB, path)
		case a:
			onlyA = append(onlyA, path)
		default:
			t.Fatalf("%s holds batches of neither producer: %v", path, pids)
		}
	}
	t.Logf("objects: %d of A only, %d of both, %d of B only", len(onlyA), shared, len(holdsB)-shared)
	if len(onlyA) == 0 || shared == 0 || len(holdsB) == shared {
		t.Fatalf("the test needs objects of A only (%d), of both (%d) and of B only (%d)", len(onlyA), shared, len(holdsB)-shared)
	}

	tool(t, ctx, sc, "kafka-topics", "--delete", "--topic", topicA)
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }
	waitUntil(t, 90*time.Second, "the objects of A only deleted", func() bool {
		for _, p := range onlyA {
			if exists(p) {
				return false
			}
		}
		return true
	})
	// Three more deletion delays: an object of B's deleted by mistake
	// would be gone by then.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, p := range holdsB {
			if !exists(p) {
				t.Fatalf("%s, holding batches of %s, was deleted with %s", p, topicB, topicA)
			}
		}
	}
	left := localObjects(t, sc)
	if len(left) != len(holdsB) {
		t.Fatalf("%d objects left, want the %d holding batches of %s", len(left), len(holdsB), topicB)
	}

	cons := sc.Client(kgo.ConsumeTopics(topicB), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]*kgo.Record{}
	for len(got) < len(sentB) && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("consume %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got[fmt.Sprint(r.Partition, "/", r.Offset)] = r })
	}
	if len(got) != len(sentB) {
		t.Fatalf("consumed %d of %s's %d records", len(got), topicB, len(sentB))
	}
	for _, s := range sentB {
		r := got[fmt.Sprint(s.Partition, "/", s.Offset)]
		if r == nil || !bytes.Equal(r.Key, s.Key) || !bytes.Equal(r.Value, s.Value) {
			t.Fatalf("record %d/%d (%s) not consumed as produced", s.Partition, s.Offset, s.Key)
		}
	}
}

// produceOne sends one Produce request (kgo's Client.Request, the highest
// version both sides speak: v13 names the topic by id) with one batch of
// one record to partition 0 and returns the partition's answer.
func produceOne(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, id [16]byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("raw", 1)...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Request(ctx, req)
	mustNoErr(t, "Produce", err)
	pr := resp.(*kmsg.ProduceResponse)
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response shape: %+v", pr)
	}
	return pr.Topics[0].Partitions[0]
}

// TestDisablementProduceErrors: the errors a producer gets while a topic
// is DISABLING and once it is DISABLED are the ones SPEC §10 specifies.
// DISABLING lasts while the sidecar cannot confirm DisklessDisableTopic:
// a batch it accepted before waits for its object's upload, which the S3
// proxy holds (every PutObject stalled). Meanwhile a raw Produce gets
// NOT_ENOUGH_REPLICAS naming the state, and a kgo producer retries; once
// the uploads go through, the accepted batch's commit is refused (the
// coordinator stopped taking the topic's), the topic is DISABLED, both kgo
// producers fail with POLICY_VIOLATION, and a raw Produce gets
// POLICY_VIOLATION naming the state.
func TestDisablementProduceErrors(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	sc := StartSidecarS3(t, st, "")
	ctx := testCtx(t, 4*time.Minute)
	const topic = "dis-errs"
	createTopic(t, ctx, sc, topic, 1, nil)
	raw := sc.Client()
	adm := kadm.NewClient(raw)
	d, err := adm.ListTopics(ctx, topic)
	mustNoErr(t, "ListTopics", err)
	id := d[topic].ID
	if p := produceOne(t, ctx, raw, topic, id); p.ErrorCode != 0 {
		t.Fatalf("produce before the disablement: error %d", p.ErrorCode)
	}

	st.Proxy.Add(&s3fault.Rule{Kind: s3fault.PutObject, Fault: s3fault.Stall()})
	puts := st.Proxy.Count(s3fault.PutObject)
	accepted := make(chan error, 1)
	go func() {
		cl := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		accepted <- cl.ProduceSync(ctx, &kgo.Record{Value: []byte("accepted before")}).FirstErr()
	}()
	waitUntil(t, 60*time.Second, "the accepted batch's upload", func() bool { return st.Proxy.Count(s3fault.PutObject) > puts })

	enable := "false"
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "diskless.enable", Value: &enable}}, topic)
	mustNoErr(t, "AlterTopicConfigs", err)
	for _, r := range res {
		mustNoErr(t, "AlterTopicConfigs "+r.Name, r.Err)
	}
	waitState(t, sc, topic, "DISABLING", 30*time.Second)

	p := produceOne(t, ctx, raw, topic, id)
	if p.ErrorCode != kerr.NotEnoughReplicas.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "being disabled") {
		t.Fatalf("produce while DISABLING: error %d %v, want NOT_ENOUGH_REPLICAS (19) naming the state", p.ErrorCode, ptrString(p.ErrorMessage))
	}
	t.Logf("while DISABLING: %d %q", p.ErrorCode, *p.ErrorMessage)

	var produceAnswers atomic.Int64
	retrying := make(chan error, 1)
	go func() {
		cl := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0),
			kgo.WithHooks(produceReads{&produceAnswers}))
		retrying <- cl.ProduceSync(ctx, &kgo.Record{Value: []byte("while disabling")}).FirstErr()
	}()
	waitUntil(t, 60*time.Second, "the kgo producer's retries", func() bool { return produceAnswers.Load() >= 3 })
	select {
	case err := <-retrying:
		t.Fatalf("the kgo producer gave up while DISABLING: %v", err)
	default:
	}
	if st, _ := httpTopic(t, sc, topic); st.State != "DISABLING" {
		t.Fatalf("state %s before the uploads were let through, want DISABLING", st.State)
	}

	st.Proxy.Clear()
	select {
	case err := <-accepted:
		// Its commit came after the coordinator stopped taking the
		// topic's: refused with the retriable error, then refused again.
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("the batch accepted before the disablement: %v, want POLICY_VIOLATION after its retries", err)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the batch accepted before the disablement got no answer")
	}
	waitState(t, sc, topic, "DISABLED", 60*time.Second)
	select {
	case err := <-retrying:
		if !errors.Is(err, kerr.PolicyViolation) {
			t.Fatalf("the retrying kgo producer once DISABLED: %v, want POLICY_VIOLATION", err)
		}
		t.Logf("kgo once DISABLED: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the retrying kgo producer did not fail once DISABLED")
	}
	p = produceOne(t, ctx, raw, topic, id)
	if p.ErrorCode != kerr.PolicyViolation.Code || p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "is disabled") {
		t.Fatalf("produce once DISABLED: error %d %v, want POLICY_VIOLATION (44) naming the state", p.ErrorCode, ptrString(p.ErrorMessage))
	}
}

// produceReads counts the Produce answers a kgo client reads.
type produceReads struct{ n *atomic.Int64 }

func (h produceReads) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 0 && err == nil {
		h.n.Add(1)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestFetchByOldTopicID: after a topic is deleted and created again under
// its name, Fetch v13 (topics by id) of the old id answers
// UNKNOWN_TOPIC_ID and of the new id the new, empty log; Produce v13 by
// the old id gets UNKNOWN_TOPIC_ID too.
func TestFetchByOldTopicID(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "reborn"
	createTopic(t, ctx, sc, topic, 1, nil)
	prod := sc.Client(kgo.DefaultProduceTopic(topic))
	for i := range 3 {
		mustNoErr(t, "produce", prod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "old-%d", i)}).FirstErr())
	}
	adm := kadm.NewClient(sc.Client())
	rc := sc.DialRaw()
	topicID := func() [16]byte { // asked each time: kadm answers from a metadata cache
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 12
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp := rc.Request(req).(*kmsg.MetadataResponse)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
		}
		return resp.Topics[0].TopicID
	}
	oldID := topicID()
	fetch := func(id [16]byte) kmsg.FetchResponseTopic {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 13
		req.ReplicaID = -1
		req.MaxBytes = 1 << 20
		req.SessionEpoch = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.TopicID = id
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		fp.CurrentLeaderEpoch = -1
		fp.LogStartOffset = -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp := rc.Request(req).(*kmsg.FetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("fetch response: error %d, %+v", resp.ErrorCode, resp.Topics)
		}
		return resp.Topics[0]
	}
	if ft := fetch(oldID); ft.Partitions[0].ErrorCode != 0 || ft.Partitions[0].HighWatermark != 3 || len(ft.Partitions[0].RecordBatches) == 0 {
		t.Fatalf("fetch by id before the delete: error %d, hwm %d, %d bytes", ft.Partitions[0].ErrorCode, ft.Partitions[0].HighWatermark, len(ft.Partitions[0].RecordBatches))
	}

	del, err := adm.DeleteTopics(ctx, topic)
	mustNoErr(t, "DeleteTopics", err)
	mustNoErr(t, "DeleteTopics "+topic, del[topic].Err)
	cr, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	mustNoErr(t, "re-create", err)
	mustNoErr(t, "re-create", cr.Err)
	newID := topicID()
	if newID == oldID || [16]byte(cr.ID) != newID {
		t.Fatalf("ids: old %x, created %x, in Metadata %x", oldID, [16]byte(cr.ID), newID)
	}

	old := fetch(oldID)
	if old.TopicID != oldID || old.Partitions[0].ErrorCode != kerr.UnknownTopicID.Code || len(old.Partitions[0].RecordBatches) != 0 {
		t.Fatalf("fetch by the old id: topic id %x, error %d, %d bytes; want UNKNOWN_TOPIC_ID (100), no records",
			old.TopicID, old.Partitions[0].ErrorCode, len(old.Partitions[0].RecordBatches))
	}
	cur := fetch(newID)
	if p := cur.Partitions[0]; cur.TopicID != newID || p.ErrorCode != 0 || p.HighWatermark != 0 || p.LogStartOffset != 0 || len(p.RecordBatches) != 0 {
		t.Fatalf("fetch by the new id: topic id %x, error %d, hwm %d, log start %d, %d bytes; want the empty log",
			cur.TopicID, p.ErrorCode, p.HighWatermark, p.LogStartOffset, len(p.RecordBatches))
	}

	req := kmsg.NewPtrProduceRequest()
	req.Version = 13
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.TopicID = oldID
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("by-old-id", 1)...)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	presp := rc.Request(req).(*kmsg.ProduceResponse)
	if len(presp.Topics) != 1 || len(presp.Topics[0].Partitions) != 1 || presp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("produce by the old id: %+v, want UNKNOWN_TOPIC_ID (100)", presp.Topics)
	}
	if cur := fetch(newID); cur.Partitions[0].HighWatermark != 0 {
		t.Fatalf("the new topic's high watermark %d after a produce by the old id", cur.Partitions[0].HighWatermark)
	}
}
