package fetch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// scanPageBytes is the MaxBytes of the FindBatches calls a timestamp lookup
// makes when it has to look past the coordinator's candidate batch. Only
// coordinates come back, no data, so a page can be large.
const scanPageBytes = 64 << 20

// hit is a record position found by a lookup: offset and timestamp (ms),
// −1/−1 for none.
type hit struct{ offset, timestamp int64 }

var miss = hit{-1, -1}

// lookup finds records by timestamp in one partition for ListOffsets (SPEC
// §5). It reads at most the batches that hold the answer, and scans each
// only up to the answer.
type lookup struct {
	h     *Handler
	topic string
	tp    coordinator.TopicPartition
	// logStart and hwm are the partition's offsets as of the coordinator's
	// answer; logStart only moves up (a concurrent retention or
	// DeleteRecords), and no answer falls below it.
	logStart, hwm int64
	// left is what the lookup may still decompress, in bytes; it starts
	// at Config.MaxDecompressedBytes.
	left int64
}

// atOrAfter returns the first record at or above the log start offset with
// a timestamp ≥ target, looking in c, the coordinator's candidate (the first
// batch whose max timestamp is ≥ target), and then in the batches after it:
// c's qualifying records may all lie below the log start offset.
func (l *lookup) atOrAfter(ctx context.Context, c coordinator.BatchCoordinate, target int64) (hit, *kerr.Error) {
	atLeast := func(ts int64) bool { return ts >= target }
	for {
		if c.MaxTimestamp() >= target {
			if at, errc := l.first(ctx, &c, atLeast); errc != nil || at != miss {
				return at, errc
			}
		}
		found := false
		errc := l.walk(ctx, c.LastOffset+1, func(b *coordinator.BatchCoordinate) bool {
			if b.MaxTimestamp() >= target {
				c, found = *b, true
				return false
			}
			return true
		})
		if errc != nil || !found {
			return miss, errc
		}
	}
}

// maxTimestamp returns the earliest record at or above the log start offset
// holding the partition's largest timestamp, given c, the coordinator's
// candidate: the earliest batch with the largest max timestamp.
func (l *lookup) maxTimestamp(ctx context.Context, c coordinator.BatchCoordinate) (hit, *kerr.Error) {
	best, errc := l.largest(ctx, &c)
	if errc != nil || (best != miss && best.timestamp == c.MaxTimestamp()) {
		return best, errc
	}
	// c's largest timestamp lies below the log start offset, which has
	// moved into c: the answer is best or lies in a later batch.
	var later coordinator.BatchCoordinate
	found := false
	errc = l.walk(ctx, c.LastOffset+1, func(b *coordinator.BatchCoordinate) bool {
		if !found || b.MaxTimestamp() > later.MaxTimestamp() {
			later, found = *b, true
		}
		return true
	})
	if errc != nil || !found || (best != miss && later.MaxTimestamp() <= best.timestamp) {
		return best, errc
	}
	want := later.MaxTimestamp()
	at, errc := l.first(ctx, &later, func(ts int64) bool { return ts == want })
	if errc != nil || at == miss {
		return best, errc
	}
	return at, nil
}

// first returns the first record of c at or above the log start offset
// whose timestamp satisfies ok, or miss. The scan stops there.
func (l *lookup) first(ctx context.Context, c *coordinator.BatchCoordinate, ok func(ts int64) bool) (hit, *kerr.Error) {
	if c.TimestampType == batch.TimestampLogAppendTime {
		// Every record has the batch's append time.
		off := max(c.BaseOffset, l.logStart)
		if off > c.LastOffset || !ok(c.LogAppendTime) {
			return miss, nil
		}
		return hit{off, c.LogAppendTime}, nil
	}
	at := miss
	errc := l.scan(ctx, c, func(r hit) bool {
		if ok(r.timestamp) {
			at = r
			return false
		}
		return true
	})
	return at, errc
}

// largest returns the earliest record of c at or above the log start offset
// with the largest timestamp among those, or miss if c has none there. The
// scan stops at the first record holding c's max timestamp (the header's,
// which the index holds): none after it can be larger.
func (l *lookup) largest(ctx context.Context, c *coordinator.BatchCoordinate) (hit, *kerr.Error) {
	if c.TimestampType == batch.TimestampLogAppendTime {
		return l.first(ctx, c, func(int64) bool { return true })
	}
	best := miss
	errc := l.scan(ctx, c, func(r hit) bool {
		if best == miss || r.timestamp > best.timestamp {
			best = r
		}
		return best.timestamp != c.MaxTimestamp()
	})
	return best, errc
}

// scan reads c and calls fn with each of its records at or above the log
// start offset, in offset order, until fn returns false. Records are parsed
// as a stream (scanRecords): only offsets and timestamps are decoded, keys
// and values are skipped. A compressed batch takes a decompression slot
// (Config.DecompressConcurrency) while it is scanned, and what it
// decompresses is charged to l.left (Config.MaxDecompressedBytes). Errors:
// KAFKA_STORAGE_ERROR (the read failed, or ctx ended while waiting for a
// slot), CORRUPT_MESSAGE (the bytes are not c's batch, fail the CRC, do not
// decompress or parse, or decompress past the budget).
func (l *lookup) scan(ctx context.Context, c *coordinator.BatchCoordinate, fn func(hit) bool) *kerr.Error {
	if c.ByteSize < batch.HeaderSize {
		l.corrupt(c, "coordinate too small for a batch")
		return kerr.CorruptMessage
	}
	buf := make([]byte, c.ByteSize)
	if err := l.h.readBatch(ctx, c, buf); err != nil {
		l.h.log.Warn("list offsets: read failed", "topic", l.topic, "partition", l.tp.Partition,
			"offset", c.BaseOffset, "err", err)
		return kerr.KafkaStorageError
	}
	h, ok := matches(buf, c)
	if !ok || h.ComputeCRC() != h.CRC() {
		l.corrupt(c, "bytes do not match the coordinate or fail the CRC")
		return kerr.CorruptMessage
	}
	span := recordsSpan{
		baseOffset:      c.BaseOffset, // the stored batch has 0
		baseTimestamp:   h.BaseTimestamp(),
		lastOffsetDelta: h.LastOffsetDelta(),
		count:           h.RecordsCount(),
	}
	records := buf[batch.HeaderSize:]
	var src io.Reader = bytes.NewReader(records)
	if codec := h.Codec(); codec != batch.CodecNone {
		release, err := l.h.acquireDecompress(ctx)
		if err != nil {
			l.h.log.Warn("list offsets: no decompression slot", "topic", l.topic, "partition", l.tp.Partition,
				"offset", c.BaseOffset, "err", err)
			return kerr.KafkaStorageError
		}
		defer release()
		r, done, err := decompressed(codec, records, l.left)
		if err != nil {
			return l.scanFailed(c, err)
		}
		defer done()
		budget := &budgetReader{r: r, left: l.left}
		defer func() { l.left = budget.left }()
		src = budget
	}
	err := scanRecords(bufio.NewReaderSize(src, scanBufferSize), span, func(offset, ts int64) bool {
		return offset < l.logStart || fn(hit{offset, ts})
	})
	if err != nil {
		return l.scanFailed(c, err)
	}
	return nil
}

// scanBufferSize is the buffer records are parsed from: the scan's whole
// working set besides the codec's.
const scanBufferSize = 16 << 10

// scanFailed logs why c could not be scanned and returns CORRUPT_MESSAGE,
// the code a broker sends for a batch it cannot decode, whose description
// ("… exceeds the valid size, … or is otherwise corrupt") also covers a
// batch too large to decompress.
func (l *lookup) scanFailed(c *coordinator.BatchCoordinate, err error) *kerr.Error {
	if errors.Is(err, errTooLarge) {
		l.h.log.Warn("list offsets: batch too large to decompress", "topic", l.topic, "partition", l.tp.Partition,
			"offset", c.BaseOffset, "object", c.ObjectKey, "byte_offset", c.ByteOffset, "size", c.ByteSize,
			"max_decompressed_bytes", l.h.cfg.MaxDecompressedBytes, "err", err)
		return kerr.CorruptMessage
	}
	l.corrupt(c, err.Error())
	return kerr.CorruptMessage
}

func (l *lookup) corrupt(c *coordinator.BatchCoordinate, why string) {
	l.h.log.Warn("list offsets: corrupt batch", "topic", l.topic, "partition", l.tp.Partition,
		"offset", c.BaseOffset, "object", c.ObjectKey, "byte_offset", c.ByteOffset, "size", c.ByteSize,
		"reason", why)
}

// walk calls fn for each batch from offset from on, in offset order, up to
// the high watermark the lookup started with, until fn returns false; fn
// must copy a batch it keeps. A log start offset that
// has moved past from is followed; an offset past the end ends the walk.
func (l *lookup) walk(ctx context.Context, from int64, fn func(*coordinator.BatchCoordinate) bool) *kerr.Error {
	req := []coordinator.FindBatchesRequest{{TopicID: l.tp.TopicID, Partition: l.tp.Partition, MaxBytes: scanPageBytes}}
	for from < l.hwm {
		req[0].Offset = from
		rs := l.h.coord.FindBatches(ctx, req)
		if len(rs) != 1 {
			return kerr.UnknownServerError
		}
		r := &rs[0]
		if r.Err != nil {
			if r.Err.Code == kerr.OffsetOutOfRange.Code && from < r.LogStartOffset {
				l.logStart = max(l.logStart, r.LogStartOffset)
				from = r.LogStartOffset
				continue
			}
			if r.Err.Code == kerr.OffsetOutOfRange.Code {
				return nil // the end
			}
			return r.Err
		}
		l.logStart = max(l.logStart, r.LogStartOffset)
		if len(r.Batches) == 0 {
			return nil
		}
		for i := range r.Batches {
			b := &r.Batches[i]
			if b.BaseOffset >= l.hwm || !fn(b) {
				return nil
			}
		}
		next := r.Batches[len(r.Batches)-1].LastOffset + 1
		if next <= from {
			return kerr.UnknownServerError // the index went backwards
		}
		from = next
	}
	return nil
}
