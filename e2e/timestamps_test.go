package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffset asks ListOffsets for one timestamp (or -1 latest, -2
// earliest, -3 max timestamp) on partition 0, as kgo negotiates it.
func listOffset(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, ts int64) (offset, timestamp int64) {
	t.Helper()
	return listOffsetOf(t, ctx, cl, topic, 0, ts)
}

// listOffsetOf is listOffset for any partition.
func listOffsetOf(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partition int32, ts int64) (offset, timestamp int64) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	mustNoErr(t, "ListOffsets", err)
	p := resp.Topics[0].Partitions[0]
	mustNoErr(t, fmt.Sprintf("ListOffsets %d", ts), kerr.ErrorForCode(p.ErrorCode))
	return p.Offset, p.Timestamp
}

// TestListOffsetsByTimestamp looks records up by timestamp with kgo, the
// raw protocol and kcat (-o s@…), over three files: one plain batch, one
// zstd batch (the lookup decompresses it), and one whose records are out of
// timestamp order (max timestamp in its middle).
func TestListOffsetsByTimestamp(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, 2*time.Minute)
	const topic = "by-time"
	createTopic(t, ctx, sc, topic, 1, nil)
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	at := func(ms int64) time.Time { return time.UnixMilli(base + ms) }

	produce := func(codec kgo.CompressionCodec, stamps []int64) {
		prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
		defer prod.Close()
		var recs []*kgo.Record
		for _, ms := range stamps {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "at %d", ms), Timestamp: at(ms)})
		}
		mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	}
	var a, b, c []int64
	for i := range int64(10) {
		a = append(a, i*1000)         // offsets 0–9: 0 s … 9 s
		b = append(b, 100_000+i*1000) // offsets 10–19: 100 s … 109 s
		c = append(c, 200_000+i*1000) // offsets 20–29: 200 s … 209 s,
	}
	c[5] = 300_000 // but offset 25 is at 300 s, the partition's max
	produce(kgo.NoCompression(), a)
	produce(kgo.ZstdCompression(), b)
	produce(kgo.NoCompression(), c)

	cl := sc.Client()
	for _, tc := range []struct {
		name          string
		ts            int64
		offset, stamp int64
	}{
		{"inside the first batch", base + 5_000, 5, base + 5_000},
		{"between records", base + 5_500, 6, base + 6_000},
		{"between files", base + 50_000, 10, base + 100_000},
		{"inside the zstd batch", base + 105_500, 16, base + 106_000},
		{"past a smaller record in the third batch", base + 250_000, 25, base + 300_000},
		{"past every record", base + 300_001, -1, -1},
		{"max timestamp (-3)", -3, 25, base + 300_000},
		{"earliest (-2)", -2, 0, -1},
		{"latest (-1)", -1, 30, -1},
	} {
		offset, stamp := listOffset(t, ctx, cl, topic, tc.ts)
		if offset != tc.offset || stamp != tc.stamp {
			t.Errorf("%s: ListOffsets(%d) = offset %d timestamp %d, want %d %d", tc.name, tc.ts, offset, stamp, tc.offset, tc.stamp)
		}
	}

	// A kgo consumer that starts at a timestamp.
	cons := sc.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(base+105_500)))
	defer cons.Close()
	fs := cons.PollRecords(ctx, 1)
	mustNoErr(t, "poll", fs.Err0())
	if recs := fs.Records(); len(recs) == 0 || recs[0].Offset != 16 {
		t.Fatalf("kgo consuming after %d ms started at %v, want offset 16", base+105_500, recs)
	}

	t.Run("kcat", func(t *testing.T) {
		requireTool(t, "kcat")
		out := kcat(t, ctx, "-b", sc.Addr, "-C", "-t", topic, "-p", "0", "-o", "s@"+strconv.FormatInt(base+105_500, 10), "-c", "1", "-q", "-f", "%o\n")
		if got := strings.TrimSpace(out); got != "16" {
			t.Fatalf("kcat -o s@%d started at offset %q, want 16", base+105_500, got)
		}
	})
}
