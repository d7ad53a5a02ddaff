package e2e

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

func createTopic(t *testing.T, ctx context.Context, sc *Sidecar, topic string, partitions int32, configs map[string]*string, opts ...kgo.Opt) {
	t.Helper()
	resp, err := kadm.NewClient(sc.Client(opts...)).CreateTopic(ctx, partitions, 1, configs, topic)
	mustNoErr(t, "CreateTopic", err)
	mustNoErr(t, "CreateTopic "+topic, resp.Err)
}

// produceRaw sends one Produce v9 request with the given batches, one per
// partition (index = partition), and returns the per-partition answers.
func produceRaw(t *testing.T, rc *RawConn, topic string, batches ...[]byte) []kmsg.ProduceResponseTopicPartition {
	t.Helper()
	byPartition := make(map[int32][]byte, len(batches))
	for p, b := range batches {
		byPartition[int32(p)] = b
	}
	resp := rc.Request(produceRequestTo(topic, byPartition)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(batches) {
		t.Fatalf("produce response shape: %+v", resp)
	}
	return resp.Topics[0].Partitions
}

func fetchRaw(t *testing.T, rc *RawConn, topic string, partition int32, offset int64, maxBytes int32, maxWait time.Duration) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := rc.Request(fetchRequest(topic, partition, offset, maxBytes, maxWait)).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// fetchRequest is a consumer's Fetch v11 of one partition from offset
// (at least 1 byte, waiting up to maxWait; no fetch session).
func fetchRequest(topic string, partition int32, offset int64, maxBytes int32, maxWait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = maxBytes
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = partition
	fp.FetchOffset = offset
	fp.PartitionMaxBytes = maxBytes
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	return req
}

// batchesIn returns the base offset and record count of each batch.
func batchesIn(t *testing.T, records []byte) (bases []int64, counts []int32) {
	t.Helper()
	err := batch.Walk(records, func(h batch.Header) error {
		if h.ComputeCRC() != h.CRC() {
			return fmt.Errorf("batch at %d fails its CRC", h.BaseOffset())
		}
		bases = append(bases, h.BaseOffset())
		counts = append(counts, h.RecordsCount())
		return nil
	})
	mustNoErr(t, "walking fetched batches", err)
	return bases, counts
}

// TestFetchEdges covers SPEC §4: the batch containing an offset in the
// middle of a compressed batch, the high watermark (empty; long-poll woken
// by a commit), out-of-range offsets with both offsets filled, and a batch
// larger than max_bytes still delivered.
func TestFetchEdges(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "fetch-edges"
	createTopic(t, ctx, sc, topic, 1, nil)
	rc := sc.DialRaw()
	now := time.Now().UnixMilli()

	// Offsets 0–9 in one gzip batch, 10–14 in a second one.
	b1 := batchtest.Make(batchtest.Options{Codec: batch.CodecGzip, BaseTimestamp: now, ProducerID: -1, BaseSequence: -1}, batchtest.Values("a", 10)...)
	b2 := batchtest.Make(batchtest.Plain(now), batchtest.Values("b", 5)...)
	for i, b := range [][]byte{b1, b2} {
		p := produceRaw(t, rc, topic, b)[0]
		if p.ErrorCode != 0 || p.BaseOffset != int64(10*i) {
			t.Fatalf("produce %d: error %d base %d", i, p.ErrorCode, p.BaseOffset)
		}
	}

	t.Run("middle of a compressed batch", func(t *testing.T) {
		p := fetchRaw(t, rc, topic, 0, 4, 1<<20, 0)
		if p.ErrorCode != 0 || p.HighWatermark != 15 || p.LogStartOffset != 0 || p.LastStableOffset != 15 {
			t.Fatalf("error %d hwm %d lso %d last stable %d", p.ErrorCode, p.HighWatermark, p.LogStartOffset, p.LastStableOffset)
		}
		bases, counts := batchesIn(t, p.RecordBatches)
		if len(bases) != 2 || bases[0] != 0 || counts[0] != 10 || bases[1] != 10 {
			t.Fatalf("batches %v counts %v, want the batch containing 4 first", bases, counts)
		}
		// A real consumer positioned at 4 sees records 4.. only.
		cons := sc.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(4)}}))
		fs := cons.PollRecords(ctx, 1)
		if errs := fs.Errors(); len(errs) > 0 {
			t.Fatal(errs[0].Err)
		}
		if r := fs.Records(); len(r) == 0 || r[0].Offset != 4 || string(r[0].Value) != "a-4" {
			t.Fatalf("first record consumed from 4: %+v", r)
		}
	})

	t.Run("batch larger than max_bytes", func(t *testing.T) {
		p := fetchRaw(t, rc, topic, 0, 0, 1, 0)
		bases, _ := batchesIn(t, p.RecordBatches)
		if p.ErrorCode != 0 || len(bases) != 1 || bases[0] != 0 {
			t.Fatalf("error %d, batches %v: the first batch must be delivered whatever max_bytes says (KIP-74)", p.ErrorCode, bases)
		}
	})

	t.Run("out of range", func(t *testing.T) {
		for _, off := range []int64{-1, 16, 1000} {
			p := fetchRaw(t, rc, topic, 0, off, 1<<20, 0)
			if p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 15 || p.LogStartOffset != 0 {
				t.Fatalf("offset %d: error %d hwm %d log start %d", off, p.ErrorCode, p.HighWatermark, p.LogStartOffset)
			}
		}
	})

	t.Run("at the high watermark", func(t *testing.T) {
		p := fetchRaw(t, rc, topic, 0, 15, 1<<20, 200*time.Millisecond)
		if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 15 {
			t.Fatalf("error %d, %d bytes, hwm %d: want empty without error", p.ErrorCode, len(p.RecordBatches), p.HighWatermark)
		}
		// A long-poll at the high watermark is woken by a commit.
		type result struct {
			p   kmsg.FetchResponseTopicPartition
			err error
		}
		done := make(chan result, 1)
		waiter := sc.DialRaw()
		go func() {
			resp, err := waiter.TryRequest(fetchRequest(topic, 0, 15, 1<<20, time.Minute))
			if err != nil {
				done <- result{err: err}
				return
			}
			done <- result{p: resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]}
		}()
		time.Sleep(300 * time.Millisecond) // let the fetch start waiting
		if p := produceRaw(t, rc, topic, batchtest.Make(batchtest.Plain(now), batchtest.Values("c", 1)...))[0]; p.ErrorCode != 0 {
			t.Fatalf("produce: %d", p.ErrorCode)
		}
		select {
		case r := <-done:
			mustNoErr(t, "long-poll fetch", r.err)
			bases, _ := batchesIn(t, r.p.RecordBatches)
			if len(bases) != 1 || bases[0] != 15 {
				t.Fatalf("long-poll returned batches %v, want the one at 15", bases)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a fetch waiting at the high watermark was not woken by a commit")
		}
	})
}

// TestLogAppendTime checks that consumers of a LogAppendTime topic see the
// coordinator's append time with a valid CRC, whatever time producers set.
func TestLogAppendTime(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "log-append-time"
	lat := "LogAppendTime"
	createTopic(t, ctx, sc, topic, 2, map[string]*string{"message.timestamp.type": &lat})

	old := time.Now().Add(-48 * time.Hour).Truncate(time.Millisecond)
	before := time.Now().Add(-time.Second)
	prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	recs := make([]*kgo.Record, 100)
	for i := range recs {
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, "v%d", i), Timestamp: old}
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	// The produce response carries the append time (kgo does not surface
	// it, so ask directly).
	raw := batchtest.Make(batchtest.Plain(old.UnixMilli()), batchtest.Values("raw", 1)...)
	if p := produceRaw(t, sc.DialRaw(), topic, raw)[0]; p.ErrorCode != 0 || p.LogAppendTime < before.UnixMilli() {
		t.Fatalf("raw produce: error %d, log_append_time %d, want ≥ %d", p.ErrorCode, p.LogAppendTime, before.UnixMilli())
	}
	after := time.Now().Add(time.Second)

	// kgo verifies every batch CRC; a bad one would surface as an error.
	got := consumeAll(t, ctx, sc, topic, 2, 101)
	for _, recs := range got {
		for _, r := range recs {
			if r.Attrs.TimestampType() != 1 {
				t.Fatalf("record %d: timestamp type %d, want 1 (LogAppendTime)", r.Offset, r.Attrs.TimestampType())
			}
			if r.Timestamp.Before(before) || r.Timestamp.After(after) {
				t.Fatalf("record %d: timestamp %v is not the append time (producer sent %v)", r.Offset, r.Timestamp, old)
			}
		}
	}

	// librdkafka with check.crcs=true verifies the recomputed CRC too.
	t.Run("kcat", func(t *testing.T) {
		requireTool(t, "kcat")
		out := kcat(t, ctx, "-b", sc.Addr, "-C", "-t", topic, "-e", "-q", "-X", "check.crcs=true", "-f", "%T %s\n")
		if n := len(lines(out)); n != 101 {
			t.Fatalf("kcat consumed %d records, want 101:\n%s", n, out)
		}
	})
}

// TestIdempotence sends the same idempotent batch twice: the second gets
// the original offset and nothing is stored twice; a gap in the sequence
// gets OUT_OF_ORDER_SEQUENCE_NUMBER (SPEC §3).
func TestIdempotence(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "idempotence"
	createTopic(t, ctx, sc, topic, 1, nil)
	rc := sc.DialRaw()

	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	init.TransactionTimeoutMillis = 60000
	init.ProducerID, init.ProducerEpoch = -1, -1
	ir := rc.Request(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 || ir.ProducerID < 0 {
		t.Fatalf("InitProducerId: error %d id %d", ir.ErrorCode, ir.ProducerID)
	}
	now := time.Now().UnixMilli()
	mk := func(seq int32, n int) []byte {
		return batchtest.Make(batchtest.Options{BaseTimestamp: now, ProducerID: ir.ProducerID, ProducerEpoch: ir.ProducerEpoch, BaseSequence: seq}, batchtest.Values(fmt.Sprint("s", seq), n)...)
	}
	first := mk(0, 3)
	p := produceRaw(t, rc, topic, first)[0]
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first send: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	p = produceRaw(t, rc, topic, mk(3, 2))[0]
	if p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("second batch: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	p = produceRaw(t, rc, topic, first)[0]
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("duplicate send: error %d base %d, want NONE with the original base offset 0", p.ErrorCode, p.BaseOffset)
	}
	p = produceRaw(t, rc, topic, mk(9, 1))[0]
	if p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: error %d, want OUT_OF_ORDER_SEQUENCE_NUMBER", p.ErrorCode)
	}
	f := fetchRaw(t, rc, topic, 0, 0, 1<<20, 0)
	bases, counts := batchesIn(t, f.RecordBatches)
	if f.HighWatermark != 5 || len(bases) != 2 || bases[0] != 0 || counts[0] != 3 || bases[1] != 3 {
		t.Fatalf("stored: hwm %d batches %v counts %v; want the first batch once, then the second", f.HighWatermark, bases, counts)
	}
}

// TestBadInput covers SPEC §2 and DESIGN invariant 7: a bad CRC fails only
// its partition, an oversized batch gets MESSAGE_TOO_LARGE, and a garbage
// frame closes only its own connection.
func TestBadInput(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "bad-input"
	maxBytes := "2000"
	createTopic(t, ctx, sc, topic, 3, map[string]*string{"max.message.bytes": &maxBytes})
	rc := sc.DialRaw()
	now := time.Now().UnixMilli()

	good := batchtest.Make(batchtest.Plain(now), batchtest.Values("good", 2)...)
	corrupt := batchtest.Make(batchtest.Plain(now), batchtest.Values("bad", 2)...)
	corrupt[len(corrupt)-1] ^= 0xff
	big := batchtest.Make(batchtest.Plain(now), batchtest.Record{Value: bytes.Repeat([]byte("x"), 5000)})
	ps := produceRaw(t, rc, topic, good, corrupt, big)
	if ps[0].ErrorCode != 0 || ps[0].BaseOffset != 0 {
		t.Fatalf("good partition: error %d base %d", ps[0].ErrorCode, ps[0].BaseOffset)
	}
	if ps[1].ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("bad CRC: error %d, want CORRUPT_MESSAGE", ps[1].ErrorCode)
	}
	if ps[2].ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("oversized batch: error %d, want MESSAGE_TOO_LARGE", ps[2].ErrorCode)
	}
	for p, want := range []int64{2, 0, 0} {
		f := fetchRaw(t, rc, topic, int32(p), 0, 1<<20, 0)
		if f.HighWatermark != want {
			t.Fatalf("partition %d: high watermark %d, want %d", p, f.HighWatermark, want)
		}
	}

	// Garbage: a frame whose body is not a request.
	garbage := sc.DialRaw()
	mustNoErr(t, "writing garbage", garbage.WriteRaw([]byte{0, 0, 0, 8, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}))
	if !garbage.WaitClosed(10 * time.Second) {
		t.Fatal("the sidecar kept a connection that sent a garbage frame")
	}
	// A frame claiming 2 GiB.
	huge := sc.DialRaw()
	mustNoErr(t, "writing huge size", huge.WriteRaw([]byte{0x7f, 0xff, 0xff, 0xff, 0, 0}))
	if !huge.WaitClosed(10 * time.Second) {
		t.Fatal("the sidecar kept a connection that announced a 2 GiB frame")
	}
	// The first connection, and new ones, still work.
	if p := produceRaw(t, rc, topic, good)[0]; p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("after garbage elsewhere: error %d base %d", p.ErrorCode, p.BaseOffset)
	}
	if p := produceRaw(t, sc.DialRaw(), topic, good)[0]; p.ErrorCode != 0 {
		t.Fatalf("new connection after garbage: error %d", p.ErrorCode)
	}
}

// TestConsumeWithLeaderEpochs: a kgo consumer that starts from offsets
// carrying a leader epoch (as kadm lists them, or as committed offsets
// are) validates them with OffsetForLeaderEpoch and consumes normally.
func TestConsumeWithLeaderEpochs(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, time.Minute)
	const topic = "epochs"
	createTopic(t, ctx, sc, topic, 2, nil)
	prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "e%d", i)})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())

	starts, err := kadm.NewClient(sc.Client()).ListStartOffsets(ctx, topic)
	mustNoErr(t, "ListStartOffsets", err)
	offsets := starts.KOffsets()
	if e := offsets[topic][0].EpochOffset().Epoch; e < 0 {
		t.Fatalf("listed offset carries no leader epoch (%d); the test needs one", e)
	}
	cons := sc.Client(kgo.ConsumePartitions(offsets), kgo.FetchMaxWait(200*time.Millisecond))
	got := 0
	for got < 20 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 20", got)
		}
		for _, e := range fs.Errors() {
			t.Fatalf("fetch error on %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		got += len(fs.Records())
	}
}
