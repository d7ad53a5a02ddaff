package coordinator

import (
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// Reads serve the published view of a partition (visLogStart, visHWM):
// only batches whose records are durable. They run under the shard's read
// lock.

// visibleLen returns how many of p's runs, from the first, are below the
// published high watermark.
func (p *partition) visibleLen() int { return p.runsBelow(p.visHWM) }

// runsBelow returns how many of p's runs, from the first, start below
// limit (at most the published high watermark).
func (p *partition) runsBelow(limit int64) int {
	x := &p.runs
	n := x.len()
	if n == 0 || x.at(n-1).baseOffset < limit {
		return n
	}
	return x.search(n, func(e *runEntry) bool { return e.baseOffset >= limit })
}

// coordinate returns the coordinate of the run e.
func (s *state) coordinate(e *runEntry) diskless.RunCoordinate {
	f := &s.files[e.file]
	return diskless.RunCoordinate{
		ObjectKey:         f.key,
		ObjectFormat:      f.format,
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
// readCommitted (SPEC §15) returns no run starting at or past the last
// stable offset (nothing from it on: the reader cuts a run crossing it),
// and the aborted transactions overlapping what is returned.
func (s *state) findBatches(p *partition, offset int64, maxBytes int32, readCommitted bool) diskless.FindBatchesResult {
	res := diskless.FindBatchesResult{LogStartOffset: p.visLogStart, HighWatermark: p.visHWM, LastStableOffset: p.visLSO}
	if offset < p.visLogStart || offset > p.visHWM {
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	limit := p.visHWM
	if readCommitted {
		limit = p.visLSO
	}
	if offset >= limit {
		return res
	}
	n := p.runsBelow(limit)
	ns := len(p.segs)
	i := p.searchEntry(n, offset)
	if i == ns+n {
		// Unreachable while the index is dense up to visHWM.
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	// The first entry always; then entries until maxBytes is reached.
	first := s.entryCoordinate(p, i)
	after := diskless.ServedEstimate(first.BaseOffset, first.LastOffset, first.ByteSize, offset)
	end := i + 1
	for end < ns+n && after < int64(maxBytes) {
		after += int64(p.entryBytes(end))
		end++
	}
	res.Runs = make([]diskless.RunCoordinate, 0, end-i)
	res.Runs = append(res.Runs, first)
	for j := i + 1; j < min(end, ns); j++ {
		res.Runs = append(res.Runs, s.segmentCoordinate(&p.segs[j]))
	}
	x := &p.runs
	for j := max(i+1, ns) - ns; j < end-ns; {
		slice := x.slice(j, end-ns)
		for k := range slice {
			res.Runs = append(res.Runs, s.coordinate(&slice[k]))
		}
		j += len(slice)
	}
	if end < ns+n {
		res.Next = s.entryCoordinate(p, end)
	}
	if readCommitted {
		res.Aborted = p.visAborted(offset, min(limit, res.Runs[len(res.Runs)-1].LastOffset+1))
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
		LogStartOffset:   p.visLogStart,
		HighWatermark:    p.visHWM,
		LastStableOffset: p.visLSO,
		Offset:           -1,
		Timestamp:        -1,
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
	n := p.visibleLen()
	ns := len(p.segs)
	// i: the entry holding from, or the first after it.
	i := 0
	if ns+n > 0 && s.entryLast(p, 0) < from {
		i = p.searchEntry(n, from)
	}
	if i == ns+n {
		return res
	}
	var j int
	if timestamp == diskless.ListOffsetsMaxTimestamp {
		// The earliest entry reaching the largest timestamp.
		j = s.searchMaxFrom(p, i, n)
	} else {
		j = s.searchTimestampFrom(p, i, n, timestamp)
	}
	if j == ns+n {
		return res
	}
	c := s.entryCoordinate(p, j)
	res.Candidate = &c
	return res
}

// entryLast returns the last offset of entry j of p.
func (s *state) entryLast(p *partition, j int) int64 {
	if j < len(p.segs) {
		return p.segs[j].lastOffset
	}
	return p.runs.at(j - len(p.segs)).lastOffset()
}

// searchTimestampFrom returns the first of p's entries from i on (all
// segments, then n runs) whose effective max timestamp is ≥ ts, or
// len(segs)+n: the segments by their running maxima (binary search when
// none before i reaches ts, else one by one), then the runs
// (runIndex.searchTimestampFrom).
func (s *state) searchTimestampFrom(p *partition, i, n int, ts int64) int {
	ns := len(p.segs)
	if i < ns {
		if i == 0 || p.segs[i-1].prefixMaxTs < ts {
			if k := sort.Search(ns, func(k int) bool { return p.segs[k].prefixMaxTs >= ts }); k < ns {
				return k
			}
		} else {
			for k := i; k < ns; k++ {
				if p.segs[k].effectiveMaxTs() >= ts {
					return k
				}
			}
		}
		i = ns
	}
	return ns + p.runs.searchTimestampFrom(i-ns, n, ts, s.effectiveMaxTs)
}

// searchMaxFrom returns the earliest of p's entries from i on (i <
// len(segs)+n) whose effective max timestamp is the largest of them.
func (s *state) searchMaxFrom(p *partition, i, n int) int {
	ns := len(p.segs)
	best, j := int64(math.MinInt64), -1
	for k := i; k < ns; k++ {
		if v := p.segs[k].effectiveMaxTs(); j < 0 || v > best {
			best, j = v, k
		}
	}
	if n > 0 {
		r := p.runs.searchMaxFrom(max(i-ns, 0), n, s.effectiveMaxTs)
		if v := s.effectiveMaxTs(p.runs.at(r)); j < 0 || v > best {
			j = ns + r
		}
	}
	return j
}
