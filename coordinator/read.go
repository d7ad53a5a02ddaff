package coordinator

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Reads serve the published view of a partition (visLogStart, visHWM):
// only batches whose records are durable. They run under the shard's read
// lock.

// visibleBatches returns the prefix of p's index below the published high
// watermark.
func (p *partition) visibleBatches() []batchEntry {
	n := len(p.batches)
	if n == 0 || p.batches[n-1].baseOffset < p.visHWM {
		return p.batches
	}
	k := sort.Search(n, func(i int) bool { return p.batches[i].baseOffset >= p.visHWM })
	return p.batches[:k]
}

func (s *state) coordinate(e *batchEntry) BatchCoordinate {
	f := &s.files[e.file]
	return BatchCoordinate{
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
// maxBytes; the first batch is always included (KIP-74).
func (s *state) findBatches(p *partition, offset int64, maxBytes int32) FindBatchesResult {
	res := FindBatchesResult{LogStartOffset: p.visLogStart, HighWatermark: p.visHWM}
	if offset < p.visLogStart || offset > p.visHWM {
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	if offset == p.visHWM {
		return res
	}
	bs := p.visibleBatches()
	i := sort.Search(len(bs), func(i int) bool { return bs[i].lastOffset() >= offset })
	if i == len(bs) {
		// Unreachable while the index is dense up to visHWM.
		res.Err = kerr.OffsetOutOfRange
		return res
	}
	total := int64(bs[i].byteSize)
	end := i + 1
	for ; end < len(bs); end++ {
		total += int64(bs[end].byteSize)
		if total > int64(maxBytes) {
			break
		}
	}
	res.Batches = make([]BatchCoordinate, 0, end-i)
	for j := i; j < end; j++ {
		res.Batches = append(res.Batches, s.coordinate(&bs[j]))
	}
	return res
}

// listOffsets answers ListOffsets for p (SPEC §5).
func (s *state) listOffsets(p *partition, timestamp int64) ListOffsetsResult {
	res := ListOffsetsResult{
		LogStartOffset: p.visLogStart,
		HighWatermark:  p.visHWM,
		Offset:         -1,
		Timestamp:      -1,
	}
	switch {
	case timestamp == ListOffsetsEarliest:
		res.Offset = p.visLogStart
		return res
	case timestamp == ListOffsetsLatest:
		res.Offset = p.visHWM
		return res
	case timestamp < 0 && timestamp != ListOffsetsMaxTimestamp:
		res.Err = kerr.UnsupportedVersion
		return res
	}
	bs := p.visibleBatches()
	if len(bs) == 0 {
		return res
	}
	target := timestamp
	if timestamp == ListOffsetsMaxTimestamp {
		// The earliest batch reaching the largest timestamp.
		target = bs[len(bs)-1].prefixMaxTs
	}
	// prefixMaxTs is non-decreasing: the first batch whose prefix reaches
	// target is the first batch whose own max timestamp does.
	i := sort.Search(len(bs), func(i int) bool { return bs[i].prefixMaxTs >= target })
	if i == len(bs) {
		return res
	}
	c := s.coordinate(&bs[i])
	res.Candidate = &c
	return res
}
