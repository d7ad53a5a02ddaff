package fetch

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// The coordinator indexes runs, not batches (DESIGN §Coordinators): a run
// is one partition's batches of one file commit, back to back in the
// object, with consecutive offsets. Fetch reads a run's whole byte range
// and walks its batches by their headers (each says its length, SPEC §1),
// assigning each its offsets from the run's base offset; it then serves
// from the batch holding the fetch offset, as it would from a batch
// coordinate (SPEC §4).

// runBatch is one batch of a run, found by walking the run's bytes.
type runBatch struct {
	// pos and size locate the batch in the run's bytes (walkRun) or in a
	// partition's buffer of several runs (fetchOp.serve).
	pos, size int
	// run is the index of its run among a partition's (fetchOp.serve).
	run int
	// base and last are its assigned offsets (inclusive).
	base, last int64
}

// errRunCheck is the root of the errors of a run's bytes that do not match
// its coordinate.
var errRunCheck = errors.New("fetch: stored run does not match its coordinate")

// walkRun appends to dst the batches of r read into p (p holds r's bytes
// from its start; with prefix, possibly only a prefix of them, a last
// batch not whole in p then ending the walk) and returns them with the
// error, if any, that stopped the walk before p's end: a batch that is not
// whole in p (without prefix), is not magic 2, or would take the run past
// its last offset. Only framing is checked (verifyRun checks the rest).
func walkRun(dst []runBatch, p []byte, r *diskless.RunCoordinate, prefix bool) ([]runBatch, error) {
	pos, next := 0, r.BaseOffset
	for pos < len(p) {
		h, n, err := batch.Parse(p[pos:])
		if err != nil {
			if prefix && errors.Is(err, batch.ErrShort) {
				return dst, nil
			}
			return dst, fmt.Errorf("%w: batch at offset %d: %w", errRunCheck, next, err)
		}
		last := next + int64(h.LastOffsetDelta())
		switch {
		case h.Magic() != 2:
			return dst, fmt.Errorf("%w: batch at offset %d: magic %d", errRunCheck, next, h.Magic())
		case h.LastOffsetDelta() < 0 || last > r.LastOffset:
			return dst, fmt.Errorf("%w: batch at offset %d ends at %d, the run at %d", errRunCheck, next, last, r.LastOffset)
		}
		dst = append(dst, runBatch{pos: pos, size: n, base: next, last: last})
		pos += n
		next = last + 1
	}
	return dst, nil
}

// verifyRun checks r's bytes p, read whole, as they were stored (SPEC §2:
// produce accepted them so): back-to-back well-formed v2 batches, each
// with stored base offset 0, recordsCount of its offset span and a
// matching CRC-32C, whose offsets end at r's last offset, and whose max
// timestamps' largest is the committed one. It returns how many leading
// batches pass and why the next one does not (wrapping errRunCheck); a
// run whose batches pass but do not add up to the coordinate passes none.
func verifyRun(p []byte, r *diskless.RunCoordinate) (int, error) {
	if int64(len(p)) != int64(r.ByteSize) || r.ByteSize < batch.HeaderSize {
		return 0, fmt.Errorf("%w: %d bytes for a run of %d", errRunCheck, len(p), r.ByteSize)
	}
	n, end, maxTs, err := verifyBatches(p, r, false)
	if err != nil {
		return n, err
	}
	if end != r.LastOffset+1 || maxTs != r.BatchMaxTimestamp {
		return 0, fmt.Errorf("%w: batches end at offset %d with max timestamp %d, the run at %d with %d",
			errRunCheck, end-1, maxTs, r.LastOffset, r.BatchMaxTimestamp)
	}
	return n, nil
}

// verifyBatches checks the batches of r in p, its bytes from its start, as
// verifyRun does each (batch.CheckRun); with prefix, p may end inside a
// batch, which is not checked. It returns how many leading batches pass,
// the offset after the last and the largest max timestamp, and why the
// next one does not (wrapping errRunCheck).
func verifyBatches(p []byte, r *diskless.RunCoordinate, prefix bool) (n int, next, maxTs int64, err error) {
	n, next, maxTs, err = batch.CheckRun(p, r.BaseOffset, r.LastOffset, r.BatchMaxTimestamp, prefix)
	if err != nil {
		err = fmt.Errorf("%w: %w", errRunCheck, err)
	}
	return n, next, maxTs, err
}

// verifyRuns checks runs read back to back into p with verifyRun, the
// last read only in part when p ends before it does (its whole batches
// checked, verifyBatches), and returns the index of the first that fails,
// how many of its leading batches pass, and why; len(rs) and nil if all
// pass.
func verifyRuns(p []byte, rs []diskless.RunCoordinate) (run, batches int, err error) {
	pos := 0
	for i := range rs {
		end := pos + int(rs[i].ByteSize)
		if rs[i].ByteSize < batch.HeaderSize {
			return i, 0, fmt.Errorf("%w: coordinate of %d bytes", errRunCheck, rs[i].ByteSize)
		}
		if end > len(p) {
			if i < len(rs)-1 {
				return i, 0, fmt.Errorf("%w: %d bytes for runs of %d and more", errRunCheck, len(p), end)
			}
			if n, _, _, err := verifyBatches(p[pos:], &rs[i], true); err != nil {
				return i, n, err
			}
			return len(rs), 0, nil
		}
		if n, err := verifyRun(p[pos:end], &rs[i]); err != nil {
			return i, n, err
		}
		pos = end
	}
	return len(rs), 0, nil
}

// stampBatch rewrites one batch b of run r, read into p, for the client
// (SPEC §1, §4; DESIGN §Fetch step 4):
//
//   - baseOffset ← the batch's assigned base offset, partitionLeaderEpoch
//     ← epoch (both outside the CRC);
//   - on LogAppendTime runs, the timestamp-type bit is set, maxTimestamp
//     ← the log-append time, and the CRC recomputed.
//
// The bytes must have passed verifyRun (the ObjectReader's check: once per
// byte read from the store), so that the new CRC never blesses a corrupt
// batch; stampBatch checks again only what costs nothing (framing, magic,
// offset span). It returns CORRUPT_MESSAGE for bytes that are not b's
// batch, UNSUPPORTED_COMPRESSION_TYPE for zstd when !allowZstd (Fetch
// before v10), leaving the bytes untouched, else nil.
func stampBatch(p []byte, r *diskless.RunCoordinate, b runBatch, epoch int32, allowZstd bool) *kerr.Error {
	if b.pos < 0 || b.size < batch.HeaderSize || b.pos+b.size > len(p) {
		return kerr.CorruptMessage
	}
	h, n, err := batch.Parse(p[b.pos : b.pos+b.size])
	if err != nil || n != b.size || h.Magic() != 2 || int64(h.LastOffsetDelta()) != b.last-b.base {
		return kerr.CorruptMessage
	}
	if !allowZstd && h.Codec() == batch.CodecZstd {
		return kerr.UnsupportedCompressionType
	}
	if r.TimestampType == batch.TimestampLogAppendTime {
		h.SetLogAppendTime(r.LogAppendTime)
		h.UpdateCRC()
	}
	h.SetBaseOffset(b.base)
	h.SetPartitionLeaderEpoch(epoch)
	return nil
}

// batchCoordinate returns the coordinate of batch b of run r, as a run of
// that one batch: its object range, its offsets, r's timestamp type and
// log-append time, and the max timestamp its header holds (hdrMaxTs).
func batchCoordinate(r *diskless.RunCoordinate, b runBatch, hdrMaxTs int64) diskless.RunCoordinate {
	c := *r
	c.ByteOffset, c.ByteSize = r.ByteOffset+int64(b.pos), int32(b.size)
	c.BaseOffset, c.LastOffset = b.base, b.last
	c.BatchMaxTimestamp = hdrMaxTs
	return c
}
