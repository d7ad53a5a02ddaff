package coordinator

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Reads serve the published view of a partition (visLogStart, visHWM):
// only batches whose records are durable. They run under the shard's read
// lock.

// visibleLen returns how many of p's index entries, from the first, are
// below the published high watermark.
func (p *partition) visibleLen() int {
	x := &p.batches
	n := x.len()
	if n == 0 || x.at(n-1).baseOffset < p.visHWM {
		return n
	}
	return x.search(n, func(e *batchEntry) bool { return e.baseOffset >= p.visHWM })
}

func (s *state) coordinate(e *batchEntry) diskless.BatchCoordinate {
	f := &s.files[e.file]
	return diskless.BatchCoordinate{
		ObjectKey:         f.key,
		FileSize:          f.size,
		ByteOffset:        int64(e.byteOffset),
		ByteSize:          e.byteSize,
		BaseOffset:        e.baseOffset,
		LastOffset:        e.lastOffset(),
		TimestampType:     e.tsType,
		LogAppendTime:     f.appendTime,
		BatchMaxTimestamp: e.maxTimestamp,
	}
}

// findBatches answers FindBatches for p (SPEC §4, §9): the batch holding
// offset, then following batches while their total ByteSize stays within
// maxBytes; the first batch is always included (KIP-74). Next is the
// visible batch after them, if any.
func (s *state) findBatches(p *partition, offset int64, maxBytes int32) diskless.FindBatchesResult {
	res := diskless.FindBatchesResult{LogStartOffset: p.visLogStart, HighWatermark: p.visHWM}
	if offset < p.visLogStart || offset > p.visHWM {
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	if offset == p.visHWM {
		return res
	}
	x := &p.batches
	n := p.visibleLen()
	i := x.searchOffset(n, offset)
	if i == n {
		// Unreachable while the index is dense up to visHWM.
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	// The first batch always; then whole batches within maxBytes.
	total, end := int64(0), i
scan:
	for end < n {
		run := x.run(end, n)
		for k := range run {
			total += int64(run[k].byteSize)
			if total > int64(maxBytes) && end > i {
				break scan
			}
			end++
		}
	}
	res.Batches = make([]diskless.BatchCoordinate, 0, end-i)
	for j := i; j < end; {
		run := x.run(j, end)
		for k := range run {
			res.Batches = append(res.Batches, s.coordinate(&run[k]))
		}
		j += len(run)
	}
	if end < n {
		res.Next = s.coordinate(x.at(end))
	}
	return res
}

// listOffsets answers ListOffsets for p (SPEC §5).
func (s *state) listOffsets(p *partition, timestamp int64) diskless.ListOffsetsResult {
	return s.listOffsetsFrom(p, timestamp, math.MinInt64)
}

// listOffsetsFrom answers ListOffsetsFrom for p: ListOffsets over the
// batches that hold an offset ≥ from (from ≤ the log start offset: all of
// them); the earliest and latest answers do not depend on from.
func (s *state) listOffsetsFrom(p *partition, timestamp, from int64) diskless.ListOffsetsResult {
	res := diskless.ListOffsetsResult{
		LogStartOffset: p.visLogStart,
		HighWatermark:  p.visHWM,
		Offset:         -1,
		Timestamp:      -1,
	}
	switch {
	case timestamp == diskless.ListOffsetsEarliest:
		res.Offset = p.visLogStart
		return res
	case timestamp == diskless.ListOffsetsLatest:
		res.Offset = p.visHWM
		return res
	case timestamp < 0 && timestamp != diskless.ListOffsetsMaxTimestamp:
		res.Err = kerr.UnsupportedVersion
		return res
	}
	x := &p.batches
	n := p.visibleLen()
	// i: the batch holding from, or the first after it.
	i := 0
	if n == 0 || x.at(0).lastOffset() < from {
		i = x.searchOffset(n, from)
	}
	if i == n {
		return res
	}
	var j int
	if timestamp == diskless.ListOffsetsMaxTimestamp {
		// The earliest batch reaching the largest timestamp.
		j = x.searchMaxFrom(i, n, s.effectiveMaxTs)
	} else {
		j = x.searchTimestampFrom(i, n, timestamp, s.effectiveMaxTs)
	}
	if j == n {
		return res
	}
	c := s.coordinate(x.at(j))
	res.Candidate = &c
	return res
}
