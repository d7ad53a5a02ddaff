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

// take chooses what to read of a partition's runs rs (offset order, the
// first holding the fetch offset) and charges the budget: the first run
// whole, unless a coordinate too small to hold a batch header (which the
// caller reports as corrupt) or no budget left for the partition; then
// the following runs until the partition's limit is reached, counting of
// the first run only its part from offset on, estimated by offsets
// (diskless.ServedEstimate), the last run possibly only a prefix (tail
// bytes of it), since batches are served from their start and at most
// the limit of them. It returns how many runs, the bytes to read of the
// last (its ByteSize when whole) and the bytes to read in all. It charges
// what it expects to serve, within the limit: serve applies the budget
// again to the batches themselves (takeBatches).
func (b *budget) take(rs []diskless.RunCoordinate, partitionMaxBytes int32, offset int64) (n int, tail int32, size int64) {
	limit := b.limit(partitionMaxBytes)
	if len(rs) == 0 || rs[0].ByteSize < batch.HeaderSize || !b.fits(0, 0, batch.HeaderSize, limit) {
		return 0, 0, 0
	}
	n, tail, size = 1, rs[0].ByteSize, int64(rs[0].ByteSize)
	served := diskless.ServedEstimate(rs[0].BaseOffset, rs[0].LastOffset, rs[0].ByteSize, offset)
	for ; n < len(rs) && served < limit && rs[n].ByteSize >= batch.HeaderSize; n++ {
		tail = int32(min(int64(rs[n].ByteSize), limit-served))
		served += int64(tail)
		size += int64(tail)
		if tail < rs[n].ByteSize {
			n++
			break
		}
	}
	b.charge(n, min(served, max(limit, int64(batch.HeaderSize))))
	return n, tail, size
}

// takeBatches is take for the batches a partition serves, in offset
// order, the first holding the fetch offset.
func (b *budget) takeBatches(bs []runBatch, partitionMaxBytes int32) (n int, size int64) {
	limit := b.limit(partitionMaxBytes)
	for i := range bs {
		sz := int64(bs[i].size)
		if !b.fits(n, size, sz, limit) {
			break
		}
		size += sz
		n++
	}
	b.charge(n, size)
	return n, size
}

// limit is what a partition of partitionMaxBytes may take of the budget.
func (b *budget) limit(partitionMaxBytes int32) int64 {
	return min(max(int64(partitionMaxBytes), 0), b.remaining)
}

// fits reports whether sz more bytes fit after a partition took n items
// of size bytes within limit: they do when within it, and the first item
// of the response always does (KIP-74).
func (b *budget) fits(n int, size, sz, limit int64) bool {
	return size+sz <= limit || (b.empty && n == 0)
}

// charge records that a partition took n items of size bytes.
func (b *budget) charge(n int, size int64) {
	if n > 0 {
		b.empty = false
	}
	// A first item larger than the limit leaves nothing for the rest.
	b.remaining = max(b.remaining-size, 0)
}

// span is one contiguous byte range of one object, read as one range
// (of its object's ReadRanges) straight into its place in a partition's
// response buffer.
type span struct {
	key string
	off int64  // byte offset in the object
	dst []byte // where the bytes go; len is the range's size
	// part is the index of the partition the span belongs to, and run
	// the index, in that partition's runs, of the first run it holds;
	// rs are the coordinates of the runs it holds, the last of which may
	// be read only in part (dst ends before it does).
	part, run int
	rs        []diskless.RunCoordinate
	// size is the object's size (FileSize), written the oldest commit
	// time (ms) of the span's runs.
	size, written int64
	// seqEnd is the object's cache.Object.SequentialEnd: its data size
	// when it is a segment object, else 0.
	seqEnd int64
	// err is the read's outcome: nil, a failed read, or (wrapping
	// cache.ErrCorrupt) bytes that failed their check on both reads.
	err error
}

// appendSpans appends to dst the reads that fill buf with rs, the last
// only its first tail bytes: consecutive runs that are adjacent in the
// same object are coalesced into one span. buf must be exactly the bytes
// read; the spans tile it in order.
func appendSpans(dst []span, part int, rs []diskless.RunCoordinate, tail int32, buf []byte) []span {
	pos := 0
	for i := 0; i < len(rs); {
		j := i + 1
		written := rs[i].LogAppendTime
		for j < len(rs) && adjacent(&rs[j-1], &rs[j]) {
			written = min(written, rs[j].LogAppendTime)
			j++
		}
		end := rs[j-1].ByteOffset + int64(rs[j-1].ByteSize)
		if j == len(rs) {
			end = rs[j-1].ByteOffset + int64(tail)
		}
		n := int(end - rs[i].ByteOffset)
		dst = append(dst, span{
			key:     rs[i].ObjectKey,
			off:     rs[i].ByteOffset,
			dst:     buf[pos : pos+n : pos+n],
			part:    part,
			run:     i,
			rs:      rs[i:j:j],
			size:    rs[i].FileSize,
			written: written,
		})
		pos += n
		i = j
	}
	return dst
}

// countSpans returns how many spans appendSpans makes for rs.
func countSpans(rs []diskless.RunCoordinate) int {
	n := 0
	for i := range rs {
		if i == 0 || !adjacent(&rs[i-1], &rs[i]) {
			n++
		}
	}
	return n
}

// adjacent reports whether b starts in a's object where a ends.
func adjacent(a, b *diskless.RunCoordinate) bool {
	return a.ObjectKey == b.ObjectKey && a.ByteOffset+int64(a.ByteSize) == b.ByteOffset
}
