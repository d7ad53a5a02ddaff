package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Bounds of the answer cache: recentCommitsPerShard is how many recent
// CommitFile answers a shard keeps to answer a repeated object key exactly
// as before, and recentCommitsMaxBatches bounds the batches they hold (56
// B each: at most 14 MiB per shard). An older key is still answered, from
// the file table (decide.go, replayCommit).
const (
	recentCommitsPerShard   = 4096
	recentCommitsMaxBatches = 1 << 18
)

// recentCommits remembers the answers of recent CommitFile calls by object
// key, FIFO-bounded by files and by batches, so a repeated key is answered
// exactly as before.
type recentCommits struct {
	byKey   map[string][]recentBatch
	order   []string // keys, oldest first from head
	head    int
	batches int // batches held in byKey
}

// recentBatch is one batch of a remembered commit: what identifies it
// (sameBatches) and its answer. It holds no pointer, so that the
// collector does not scan the cache (4096 files of up to thousands of
// batches), and one commit takes one allocation.
type recentBatch struct {
	tp             diskless.TopicPartition
	byteOffset     int32
	baseOffset     int64
	logAppendTime  int64
	logStartOffset int64
	errCode        int16
	duplicate      bool
}

func (rc *recentCommits) get(req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, bool) {
	bs, ok := rc.byKey[req.ObjectKey]
	if !ok || len(bs) != len(req.Batches) {
		return nil, false
	}
	for i := range bs {
		x, y := &bs[i], &req.Batches[i]
		if x.tp.TopicID != y.TopicID || x.tp.Partition != y.Partition || x.byteOffset != y.ByteOffset {
			return nil, false
		}
	}
	results := make([]diskless.CommitBatchResult, len(bs))
	for i := range bs {
		b := &bs[i]
		results[i] = diskless.CommitBatchResult{
			BaseOffset:     b.baseOffset,
			LogAppendTime:  b.logAppendTime,
			LogStartOffset: b.logStartOffset,
			Duplicate:      b.duplicate,
		}
		if b.errCode != 0 {
			results[i].Err = kerr.TypedErrorForCode(b.errCode)
		}
	}
	return results, true
}

func (rc *recentCommits) add(req *diskless.CommitFileRequest, results []diskless.CommitBatchResult) {
	if rc.byKey == nil {
		rc.byKey = make(map[string][]recentBatch)
	}
	if _, ok := rc.byKey[req.ObjectKey]; ok {
		return
	}
	defer rc.trim()
	rc.order = append(rc.order, req.ObjectKey)
	rc.batches += len(req.Batches)
	bs := make([]recentBatch, len(req.Batches))
	for i := range req.Batches {
		b, r := &req.Batches[i], &results[i]
		bs[i] = recentBatch{
			tp:             diskless.TopicPartition{TopicID: b.TopicID, Partition: b.Partition},
			byteOffset:     b.ByteOffset,
			baseOffset:     r.BaseOffset,
			logAppendTime:  r.LogAppendTime,
			logStartOffset: r.LogStartOffset,
			duplicate:      r.Duplicate,
		}
		if r.Err != nil {
			bs[i].errCode = r.Err.Code
		}
	}
	rc.byKey[req.ObjectKey] = bs
}

// trim forgets the oldest answers until both bounds hold.
func (rc *recentCommits) trim() {
	for len(rc.order)-rc.head > recentCommitsPerShard || rc.batches > recentCommitsMaxBatches {
		old := rc.order[rc.head]
		rc.batches -= len(rc.byKey[old])
		delete(rc.byKey, old)
		rc.order[rc.head] = ""
		rc.head++
	}
	if rc.head > 1024 && rc.head > len(rc.order)/2 {
		rc.order = append(rc.order[:0], rc.order[rc.head:]...)
		rc.head = 0
	}
}
