package peer

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// laggingLocal is a sidecar whose state of every partition is empty: a
// replica that has not caught up yet.
type laggingLocal struct{ Local }

func (laggingLocal) FindBatches(_ context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	out := make([]diskless.FindBatchesResult, len(reqs))
	for i, q := range reqs {
		out[i] = diskless.FindBatchesResult{LogStartOffset: 0, HighWatermark: 0}
		if q.Offset > 0 {
			out[i].Err = kerr.OffsetOutOfRange
		}
	}
	return out
}

// TestReaderLaggingReplica: an offset past this sidecar's state but within
// the owner's high watermark is "nothing yet" (the fetch waits); past the
// owner's too, OFFSET_OUT_OF_RANGE as before; ListOffsets is the owner's.
func TestReaderLaggingReplica(t *testing.T) {
	a, b := startNodes(t, 1, 2)
	ctx := context.Background()
	r, _ := newRouter(t, a, newPlacement(b.sidecar()))
	topic, err := b.coord.CreateTopic(ctx, "t", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := b.coord.ShardFor(topic.ID, 0)
	req := commitReq(topic, 0, "wal/lag", 3, -1, 0)
	req.OwnerIDs = []int32{s}
	if _, err := b.coord.CommitFile(ctx, s, req); err != nil {
		t.Fatal(err)
	}
	rd := NewReader(laggingLocal{a.coord}, r)
	got := rd.FindBatches(ctx, []diskless.FindBatchesRequest{
		{TopicID: topic.ID, Partition: 0, Offset: 2, MaxBytes: 1 << 20},
		{TopicID: topic.ID, Partition: 0, Offset: 7, MaxBytes: 1 << 20},
	})
	if got[0].Err != nil || len(got[0].Runs) != 0 || got[0].HighWatermark != 0 {
		t.Fatalf("an offset the owner has: %+v, want nothing yet", got[0])
	}
	if got[1].Err != kerr.OffsetOutOfRange {
		t.Fatalf("an offset past the owner's end: %+v", got[1])
	}
	if l := rd.ListOffsets(ctx, diskless.TopicPartition{TopicID: topic.ID}, diskless.ListOffsetsLatest); l.Offset != 3 {
		t.Fatalf("ListOffsets through the reader: %+v, want the owner's 3", l)
	}
}
