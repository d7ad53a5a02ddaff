package fetch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// readSpans reads every span, up to cfg.ReadConcurrency objects at a
// time, and records each outcome in span.err. The spans are grouped by
// object (which reorders them) and each object's spans are one ReadRanges
// call, given the oldest commit time among them; a failure of it is the
// failure of every span of that object. It returns when all reads are
// done.
func (h *Handler) readSpans(ctx context.Context, spans []span) {
	slices.SortStableFunc(spans, func(a, b span) int { return strings.Compare(a.key, b.key) })
	starts := make([]int, 0, len(spans)+1) // object i has spans[starts[i]:starts[i+1]]
	ranges := make([]cache.Range, len(spans))
	for i := range spans {
		if i == 0 || spans[i].key != spans[i-1].key {
			starts = append(starts, i)
		}
		ranges[i] = cache.Range{Off: spans[i].off, P: spans[i].dst}
	}
	starts = append(starts, len(spans))
	h.run(len(starts)-1, func(g int) {
		obj := spans[starts[g]:starts[g+1]]
		written := obj[0].written
		for i := range obj {
			written = min(written, obj[i].written)
		}
		if err := h.r.ReadRanges(ctx, obj[0].key, written, ranges[starts[g]:starts[g+1]]); err != nil {
			err = fmt.Errorf("fetch: read %s (%d ranges): %w", obj[0].key, len(obj), err)
			for i := range obj {
				obj[i].err = err
			}
		}
	})
}

// run calls read(i) for every i in [0, n), up to cfg.ReadConcurrency at a
// time (on the caller's goroutine when that is 1 or n ≤ 1), and returns
// when all calls have.
func (h *Handler) run(n int, read func(i int)) {
	workers := min(h.cfg.ReadConcurrency, n)
	if workers <= 1 {
		for i := range n {
			read(i)
		}
		return
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				read(i)
			}
		})
	}
	wg.Wait()
}

// readBatch fills buf with the batch c names, given its commit time (so
// that an old batch is not cached).
func (h *Handler) readBatch(ctx context.Context, c *diskless.BatchCoordinate, buf []byte) error {
	if err := h.r.ReadRanges(ctx, c.ObjectKey, c.LogAppendTime, []cache.Range{{Off: c.ByteOffset, P: buf}}); err != nil {
		return fmt.Errorf("fetch: read %s [%d, %d): %w", c.ObjectKey, c.ByteOffset, c.ByteOffset+int64(len(buf)), err)
	}
	return nil
}

// stamp checks the batches read into buf against their coordinates bs and
// rewrites each header in place for the client (SPEC §1, §4; DESIGN §Fetch
// step 4):
//
//   - baseOffset ← the assigned base offset, partitionLeaderEpoch ← epoch
//     (both outside the CRC);
//   - on LogAppendTime batches, the stored CRC is verified, then the
//     timestamp-type bit is set, maxTimestamp ← the log-append time, and the
//     CRC recomputed.
//
// buf holds bs back to back and is at least their total size. stamp returns
// the number of leading batches that are good and their size in bytes; if
// that is less than len(bs), errc says why the next one is not:
// CORRUPT_MESSAGE (not a v2 batch of the coordinate's size and offset span,
// or a CRC mismatch) or UNSUPPORTED_COMPRESSION_TYPE (zstd and !allowZstd,
// Fetch before v10). Batches after the first bad one are left untouched.
func stamp(buf []byte, bs []diskless.BatchCoordinate, epoch int32, allowZstd bool) (n, size int, errc *kerr.Error) {
	for i := range bs {
		c := &bs[i]
		end := size + int(c.ByteSize)
		if c.ByteSize < batch.HeaderSize || end > len(buf) {
			return i, size, kerr.CorruptMessage
		}
		h, ok := matches(buf[size:end], c)
		if !ok {
			return i, size, kerr.CorruptMessage
		}
		if !allowZstd && h.Codec() == batch.CodecZstd {
			return i, size, kerr.UnsupportedCompressionType
		}
		if c.TimestampType == batch.TimestampLogAppendTime {
			// The new CRC would bless whatever the bytes hold: check the
			// old one first.
			if h.ComputeCRC() != h.CRC() {
				return i, size, kerr.CorruptMessage
			}
			h.SetLogAppendTime(c.LogAppendTime)
			h.UpdateCRC()
		}
		h.SetBaseOffset(c.BaseOffset)
		h.SetPartitionLeaderEpoch(epoch)
		size = end
	}
	return len(bs), size, nil
}

// matches returns the header view of b, the bytes read for c, if they are
// exactly one well-formed v2 batch of c's size and offset span. The CRC is
// not checked: clients check it, and stamp checks it before replacing it.
func matches(b []byte, c *diskless.BatchCoordinate) (batch.Header, bool) {
	h, n, err := batch.Parse(b)
	if err != nil || n != len(b) || n != int(c.ByteSize) || h.Magic() != 2 ||
		int64(h.LastOffsetDelta()) != c.LastOffset-c.BaseOffset {
		return nil, false
	}
	return h, true
}
