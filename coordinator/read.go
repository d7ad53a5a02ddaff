package coordinator

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Reads serve the published view of a partition (visLogStart, visHWM):
// only batches whose records are durable. They run under the shard's read
// lock.

// visibleLen returns how many of p's runs, from the first, are below the
// published high watermark.
func (p *partition) visibleLen() int {
	x := &p.runs
	n := x.len()
	if n == 0 || x.at(n-1).baseOffset < p.visHWM {
		return n
	}
	return x.search(n, func(e *runEntry) bool { return e.baseOffset >= p.visHWM })
}

// coordinate returns the coordinate of the run e.
func (s *state) coordinate(e *runEntry) diskless.RunCoordinate {
	f := &s.files[e.file]
	return diskless.RunCoordinate{
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

// findBatches answers FindBatches for p (SPEC §4, §9): the run holding
// offset, always, then following runs until maxBytes is reached (the last
// may be needed only in part), counting of the first run only its part
// from offset on, estimated by offsets (diskless.ServedEstimate): a fetch serves
// batches from the one holding offset, and applies the limits to the
// batches it serves (KIP-74). Next is the visible run after them, if any.
func (s *state) findBatches(p *partition, offset int64, maxBytes int32) diskless.FindBatchesResult {
	res := diskless.FindBatchesResult{LogStartOffset: p.visLogStart, HighWatermark: p.visHWM}
	if offset < p.visLogStart || offset > p.visHWM {
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	if offset == p.visHWM {
		return res
	}
	x := &p.runs
	n := p.visibleLen()
	i := x.searchOffset(n, offset)
	if i == n {
		// Unreachable while the index is dense up to visHWM.
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	// The first run always; then runs until maxBytes is reached.
	first := x.at(i)
	after, end := diskless.ServedEstimate(first.baseOffset, first.lastOffset(), first.byteSize, offset), i+1
scan:
	for end < n && after < int64(maxBytes) {
		slice := x.slice(end, n)
		for k := range slice {
			after += int64(slice[k].byteSize)
			end++
			if after >= int64(maxBytes) {
				break scan
			}
		}
	}
	res.Runs = make([]diskless.RunCoordinate, 0, end-i)
	for j := i; j < end; {
		slice := x.slice(j, end)
		for k := range slice {
			res.Runs = append(res.Runs, s.coordinate(&slice[k]))
		}
		j += len(slice)
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
// runs that hold an offset ≥ from (from ≤ the log start offset: all of
// them); the earliest and latest answers do not depend on from. The
// candidate is a run: the first reaching the timestamp, or the earliest
// with the largest max timestamp; the caller looks within it for the
// batch (SPEC §5).
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
	x := &p.runs
	n := p.visibleLen()
	// i: the run holding from, or the first after it.
	i := 0
	if n == 0 || x.at(0).lastOffset() < from {
		i = x.searchOffset(n, from)
	}
	if i == n {
		return res
	}
	var j int
	if timestamp == diskless.ListOffsetsMaxTimestamp {
		// The earliest run reaching the largest timestamp.
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
