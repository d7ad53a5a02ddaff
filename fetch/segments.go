package fetch

import (
	"container/list"
	"context"
	"fmt"
	"sync"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/segment"
)

// Segment objects (docs/format/segment-object.md). The coordinator
// answers a consolidated range of a partition as one run covering a whole
// segment object's data (diskless.RunCoordinate.Segment); fetch reads the
// object's index — through the block cache, once, then from a cache of
// decoded indexes of its own (segmentIndexes) — and replaces that run by
// the index entries it needs: from the one holding the fetch offset, as
// many as the partition's limit may take. Each entry is a run of whole
// batches with its own append time and max timestamp, so everything after
// (the budgets, the spans — adjacent entries are one range, one GET —, the
// check, the walk, the rewrite) treats it as a WAL run.

// segmentIndex is one segment object's decoded index.
type segmentIndex struct {
	trailer segment.Trailer
	entries []segment.Entry
}

// entryRun returns entry i of the segment seg as a run of its own, in the
// segment object.
func (x *segmentIndex) entryRun(seg *diskless.RunCoordinate, i int) diskless.RunCoordinate {
	e := &x.entries[i]
	first := x.trailer.BaseOffset + int64(e.OffsetDelta)
	return diskless.RunCoordinate{
		ObjectKey:         seg.ObjectKey,
		FileSize:          seg.FileSize,
		ByteOffset:        int64(e.Position),
		ByteSize:          int32(e.Size),
		BaseOffset:        first,
		LastOffset:        first + int64(e.LastOffsetDelta),
		TimestampType:     e.TimestampType,
		LogAppendTime:     e.AppendTime,
		BatchMaxTimestamp: e.MaxTimestamp,
	}
}

// segmentIndexes caches decoded segment indexes by object key, least
// recently used first out, bounded by their entries' bytes.
type segmentIndexes struct {
	mu    sync.Mutex
	max   int64
	size  int64
	byKey map[string]*list.Element
	lru   list.List // of *indexItem, most recent first
}

type indexItem struct {
	key string
	x   *segmentIndex
}

func newSegmentIndexes(maxBytes int64) *segmentIndexes {
	return &segmentIndexes{max: maxBytes, byKey: make(map[string]*list.Element)}
}

func indexBytes(x *segmentIndex) int64 { return int64(len(x.entries))*48 + 64 }

func (c *segmentIndexes) get(key string) *segmentIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*indexItem).x
	}
	return nil
}

func (c *segmentIndexes) put(key string, x *segmentIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	c.byKey[key] = c.lru.PushFront(&indexItem{key, x})
	c.size += indexBytes(x)
	for c.size > c.max && c.lru.Len() > 1 {
		el := c.lru.Back()
		it := el.Value.(*indexItem)
		c.lru.Remove(el)
		delete(c.byKey, it.key)
		c.size -= indexBytes(it.x)
	}
}

// indexChecker checks a segment object's index and trailer as read: the
// decoded index is kept for the caller.
type indexChecker struct {
	seg *diskless.RunCoordinate
	x   *segmentIndex
}

func (c *indexChecker) Check(_ int, p []byte) error {
	tr, es, err := segment.DecodeIndex(p, int64(c.seg.ByteSize), c.seg.FileSize)
	if err != nil {
		return err
	}
	if tr.BaseOffset != c.seg.BaseOffset || tr.BaseOffset+int64(es[len(es)-1].OffsetDelta)+int64(es[len(es)-1].LastOffsetDelta) != c.seg.LastOffset {
		return fmt.Errorf("%w: the index holds offsets from %d, the coordinate [%d, %d]", segment.ErrCorrupt, tr.BaseOffset, c.seg.BaseOffset, c.seg.LastOffset)
	}
	c.x = &segmentIndex{trailer: tr, entries: es}
	return nil
}

// segmentIndexOf returns seg's decoded index: cached, or read through the
// ObjectReader (one range: the object's bytes after its data) and
// checked. Errors: the read's, or one wrapping cache.ErrCorrupt when the
// index fails its check twice.
func (h *Handler) segmentIndexOf(ctx context.Context, seg *diskless.RunCoordinate) (*segmentIndex, error) {
	if x := h.indexes.get(seg.ObjectKey); x != nil {
		return x, nil
	}
	rs := []cache.Range{{Off: int64(seg.ByteSize), P: make([]byte, seg.FileSize-int64(seg.ByteSize))}}
	check := &indexChecker{seg: seg}
	o := cache.Object{Key: seg.ObjectKey, Size: seg.FileSize, WrittenMs: seg.LogAppendTime, SequentialEnd: int64(seg.ByteSize)}
	if err := h.r.ReadRanges(ctx, o, rs, check); err != nil {
		return nil, fmt.Errorf("fetch: read the index of segment %s: %w", seg.ObjectKey, err)
	}
	if check.x == nil {
		// The range was verified before (a block this sidecar put, or
		// one checked whole): decode it here.
		if err := check.Check(0, rs[0].P); err != nil {
			return nil, fmt.Errorf("fetch: the index of segment %s: %w", seg.ObjectKey, err)
		}
	}
	h.indexes.put(seg.ObjectKey, check.x)
	return check.x, nil
}

// expandSegments replaces rs (a partition's runs from FindBatches, the
// first holding offset) by the index entries of its first segment object
// when rs starts with one: from the entry holding offset, until limit
// bytes are reached — a read never needs more — or the segment's end. A
// partition's segments come before its WAL runs (the coordinator swaps
// the oldest runs for a segment), so runs that do not start with a
// segment are WAL runs alone and are returned as they are. It returns the
// runs, the run after them (next, when the expansion stopped inside the
// segment: its following entry) and the segment's data size (where its
// reader is done with it: cache.Object.SequentialEnd), 0 for WAL runs.
func (h *Handler) expandSegments(ctx context.Context, rs []diskless.RunCoordinate, next diskless.RunCoordinate,
	offset int64, limit int64) ([]diskless.RunCoordinate, diskless.RunCoordinate, int64, error) {
	if len(rs) == 0 || !rs[0].Segment() {
		return rs, next, 0, nil
	}
	seg := &rs[0]
	x, err := h.segmentIndexOf(ctx, seg)
	if err != nil {
		return nil, diskless.RunCoordinate{}, 0, err
	}
	j := segment.Find(x.entries, x.trailer.BaseOffset, offset)
	if j == len(x.entries) {
		return nil, diskless.RunCoordinate{}, 0, fmt.Errorf("%w: segment %s holds no offset %d", segment.ErrCorrupt, seg.ObjectKey, offset)
	}
	end := int64(seg.ByteSize)
	out := make([]diskless.RunCoordinate, 0, min(len(x.entries)-j, 8))
	served := int64(0)
	for ; j < len(x.entries); j++ {
		e := x.entryRun(seg, j)
		if len(out) > 0 && served >= limit {
			return out, e, end, nil
		}
		if len(out) == 0 {
			served += diskless.ServedEstimate(e.BaseOffset, e.LastOffset, e.ByteSize, offset)
		} else {
			served += int64(e.ByteSize)
		}
		out = append(out, e)
	}
	// A read stops at a segment's end, as Kafka's does at a log segment's:
	// the next fetch starts in the next object, once this one's reader is
	// done with it (a lagging reader's catch-up read of the next segment
	// then has this one to evict: cache.Object's SequentialEnd).
	if len(rs) > 1 {
		next = rs[1]
	}
	return out, next, end, nil
}
