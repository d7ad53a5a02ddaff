package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// readSpans reads every span, up to cfg.ReadConcurrency at a time, and
// records each outcome in span.err. It returns when all reads are done.
func (h *Handler) readSpans(ctx context.Context, spans []span) {
	workers := min(h.cfg.ReadConcurrency, len(spans))
	if workers <= 1 {
		for i := range spans {
			spans[i].err = h.readFull(ctx, spans[i].key, spans[i].dst, spans[i].off)
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
				if i >= len(spans) {
					return
				}
				s := &spans[i]
				s.err = h.readFull(ctx, s.key, s.dst, s.off)
			}
		})
	}
	wg.Wait()
}

// readFull fills p from the object key at off. A short read is an error
// (io.ErrUnexpectedEOF when the reader gave none); io.EOF with a full p is
// success, as io.ReaderAt allows.
func (h *Handler) readFull(ctx context.Context, key string, p []byte, off int64) error {
	n, err := h.r.ReadAt(ctx, key, p, off)
	if n == len(p) && (err == nil || errors.Is(err, io.EOF)) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("fetch: read %s [%d, %d): %w", key, off, off+int64(len(p)), err)
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
func stamp(buf []byte, bs []coordinator.BatchCoordinate, epoch int32, allowZstd bool) (n, size int, errc *kerr.Error) {
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
func matches(b []byte, c *coordinator.BatchCoordinate) (batch.Header, bool) {
	h, n, err := batch.Parse(b)
	if err != nil || n != len(b) || n != int(c.ByteSize) || h.Magic() != 2 ||
		int64(h.LastOffsetDelta()) != c.LastOffset-c.BaseOffset {
		return nil, false
	}
	return h, true
}
