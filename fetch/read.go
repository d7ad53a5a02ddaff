package fetch

import (
	"context"
	"errors"
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
// call, given the object's size and the oldest commit time among them, and
// checking each span's batches (spanChecker); a failed read of an object
// is the failure of every span of it, a span that fails its check on both
// reads fails alone. It returns when all reads are done.
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
	checkers := make([]spanChecker, len(starts)-1)
	h.run(len(starts)-1, func(g int) {
		obj := spans[starts[g]:starts[g+1]]
		rs := ranges[starts[g]:starts[g+1]]
		o := cache.Object{Key: obj[0].key, Size: obj[0].size, WrittenMs: obj[0].written}
		for i := range obj {
			o.WrittenMs = min(o.WrittenMs, obj[i].written)
		}
		checkers[g] = spanChecker(obj)
		err := h.r.ReadRanges(ctx, o, rs, &checkers[g])
		if err == nil {
			return
		}
		if !errors.Is(err, cache.ErrCorrupt) {
			err = fmt.Errorf("fetch: read %s (%d ranges): %w", o.Key, len(obj), err)
			for i := range obj {
				obj[i].err = err
			}
			return
		}
		for i := range obj {
			obj[i].err = rs[i].Err
		}
	})
}

// spanChecker checks the spans of one ReadRanges call, range i being span
// i: each batch against its coordinate (verifyBatches).
type spanChecker []span

func (c *spanChecker) Check(i int, p []byte) error {
	s := &(*c)[i]
	if n, err := verifyBatches(p, s.bs); err != nil {
		return fmt.Errorf("batch at offset %d: %w", s.bs[n].BaseOffset, err)
	}
	return nil
}

// errBatchCheck is the root of verifyBatches' errors.
var errBatchCheck = errors.New("fetch: stored batch does not match its coordinate")

// verifyBatches checks the batches read into p (bs back to back, p at
// least their total size) against their coordinates, as they were stored
// (SPEC §2: produce accepted them so): one well-formed v2 batch of the
// coordinate's size, base offset 0, lastOffsetDelta and recordsCount of
// the coordinate's offset span, maxTimestamp the one committed, and a
// matching CRC-32C. It returns how many leading batches pass, and why the
// next one does not (wrapping errBatchCheck).
func verifyBatches(p []byte, bs []diskless.BatchCoordinate) (int, error) {
	pos := 0
	for i := range bs {
		c := &bs[i]
		end := pos + int(c.ByteSize)
		if c.ByteSize < batch.HeaderSize || end > len(p) {
			return i, fmt.Errorf("%w: coordinate of %d bytes", errBatchCheck, c.ByteSize)
		}
		h, ok := matches(p[pos:end], c)
		switch {
		case !ok:
			return i, fmt.Errorf("%w: framing, magic, size or offset span", errBatchCheck)
		case h.BaseOffset() != 0 || int64(h.RecordsCount()) != int64(h.LastOffsetDelta())+1:
			return i, fmt.Errorf("%w: stored base offset %d, %d records", errBatchCheck, h.BaseOffset(), h.RecordsCount())
		case h.MaxTimestamp() != c.BatchMaxTimestamp:
			return i, fmt.Errorf("%w: max timestamp %d, committed %d", errBatchCheck, h.MaxTimestamp(), c.BatchMaxTimestamp)
		case h.ComputeCRC() != h.CRC():
			return i, fmt.Errorf("%w: CRC-32C mismatch", errBatchCheck)
		}
		pos = end
	}
	return len(bs), nil
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

// readBatch fills buf with the batch c names, checked against c, given its
// object's size and commit time (so that an old batch is not cached in the
// main LRU). Errors: the read's, or one wrapping cache.ErrCorrupt if the
// bytes failed their check twice.
func (h *Handler) readBatch(ctx context.Context, c *diskless.BatchCoordinate, buf []byte) error {
	rs := []cache.Range{{Off: c.ByteOffset, P: buf}}
	check := spanChecker{{bs: []diskless.BatchCoordinate{*c}}}
	o := cache.Object{Key: c.ObjectKey, Size: c.FileSize, WrittenMs: c.LogAppendTime}
	if err := h.r.ReadRanges(ctx, o, rs, &check); err != nil {
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
//   - on LogAppendTime batches, the timestamp-type bit is set, maxTimestamp
//     ← the log-append time, and the CRC recomputed.
//
// The bytes must have passed verifyBatches (the ObjectReader's check:
// once per byte read from the store), so that the new CRC never blesses a
// corrupt batch; stamp checks again only what costs nothing (framing,
// magic, size, offset span). buf holds bs back to back and is at least
// their total size. stamp returns the number of leading batches that are
// good and their size in bytes; if that is less than len(bs), errc says why
// the next one is not: CORRUPT_MESSAGE (not a v2 batch of the coordinate's
// size and offset span) or UNSUPPORTED_COMPRESSION_TYPE (zstd and
// !allowZstd, Fetch before v10). Batches after the first bad one are left
// untouched.
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
// not checked (verifyBatches does).
func matches(b []byte, c *diskless.BatchCoordinate) (batch.Header, bool) {
	h, n, err := batch.Parse(b)
	if err != nil || n != len(b) || n != int(c.ByteSize) || h.Magic() != 2 ||
		int64(h.LastOffsetDelta()) != c.LastOffset-c.BaseOffset {
		return nil, false
	}
	return h, true
}
