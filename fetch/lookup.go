package fetch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// hit is a record position found by a lookup: offset and timestamp (ms),
// −1/−1 for none.
type hit struct{ offset, timestamp int64 }

var miss = hit{-1, -1}

// lookup finds records by timestamp in one partition for ListOffsets (SPEC
// §5). It reads at most the batches that hold the answer, and scans each
// only up to the answer. Each batch it has to look past costs one
// coordinator call (next), whatever the partition's size.
type lookup struct {
	h     *Handler
	topic string
	tp    diskless.TopicPartition
	// logStart is the partition's log start offset as of the
	// coordinator's latest answer; it only moves up (a concurrent
	// retention or DeleteRecords), and no answer falls below it.
	logStart int64
	// spent is the time the lookup has spent decompressing and scanning
	// compressed batches; it may reach Config.MaxScanTime.
	spent time.Duration
}

// atOrAfter returns the first record at or above the log start offset with
// a timestamp ≥ target, looking in c, the coordinator's candidate (the first
// batch whose max timestamp is ≥ target), and then in the batches after it.
//
// A batch whose max timestamp is ≥ target but that has no such record at
// or above the log start offset is passed over: usually the log start lies
// inside it and its qualifying records were deleted. When the log start is
// at or below its base offset, every record was scanned and its header
// (which the index copies) claims a timestamp no record has. Kafka's broker
// would have rewritten that header on produce; this sidecar validates
// headers only (DESIGN §Decisions), so it logs a warning naming the batch
// and passes over it as well, answering as a broker would have. The next
// batch to look in is the first after it whose max timestamp is ≥ target:
// one coordinator call (next). Errors: those of scan and next.
func (l *lookup) atOrAfter(ctx context.Context, c diskless.BatchCoordinate, target int64) (hit, *kerr.Error) {
	atLeast := func(ts int64) bool { return ts >= target }
	for {
		if c.MaxTimestamp() >= target {
			at, errc := l.first(ctx, &c, atLeast)
			if errc != nil || at != miss {
				return at, errc
			}
			if l.logStart <= c.BaseOffset {
				l.corrupt(&c, fmt.Sprintf("no record at or above timestamp %d, the batch's max timestamp is %d",
					target, c.MaxTimestamp()))
			}
		}
		later, found, errc := l.next(ctx, &c, target)
		if errc != nil || !found {
			return miss, errc
		}
		c = later
	}
}

// maxTimestamp returns the earliest record at or above the log start offset
// holding the largest timestamp among those, given c, the coordinator's
// candidate: the earliest batch with the largest max timestamp.
//
// Usually c's first record holding its max timestamp is the answer. When
// the log start lies inside c that record may be deleted, and the answer is
// then c's largest record left or, if larger, the first record holding the
// largest max timestamp of the batches after c (next: one coordinator
// call). If the log start is at or below c's base offset and no record
// holds c's max timestamp, c's header is false (see atOrAfter): the lookup
// logs a warning and goes on the same way, taking c's largest record for
// its max. That answer is the best the index allows, not an exact one: a
// batch before c may hold a larger record than c really has, and finding
// it would mean reading every batch. Errors: those of scan and next.
func (l *lookup) maxTimestamp(ctx context.Context, c diskless.BatchCoordinate) (hit, *kerr.Error) {
	// Each turn starts with (1) every record at or above the log start
	// offset and before c timestamped below c's max timestamp, and (2) no
	// batch after c with a larger max timestamp, as of the coordinator
	// answer that named c. The coordinator's candidate meets both. A turn
	// moves on to later, the earliest batch after c with the largest max
	// timestamp (as of a new answer), only if that is larger than every
	// record c has left: (2) holds by the choice of later, (1) by that and
	// because the batches between c and later have smaller max
	// timestamps. If later then neither answers nor is corrupt, the log
	// start has passed its base offset.
	for {
		best, errc := l.largest(ctx, &c)
		if errc != nil {
			return miss, errc
		}
		if best != miss && best.timestamp == c.MaxTimestamp() {
			return best, nil
		}
		if l.logStart <= c.BaseOffset {
			l.corrupt(&c, fmt.Sprintf("the largest record timestamp is %d, the batch's max timestamp is %d",
				best.timestamp, c.MaxTimestamp()))
		}
		later, found, errc := l.next(ctx, &c, diskless.ListOffsetsMaxTimestamp)
		if errc != nil {
			return miss, errc
		}
		if best != miss && best.offset < l.logStart {
			// The log start moved past best meanwhile: c has less left.
			if best, errc = l.largest(ctx, &c); errc != nil {
				return miss, errc
			}
		}
		if !found || (best != miss && later.MaxTimestamp() <= best.timestamp) {
			return best, nil
		}
		c = later
	}
}

// next returns the coordinator's candidate for target (a timestamp ≥ 0 or
// diskless.ListOffsetsMaxTimestamp) among the batches after c, and
// whether there is one: one ListOffsetsFrom call from c's last offset + 1,
// answered from the partition as it is then (batches committed since the
// lookup began included, batches below a log start that has moved past c
// excluded). It takes up the log start offset of that answer. Errors: the
// coordinator's, or UNKNOWN_SERVER_ERROR for a candidate that is not after
// c (the lookup could not make progress).
func (l *lookup) next(ctx context.Context, c *diskless.BatchCoordinate, target int64) (diskless.BatchCoordinate, bool, *kerr.Error) {
	from := c.LastOffset + 1
	r := l.h.coord.ListOffsetsFrom(ctx, l.tp, target, from)
	if r.Err != nil {
		return diskless.BatchCoordinate{}, false, r.Err
	}
	l.logStart = max(l.logStart, r.LogStartOffset)
	if r.Candidate == nil {
		return diskless.BatchCoordinate{}, false, nil
	}
	if r.Candidate.LastOffset < from {
		return diskless.BatchCoordinate{}, false, kerr.UnknownServerError
	}
	return *r.Candidate, true, nil
}

// first returns the first record of c at or above the log start offset
// whose timestamp satisfies ok, or miss. The scan stops there.
func (l *lookup) first(ctx context.Context, c *diskless.BatchCoordinate, ok func(ts int64) bool) (hit, *kerr.Error) {
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
func (l *lookup) largest(ctx context.Context, c *diskless.BatchCoordinate) (hit, *kerr.Error) {
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
// (Config.DecompressConcurrency) while it is scanned, and is decompressed
// as a stream (decompressed) through a fixed buffer, so memory does not
// grow with what it decompresses to; the time it takes is charged to
// l.spent, which may reach Config.MaxScanTime. Errors: KAFKA_STORAGE_ERROR
// (the read failed, or ctx ended while waiting for a slot),
// CORRUPT_MESSAGE (the bytes are not c's batch, fail the CRC, do not
// decompress or parse), REQUEST_TIMED_OUT (the lookup's MaxScanTime ran
// out before the answer).
func (l *lookup) scan(ctx context.Context, c *diskless.BatchCoordinate, fn func(hit) bool) *kerr.Error {
	if c.ByteSize < batch.HeaderSize {
		l.corrupt(c, "coordinate too small for a batch")
		return kerr.CorruptMessage
	}
	buf := make([]byte, c.ByteSize)
	if err := l.h.readBatch(ctx, c, buf); err != nil {
		if errors.Is(err, cache.ErrCorrupt) {
			l.corrupt(c, err.Error())
			return kerr.CorruptMessage
		}
		l.h.warn(ctx, l.topic, l.tp.Partition, "list offsets: read failed",
			slog.Int64("offset", c.BaseOffset), slog.Any("err", err))
		return kerr.KafkaStorageError
	}
	h, ok := matches(buf, c) // checked by the read (verifyBatches)
	if !ok {
		l.corrupt(c, "bytes do not match the coordinate")
		return kerr.CorruptMessage
	}
	span := recordsSpan{
		baseOffset:      c.BaseOffset, // the stored batch has 0
		baseTimestamp:   h.BaseTimestamp(),
		lastOffsetDelta: h.LastOffsetDelta(),
		count:           h.RecordsCount(),
	}
	records := buf[batch.HeaderSize:]
	var src recordReader = memRecords{bytes.NewReader(records)}
	if codec := h.Codec(); codec != batch.CodecNone {
		release, err := l.h.acquireDecompress(ctx)
		if err != nil {
			l.h.warn(ctx, l.topic, l.tp.Partition, "list offsets: no decompression slot",
				slog.Int64("offset", c.BaseOffset), slog.Any("err", err))
			return kerr.KafkaStorageError
		}
		defer release()
		start := time.Now()
		defer func() { l.spent += time.Since(start) }()
		r, done, err := decompressed(codec, records)
		if err != nil {
			return l.scanFailed(c, err)
		}
		defer done()
		timed := &timedReader{r: r, deadline: start.Add(l.h.cfg.MaxScanTime - l.spent)}
		src = bufio.NewReaderSize(timed, scanBufferSize)
	}
	err := scanRecords(src, span, func(offset, ts int64) bool {
		return offset < l.logStart || fn(hit{offset, ts})
	})
	if err != nil {
		return l.scanFailed(c, err)
	}
	return nil
}

// scanBufferSize is the buffer decompressed records are parsed from: the
// scan's whole working set besides the codec's.
const scanBufferSize = 16 << 10

// memRecords is a recordReader over an uncompressed records section, which
// is in memory already: read in place, with no buffer to fill and copy
// through.
type memRecords struct{ *bytes.Reader }

// Discard skips n bytes, as bufio.Reader's does: fewer, with io.EOF, if the
// records end first.
func (r memRecords) Discard(n int) (int, error) {
	if n < 0 {
		return 0, bufio.ErrNegativeCount
	}
	if left := r.Len(); n > left {
		_, _ = r.Seek(0, io.SeekEnd)
		return left, io.EOF
	}
	_, _ = r.Seek(int64(n), io.SeekCurrent)
	return n, nil
}

// scanFailed logs why c could not be scanned and returns the partition's
// error: REQUEST_TIMED_OUT when the lookup ran out of Config.MaxScanTime
// (the batch may well be sound, and the client retries), else
// CORRUPT_MESSAGE, the code a broker sends for a batch it cannot decode,
// whose description ("… exceeds the valid size, … or is otherwise
// corrupt") also covers a zstd window too large to allocate.
func (l *lookup) scanFailed(c *diskless.BatchCoordinate, err error) *kerr.Error {
	if errors.Is(err, errScanTime) {
		l.h.warn(context.Background(), l.topic, l.tp.Partition, "list offsets: batch scan out of time",
			append(l.batchAttrs(c), slog.Duration("max_scan_time", l.h.cfg.MaxScanTime))...)
		return kerr.RequestTimedOut
	}
	if errors.Is(err, errTooLarge) {
		l.h.warn(context.Background(), l.topic, l.tp.Partition, "list offsets: batch too large to decompress",
			append(l.batchAttrs(c), slog.Any("err", err))...)
		return kerr.CorruptMessage
	}
	l.corrupt(c, err.Error())
	return kerr.CorruptMessage
}

func (l *lookup) corrupt(c *diskless.BatchCoordinate, why string) {
	l.h.warn(context.Background(), l.topic, l.tp.Partition, "list offsets: corrupt batch",
		append(l.batchAttrs(c), slog.String("reason", why))...)
}

// batchAttrs are the log attributes naming c.
func (l *lookup) batchAttrs(c *diskless.BatchCoordinate) []slog.Attr {
	return []slog.Attr{slog.Int64("offset", c.BaseOffset), slog.String("object", c.ObjectKey),
		slog.Int64("byte_offset", int64(c.ByteOffset)), slog.Int64("size", int64(c.ByteSize))}
}
