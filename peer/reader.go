package peer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Reader is the fetch path's coordinator in a cluster (fetch.Coordinator;
// DESIGN §Read replicas): FindBatches, the catalog and the commit signal
// from this sidecar's own coordinator — every shard's state is here, as
// its owner's or as a replica — and ListOffsets from the owner, whose
// answer must be current (SPEC §9).
//
// A replica may lag its owner by the time a group takes to reach it: a
// consumer that learned an offset from the owner (ListOffsets, a
// committed offset) may fetch it before the replica has it. FindBatches
// answers such an offset as "nothing yet" — the fetch then long-polls,
// woken when the replica applies the group — when the owner's high
// watermark holds it, and OFFSET_OUT_OF_RANGE only when the owner's does
// not either: one ListOffsets at the owner, and only then.
type Reader struct {
	local  Local
	router *Router
}

// NewReader returns the Reader over this sidecar's coordinator and the
// router.
func NewReader(local Local, router *Router) *Reader { return &Reader{local: local, router: router} }

func (r *Reader) Topic(name string) (diskless.Topic, bool)             { return r.local.Topic(name) }
func (r *Reader) TopicByID(id diskless.TopicID) (diskless.Topic, bool) { return r.local.TopicByID(id) }
func (r *Reader) Watch() <-chan struct{}                               { return r.local.Watch() }
func (r *Reader) ShardFor(id diskless.TopicID, partition int32) int32 {
	return r.router.ShardFor(id, partition)
}

// FindBatches answers each request from this sidecar's state (see
// Reader).
func (r *Reader) FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult {
	out := r.local.FindBatches(ctx, reqs)
	for i := range out {
		res, q := &out[i], &reqs[i]
		if res.Err != kerr.OffsetOutOfRange || q.Offset <= res.HighWatermark {
			continue
		}
		tp := diskless.TopicPartition{TopicID: q.TopicID, Partition: q.Partition}
		lo := r.router.ListOffsets(ctx, tp, diskless.ListOffsetsLatest)
		if lo.Err == nil && lo.Offset >= q.Offset {
			// Ahead of this replica, not of the owner: nothing yet.
			*res = diskless.FindBatchesResult{LogStartOffset: res.LogStartOffset, HighWatermark: res.HighWatermark, LastStableOffset: res.LastStableOffset}
		}
	}
	return out
}

// ListOffsets and ListOffsetsFrom go to the partition's owner.
func (r *Reader) ListOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp int64) diskless.ListOffsetsResult {
	return r.router.ListOffsets(ctx, tp, timestamp)
}

func (r *Reader) ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult {
	return r.router.ListOffsetsFrom(ctx, tp, timestamp, from)
}
