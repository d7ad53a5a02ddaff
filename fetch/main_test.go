package fetch

import (
	"hash/crc32"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discardLogger = slog.New(slog.DiscardHandler)

// fp names one partition to fetch.
type fp struct {
	topic     string
	partition int32
	offset    int64
	maxBytes  int32 // 0 means 1 MiB
}

// fetchReq builds a Fetch request of version v (topics by id from v13),
// with max_bytes maxBytes (0: 50 MiB), min_bytes 0 and max_wait 0.
// Consecutive partitions of one topic share a topic entry.
func (e *env) fetchReq(v int16, maxBytes int32, parts ...fp) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = v
	req.MaxBytes = maxBytes
	if maxBytes == 0 {
		req.MaxBytes = 50 << 20
	}
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic = p.topic
			if top, ok := e.coord.Topic(p.topic); ok {
				t.TopicID = top.ID
			}
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p.partition
		rp.FetchOffset = p.offset
		rp.PartitionMaxBytes = p.maxBytes
		if p.maxBytes == 0 {
			rp.PartitionMaxBytes = 1 << 20
		}
		t := &req.Topics[len(req.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	return req
}

// flat returns the response's partitions in order.
func flat(resp *kmsg.FetchResponse) []*kmsg.FetchResponseTopicPartition {
	var out []*kmsg.FetchResponseTopicPartition
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			out = append(out, &resp.Topics[i].Partitions[j])
		}
	}
	return out
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// decodeBatches splits records into batches with kmsg, failing on a
// partial batch or a CRC that does not match.
func decodeBatches(tb testing.TB, records []byte) []kmsg.RecordBatch {
	tb.Helper()
	var out []kmsg.RecordBatch
	for len(records) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(records); err != nil {
			tb.Fatalf("decode batch: %v", err)
		}
		n := int(rb.Length) + 12
		if got := crc32.Checksum(records[21:n], crc32c); got != uint32(rb.CRC) {
			tb.Fatalf("batch at offset %d: crc %08x, computed %08x", rb.FirstOffset, uint32(rb.CRC), got)
		}
		out = append(out, rb)
		records = records[n:]
	}
	return out
}

// baseOffsets returns the base offset of each batch in records.
func baseOffsets(tb testing.TB, records []byte) []int64 {
	tb.Helper()
	out := []int64{}
	for _, rb := range decodeBatches(tb, records) {
		out = append(out, rb.FirstOffset)
	}
	return out
}

// consume decodes a partition as franz-go's consumer does, from offset on,
// and returns the records' offsets and timestamps (ms).
func consume(tb testing.TB, p *kmsg.FetchResponseTopicPartition, from int64) (offsets, timestamps []int64) {
	tb.Helper()
	got, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: from}, p, kgo.DefaultDecompressor(), nil)
	if got.Err != nil {
		tb.Fatalf("consume: %v", got.Err)
	}
	for _, r := range got.Records {
		offsets = append(offsets, r.Offset)
		timestamps = append(timestamps, r.Timestamp.UnixMilli())
	}
	return offsets, timestamps
}
