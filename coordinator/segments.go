package coordinator

import (
	"math"
	"sort"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/segment"
)

// A partition's index is its segments (partition.segs: segment objects,
// each one entry whatever it holds, docs/format/segment-object.md), then
// its WAL runs (partition.runs), in offset order and dense: consolidation
// (record 114, consolidate.go) moves the oldest WAL runs into a new
// segment at the end of segs. The entries are numbered across both, segs
// first: entry j < len(segs) is segs[j], entry j ≥ len(segs) is run
// j − len(segs). Segments are few — one per segment.bytes or segment.ms of
// a partition's data — and always published (they only ever replace runs
// readers already saw), so they are searched in a plain slice.

// segmentEntry is one segment object in a partition index (64 bytes).
type segmentEntry struct {
	baseOffset, lastOffset int64
	// maxTimestamp is the largest maxTimestamp of its batches, ms;
	// appendTime the latest log-append time of them.
	maxTimestamp int64
	appendTime   int64
	// prefixMaxTs is the largest effective max timestamp of this segment
	// and all before it. Derived: not in snapshots.
	prefixMaxTs int64
	// file is the segment object's slot in the file table.
	file int32
	// dataSize is the bytes of its batches (the object's data region).
	dataSize int32
	tsType   int8
}

// effectiveMaxTs is the segment's effective max timestamp (SPEC §5): its
// latest append time on LogAppendTime, else its producers' largest.
func (e *segmentEntry) effectiveMaxTs() int64 {
	return effectiveMaxTs(e.tsType, e.maxTimestamp, e.appendTime)
}

// retentionTs is the time retention.ms judges the segment by
// (runRetention), as retentionTimestamp judges a run.
func (e *segmentEntry) retentionTs() int64 {
	if e.tsType == batch.TimestampLogAppendTime || e.maxTimestamp < 0 {
		return e.appendTime
	}
	return e.maxTimestamp
}

// pushSegment appends e to p's segments, keeping the running maximum.
func (p *partition) pushSegment(e segmentEntry) {
	e.prefixMaxTs = e.effectiveMaxTs()
	if n := len(p.segs); n > 0 {
		e.prefixMaxTs = max(e.prefixMaxTs, p.segs[n-1].prefixMaxTs)
	}
	p.segs = append(p.segs, e)
}

// dropSegments removes p's first k segments, releasing their objects,
// and recomputes the running maxima of those left.
func (s *state) dropSegments(p *partition, k int) {
	for i := range k {
		e := &p.segs[i]
		p.bytes -= int64(e.dataSize)
		s.releaseSlot(e.file)
	}
	// A fresh slice: a frozen copy (snapshot) may still read the old one.
	rest := append([]segmentEntry(nil), p.segs[k:]...)
	v := int64(math.MinInt64)
	for i := range rest {
		v = max(v, rest[i].effectiveMaxTs())
		rest[i].prefixMaxTs = v
	}
	p.segs = rest
}

// releaseSlot accounts for an index entry of file slot fi leaving a
// partition index: the file loses a live entry, and is released when it
// was the last.
func (s *state) releaseSlot(fi int32) {
	f := &s.files[fi]
	f.live--
	if f.live == 0 {
		s.released[fi] = struct{}{}
		s.releases++
	}
}

// segmentCoordinate returns the coordinate of segment e: its data region
// as one run, ObjectFormat marking it a segment (fetch reads its index
// for the batches).
func (s *state) segmentCoordinate(e *segmentEntry) diskless.RunCoordinate {
	f := &s.files[e.file]
	return diskless.RunCoordinate{
		ObjectKey:         f.key,
		ObjectFormat:      diskless.ObjectFormatSegment,
		FileSize:          f.size,
		ByteSize:          e.dataSize,
		BaseOffset:        e.baseOffset,
		LastOffset:        e.lastOffset,
		TimestampType:     e.tsType,
		LogAppendTime:     e.appendTime,
		BatchMaxTimestamp: e.maxTimestamp,
	}
}

// entryCoordinate returns the coordinate of entry j of p (segments, then
// runs).
func (s *state) entryCoordinate(p *partition, j int) diskless.RunCoordinate {
	if j < len(p.segs) {
		return s.segmentCoordinate(&p.segs[j])
	}
	return s.coordinate(p.runs.at(j - len(p.segs)))
}

// entryBytes is the byte size of entry j of p.
func (p *partition) entryBytes(j int) int32 {
	if j < len(p.segs) {
		return p.segs[j].dataSize
	}
	return p.runs.at(j - len(p.segs)).byteSize
}

// searchEntry returns the first of p's first ns+n entries (all segments,
// then n runs) whose last offset is ≥ o, or ns+n.
func (p *partition) searchEntry(n int, o int64) int {
	ns := len(p.segs)
	if ns > 0 && p.segs[ns-1].lastOffset >= o {
		return sort.Search(ns, func(i int) bool { return p.segs[i].lastOffset >= o })
	}
	return ns + p.runs.searchOffset(n, o)
}

// checkSegmentCommitted validates record 114 against the state without
// mutating it: the partition's first ReplacedRuns WAL runs hold exactly
// the segment's offsets, bytes, timestamp type, largest max timestamp and
// latest append time, and the object is new and of the format's size.
func (s *state) checkSegmentCommitted(r *records.SegmentCommitted) error {
	tp := diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}
	p := s.partitions[tp]
	switch {
	case p == nil:
		return inconsistent("segment %q of unknown partition %s/%d", r.ObjectKey, r.TopicID, r.Partition)
	case p.deleted:
		return inconsistent("segment %q of deleted partition %s/%d", r.ObjectKey, r.TopicID, r.Partition)
	case r.ObjectKey == "":
		return inconsistent("segment with empty object key")
	case r.ObjectFormat != segment.ObjectFormat:
		return inconsistent("segment %q of object format %d", r.ObjectKey, r.ObjectFormat)
	case r.DataSize < batch.HeaderSize || r.IndexEntries < 1 ||
		segment.IndexEntries(r.FileSize, int64(r.DataSize)) != int(r.IndexEntries):
		return inconsistent("segment %q: %d bytes of data and %d index entries in %d bytes", r.ObjectKey, r.DataSize, r.IndexEntries, r.FileSize)
	case r.ReplacedRuns < 1 || int(r.ReplacedRuns) > p.runs.len():
		return inconsistent("segment %q replaces %d runs of %d", r.ObjectKey, r.ReplacedRuns, p.runs.len())
	case r.TimestampType != batch.TimestampCreateTime && r.TimestampType != batch.TimestampLogAppendTime:
		return inconsistent("segment %q: timestamp type %d", r.ObjectKey, r.TimestampType)
	}
	if _, ok := s.fileByKey[r.ObjectKey]; ok {
		return inconsistent("segment %q committed twice", r.ObjectKey)
	}
	if len(s.freeSlots) == 0 && len(s.files) >= math.MaxInt32 {
		return inconsistent("file table full")
	}
	x := &p.runs
	k := int(r.ReplacedRuns)
	var size int64
	maxTs, appendTime := int64(math.MinInt64), int64(math.MinInt64)
	for i := 0; i < k; {
		sl := x.slice(i, k)
		for j := range sl {
			e := &sl[j]
			if e.tsType != r.TimestampType {
				return inconsistent("segment %q: run at %d of timestamp type %d, the segment's is %d", r.ObjectKey, e.baseOffset, e.tsType, r.TimestampType)
			}
			size += int64(e.byteSize)
			maxTs = max(maxTs, e.maxTimestamp)
			appendTime = max(appendTime, s.files[e.file].appendTime)
		}
		i += len(sl)
	}
	first, last := x.at(0), x.at(k-1)
	switch {
	case first.baseOffset != r.BaseOffset || last.lastOffset() != r.LastOffset || r.LastOffset-r.BaseOffset > math.MaxInt32:
		return inconsistent("segment %q holds [%d, %d], its %d runs [%d, %d]", r.ObjectKey, r.BaseOffset, r.LastOffset, k, first.baseOffset, last.lastOffset())
	case size != int64(r.DataSize):
		return inconsistent("segment %q holds %d bytes, its runs %d", r.ObjectKey, r.DataSize, size)
	case maxTs != r.MaxTimestamp || appendTime != r.AppendTime:
		return inconsistent("segment %q: max timestamp %d and append time %d, its runs' %d and %d", r.ObjectKey, r.MaxTimestamp, r.AppendTime, maxTs, appendTime)
	}
	return nil
}

// applySegmentCommitted applies record 114: the partition's first
// ReplacedRuns WAL runs leave its index (their files losing them, and
// released when it was their last) and the segment object, a new file of
// this shard alone, takes their place at the end of its segments. The
// record's CommitTimestamp moves the log's clock as a file commit does.
func (s *state) applySegmentCommitted(r *records.SegmentCommitted) error {
	if err := s.checkSegmentCommitted(r); err != nil {
		return err
	}
	p := s.partitions[diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}]
	k := int(r.ReplacedRuns)
	x := &p.runs
	for i := 0; i < k; {
		sl := x.slice(i, k)
		for j := range sl {
			s.dropRun(&sl[j])
		}
		i += len(sl)
	}
	x.dropFront(k, s.effectiveMaxTs)
	fi := s.addFile(r.ObjectKey, r.FileSize, r.ObjectFormat, r.CommitTimestamp, []int32{s.shard})
	s.files[fi].live = 1
	p.pushSegment(segmentEntry{
		baseOffset:   r.BaseOffset,
		lastOffset:   r.LastOffset,
		maxTimestamp: r.MaxTimestamp,
		appendTime:   r.AppendTime,
		file:         fi,
		dataSize:     r.DataSize,
		tsType:       r.TimestampType,
	})
	s.finishFile(r.CommitTimestamp)
	return nil
}
