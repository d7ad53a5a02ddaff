package e2e

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// producedCase is one Produce partition sent to Apache Kafka and to the
// sidecar alike: a batch as a client could build it, the error code Kafka
// 4.4 answers (observed, pinned here), and, when it is accepted, what the
// stored batch's header must say and what ListOffsets must find.
type producedCase struct {
	name  string
	batch []byte
	want  *kerr.Error // nil: accepted
	// sidecar, when set, is the sidecar's answer where SPEC §2 departs
	// from Kafka's.
	sidecar *kerr.Error
	// For accepted batches: the stored header's max timestamp, and a
	// ListOffsets lookup (at, offset).
	maxTimestamp     int64
	lookupAt, lookup int64
}

// produceCases returns the cases of TestProduceValidationMatchesKafka for
// a CreateTime topic with message.timestamp.after.max.ms and
// message.timestamp.before.max.ms 60000 (a 1-minute window each side of
// now).
func produceCases(now int64) []producedCase {
	const minute = 60_000
	rec := func(tsDelta int64, off int32) []byte {
		return batchtest.EncodeRecord(tsDelta, off, []byte("k"+strconv.Itoa(int(off))), []byte("value"))
	}
	cat := func(rs ...[]byte) []byte {
		var b []byte
		for _, r := range rs {
			b = append(b, r...)
		}
		return b
	}
	raw := func(codec int8, maxTS int64, count, lastDelta int32, recs []byte) []byte {
		o := batchtest.Plain(now)
		o.Codec = codec
		return batchtest.Assemble(batchtest.Raw{Options: o, Records: recs, RecordsCount: count, LastOffsetDelta: lastDelta, MaxTimestamp: maxTS})
	}
	raw2 := func(codec int8, baseTS, maxTS int64, count, lastDelta int32, recs []byte) []byte {
		o := batchtest.Plain(baseTS)
		o.Codec = codec
		return batchtest.Assemble(batchtest.Raw{Options: o, Records: recs, RecordsCount: count, LastOffsetDelta: lastDelta, MaxTimestamp: maxTS})
	}
	// withLength returns r with its length prefix (one varint byte for
	// these small records) replaced by n.
	withLength := func(r []byte, n int) []byte {
		out := append([]byte(nil), r...)
		out[0] = byte(n << 1) // zig-zag, n < 64
		return out
	}
	// A record whose key length is a 6-byte varint: longer than a varint may be.
	longVarint := []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0}
	longVarint = append([]byte{byte(len(longVarint) << 1)}, longVarint...)
	// A record whose key length (40) runs past its end.
	keyPast := []byte{0, 0, 0, 40 << 1, 'k', 2 << 1, 'v', 0}
	keyPast = append([]byte{byte(len(keyPast) << 1)}, keyPast...)
	// A record whose key length is −2.
	keyMinus2 := []byte{0, 0, 0, 3, 2, 'v', 0}
	keyMinus2 = append([]byte{byte(len(keyMinus2) << 1)}, keyMinus2...)
	// A record with −2 headers.
	negHeaders := []byte{0, 0, 0, 2, 'k', 2, 'v', 3}
	negHeaders = append([]byte{byte(len(negHeaders) << 1)}, negHeaders...)
	// A record with one header whose key is null (length −1).
	nullHeaderKey := []byte{0, 0, 0, 2, 'k', 2, 'v', 2, 1, 2, 'x'}
	nullHeaderKey = append([]byte{byte(len(nullHeaderKey) << 1)}, nullHeaderKey...)

	var cs []producedCase
	for _, codec := range []int8{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		c := codecName(codec)
		// Kafka 4.4 stores an uncompressed batch whose offset deltas are
		// out of sequence as it is (its records then claim offsets they
		// do not have); in a compressed one they make it rebuild the
		// batch, which fails (UNKNOWN_SERVER_ERROR). It checks a record's
		// length against its fields in uncompressed batches only
		// (compressed ones are accepted, and ListOffsets on them then
		// fails). The sidecar refuses both with INVALID_RECORD (SPEC §2).
		var offsetsWant, lengthWant *kerr.Error = nil, kerr.InvalidRecord
		if codec != batch.CodecNone {
			offsetsWant, lengthWant = kerr.UnknownServerError, nil
		}
		cs = append(cs,
			producedCase{name: c + "/valid", batch: raw(codec, now+5, 2, 1, cat(rec(0, 0), rec(5, 1))),
				maxTimestamp: now + 5, lookupAt: now + 1, lookup: 1},
			producedCase{name: c + "/hidden future record", batch: raw(codec, now, 2, 1, cat(rec(0, 0), rec(10*minute, 1))), want: kerr.InvalidTimestamp},
			producedCase{name: c + "/hidden past record", batch: raw(codec, now, 2, 1, cat(rec(0, 0), rec(-10*minute, 1))), want: kerr.InvalidTimestamp},
			producedCase{name: c + "/header max below the records'", batch: raw(codec, now, 2, 1, cat(rec(0, 0), rec(30_000, 1))),
				maxTimestamp: now + 30_000, lookupAt: now + 10_000, lookup: 1},
			producedCase{name: c + "/header max above the records'", batch: raw(codec, now+30_000, 2, 1, cat(rec(0, 0), rec(0, 1))),
				maxTimestamp: now, lookupAt: now + 10_000, lookup: -1},
			producedCase{name: c + "/header max out of the window, records in it", batch: raw(codec, now+10*minute, 2, 1, cat(rec(0, 0), rec(5, 1))),
				maxTimestamp: now + 5, lookupAt: now + 1, lookup: 1},
			producedCase{name: c + "/base timestamp out of the window, records in it", batch: raw2(codec, now-10*minute, now, 2, 1, cat(rec(10*minute, 0), rec(10*minute+5, 1))),
				maxTimestamp: now + 5, lookupAt: now + 1, lookup: 1},
			producedCase{name: c + "/no timestamps", batch: raw2(codec, -1, -1, 2, 1, cat(rec(0, 0), rec(0, 1))),
				maxTimestamp: -1, lookupAt: now - 20_000, lookup: -1},
			// Kafka reads a length below −1 as null; the sidecar refuses it
			// (SPEC §2).
			producedCase{name: c + "/key length -2", batch: raw(codec, now, 1, 0, keyMinus2), sidecar: kerr.InvalidRecord},
			producedCase{name: c + "/count above the records", batch: raw(codec, now, 3, 2, cat(rec(0, 0), rec(0, 1))), want: kerr.InvalidRecord},
			producedCase{name: c + "/count below the records", batch: raw(codec, now, 2, 1, cat(rec(0, 0), rec(0, 1), rec(0, 2))), want: kerr.InvalidRecord},
			producedCase{name: c + "/offset deltas skip", batch: raw(codec, now, 2, 1, cat(rec(0, 0), rec(0, 2))),
				want: offsetsWant, sidecar: kerr.InvalidRecord},
			producedCase{name: c + "/offset deltas repeat", batch: raw(codec, now, 2, 1, cat(rec(0, 0), rec(0, 0))),
				want: offsetsWant, sidecar: kerr.InvalidRecord},
			producedCase{name: c + "/record length too long", batch: raw(codec, now, 2, 1, cat(withLength(rec(0, 0), len(rec(0, 0))), rec(0, 1))),
				want: lengthWant, sidecar: kerr.InvalidRecord},
			producedCase{name: c + "/record length too short", batch: raw(codec, now, 2, 1, cat(withLength(rec(0, 0), len(rec(0, 0))-2), rec(0, 1))),
				want: lengthWant, sidecar: kerr.InvalidRecord},
			producedCase{name: c + "/varint too long", batch: raw(codec, now, 1, 0, longVarint), want: kerr.InvalidRecord},
			producedCase{name: c + "/key past the record", batch: raw(codec, now, 1, 0, keyPast), want: kerr.InvalidRecord},
			producedCase{name: c + "/negative header count", batch: raw(codec, now, 1, 0, negHeaders), want: kerr.InvalidRecord},
			producedCase{name: c + "/null header key", batch: raw(codec, now, 1, 0, nullHeaderKey), want: kerr.InvalidRecord},
			producedCase{name: c + "/trailing bytes", batch: raw(codec, now, 1, 0, cat(rec(0, 0), []byte{1, 2, 3})), want: kerr.InvalidRecord},
		)
	}
	// Compressed garbage: the codec bits say lz4, the bytes are not.
	garbage := batchtest.Assemble(batchtest.Raw{Options: batchtest.Plain(now), Records: []byte("not an lz4 frame at all"), RecordsCount: 1, MaxTimestamp: now})
	garbage[21+1] |= batch.CodecLZ4
	batch.Header(garbage).UpdateCRC()
	cs = append(cs, producedCase{name: "lz4/garbage", batch: garbage, want: kerr.UnknownServerError})
	for _, c := range []int8{batch.CodecGzip, batch.CodecSnappy, batch.CodecZstd} {
		g := append([]byte(nil), garbage...)
		g[21+1] = g[21+1]&^batch.AttrCodecMask | byte(c)
		batch.Header(g).UpdateCRC()
		cs = append(cs, producedCase{name: codecName(c) + "/garbage", batch: g, want: kerr.UnknownServerError})
	}
	return cs
}

// codeOf is e's code, 0 for nil.
func codeOf(e *kerr.Error) int16 {
	if e == nil {
		return 0
	}
	return e.Code
}

func codecName(c int8) string {
	return [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[c]
}

// dialRaw opens a raw Kafka-protocol connection to addr.
func dialRaw(t *testing.T, addr string) *RawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &RawConn{t: t, conn: c}
}

func listOffsetAt(t *testing.T, what string, rc *RawConn, topic string, partition int32, ts int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 7
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rc.Request(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	mustNoErr(t, what+": ListOffsets", kerr.ErrorForCode(p.ErrorCode))
	return p.Offset
}

// produceEach sends batches[p] to partition p of topic in one request and
// returns each partition's error code, by partition (Kafka answers them in
// any order). Partitions answered NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_TOPIC_OR_PARTITION (a fresh Kafka topic whose leaders are not
// elected yet) are sent again, alone, for up to 30 s.
func produceEach(t *testing.T, rc *RawConn, topic string, batches [][]byte) []int16 {
	t.Helper()
	codes := make([]int16, len(batches))
	todo := make([]int32, len(batches))
	for i := range todo {
		todo[i] = int32(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(todo) > 0 {
		req := kmsg.NewPtrProduceRequest()
		req.Version, req.Acks, req.TimeoutMillis = 9, -1, 30000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for _, p := range todo {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, batches[p]
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := rc.Request(req).(*kmsg.ProduceResponse)
		todo = todo[:0]
		for _, rp := range resp.Topics[0].Partitions {
			codes[rp.Partition] = rp.ErrorCode
			if retry := rp.ErrorCode == kerr.NotLeaderForPartition.Code || rp.ErrorCode == kerr.UnknownTopicOrPartition.Code; retry && time.Now().Before(deadline) {
				todo = append(todo, rp.Partition)
			}
		}
		if len(todo) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return codes
}

// TestProduceValidationMatchesKafka sends batches whose headers hide or
// misstate their records to Apache Kafka 4.4 and to the sidecar (SPEC §2):
// both answer each partition with the same error code, pinned here as
// Kafka's, and for an accepted batch both store a header whose max
// timestamp is the records' true maximum, so ListOffsets finds the same
// offset.
func TestProduceValidationMatchesKafka(t *testing.T) {
	t.Parallel()
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 4*time.Minute)
	const topic = "strict"
	now := time.Now().UnixMilli()
	cases := produceCases(now)
	window := "60000"
	configs := map[string]*string{"message.timestamp.after.max.ms": &window, "message.timestamp.before.max.ms": &window}
	for _, adm := range []*kadm.Client{kc.Admin(t), kadm.NewClient(sc.Client())} {
		resp, err := adm.CreateTopic(ctx, int32(len(cases)), 1, configs, topic)
		mustNoErr(t, "CreateTopic", err)
		mustNoErr(t, "CreateTopic", resp.Err)
	}
	batches := make([][]byte, len(cases))
	for i, c := range cases {
		batches[i] = c.batch
	}
	targets := []struct {
		name string
		rc   *RawConn
	}{{"kafka", dialRaw(t, kc.BootstrapServers())}, {"sidecar", sc.DialRaw()}}
	for _, tg := range targets {
		codes := produceEach(t, tg.rc, topic, batches)
		for i, c := range cases {
			want := c.want
			if tg.name == "sidecar" && c.sidecar != nil {
				want = c.sidecar
			}
			if codes[i] != codeOf(want) {
				t.Errorf("%s %s: %v, want %v", tg.name, c.name, kerr.ErrorForCode(codes[i]), want)
				continue
			}
			if want != nil || c.sidecar != nil {
				continue // refused, or a departure: nothing stored to compare
			}
			f := fetchRaw(t, tg.rc, topic, int32(i), 0, 1<<20, 0)
			var maxTS int64 = -2
			mustNoErr(t, "walking", batch.Walk(f.RecordBatches, func(h batch.Header) error {
				if h.ComputeCRC() != h.CRC() {
					t.Errorf("%s %s: stored batch fails its CRC", tg.name, c.name)
				}
				maxTS = h.MaxTimestamp()
				return nil
			}))
			if maxTS != c.maxTimestamp {
				t.Errorf("%s %s: stored max timestamp now%+d, want now%+d", tg.name, c.name, maxTS-now, c.maxTimestamp-now)
			}
			if got := listOffsetAt(t, tg.name+" "+c.name, tg.rc, topic, int32(i), c.lookupAt); got != c.lookup {
				t.Errorf("%s %s: ListOffsets(now%+d) = %d, want %d", tg.name, c.name, c.lookupAt-now, got, c.lookup)
			}
		}
	}
}
