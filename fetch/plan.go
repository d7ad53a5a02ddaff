package fetch

import (
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// budget applies a Fetch's byte limits to the partitions of one response,
// in request order (SPEC §4, KIP-74): max_bytes is shared by all
// partitions, partition_max_bytes bounds each, and the first batch of the
// response is taken whatever its size, so a batch larger than the limits
// never stalls a consumer. It is pure: no IO, no allocation.
type budget struct {
	// remaining is what is left of max_bytes, ≥ 0.
	remaining int64
	// empty is true until the response holds a batch.
	empty bool
}

func newBudget(maxBytes int32) budget {
	return budget{remaining: max(int64(maxBytes), 0), empty: true}
}

// take returns how many leading batches of bs fit in the budget, and their
// total size in bytes, and charges them. bs are a partition's batches in
// offset order. It stops before a coordinate too small to hold a batch
// header, which the caller reports as corrupt.
func (b *budget) take(bs []diskless.BatchCoordinate, partitionMaxBytes int32) (n int, size int64) {
	limit := min(max(int64(partitionMaxBytes), 0), b.remaining)
	for i := range bs {
		sz := int64(bs[i].ByteSize)
		if sz < batch.HeaderSize {
			break
		}
		if size+sz > limit && !(b.empty && n == 0) {
			break
		}
		size += sz
		n++
	}
	if n > 0 {
		b.empty = false
	}
	// A first batch larger than the limit leaves nothing for the rest.
	b.remaining = max(b.remaining-size, 0)
	return n, size
}

// span is one contiguous byte range of one object, read as one range
// (of its object's ReadRanges) straight into its place in a partition's
// response buffer.
type span struct {
	key string
	off int64  // byte offset in the object
	dst []byte // where the bytes go; len is the range's size
	// part is the index of the partition the span belongs to, and batch
	// the index, in that partition's batches, of the first batch it holds;
	// bs are the coordinates of the batches it holds.
	part, batch int
	bs          []diskless.BatchCoordinate
	// size is the object's size (FileSize), written the oldest commit
	// time (ms) of the span's batches.
	size, written int64
	// err is the read's outcome: nil, a failed read, or (wrapping
	// cache.ErrCorrupt) bytes that failed their check on both reads.
	err error
}

// appendSpans appends to dst the reads that fill buf with bs: consecutive
// batches that are adjacent in the same object are coalesced into one span.
// buf must be exactly the total size of bs; the spans tile it in order.
func appendSpans(dst []span, part int, bs []diskless.BatchCoordinate, buf []byte) []span {
	pos := 0
	for i := 0; i < len(bs); {
		j := i + 1
		written := bs[i].LogAppendTime
		for j < len(bs) && adjacent(&bs[j-1], &bs[j]) {
			written = min(written, bs[j].LogAppendTime)
			j++
		}
		n := int(bs[j-1].ByteOffset + int64(bs[j-1].ByteSize) - bs[i].ByteOffset)
		dst = append(dst, span{
			key:     bs[i].ObjectKey,
			off:     bs[i].ByteOffset,
			dst:     buf[pos : pos+n : pos+n],
			part:    part,
			batch:   i,
			bs:      bs[i:j:j],
			size:    bs[i].FileSize,
			written: written,
		})
		pos += n
		i = j
	}
	return dst
}

// countSpans returns how many spans appendSpans makes for bs.
func countSpans(bs []diskless.BatchCoordinate) int {
	n := 0
	for i := range bs {
		if i == 0 || !adjacent(&bs[i-1], &bs[i]) {
			n++
		}
	}
	return n
}

// adjacent reports whether b starts in a's object where a ends.
func adjacent(a, b *diskless.BatchCoordinate) bool {
	return a.ObjectKey == b.ObjectKey && a.ByteOffset+int64(a.ByteSize) == b.ByteOffset
}
