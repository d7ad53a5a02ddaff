package fetch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/segment"
)

// hit is a record position found by a lookup: offset and timestamp (ms),
// −1/−1 for none.
type hit struct{ offset, timestamp int64 }

var miss = hit{-1, -1}

// lookup finds records by timestamp in one partition for ListOffsets (SPEC
// §5). The coordinator names a candidate run; the lookup reads it whole
// (the run's bytes are its batches back to back, walked by their headers)
// and looks at its batches in offset order, scanning at most the batches
// that hold the answer, each only up to the answer. A candidate that is a
// segment object is looked at through its index (segments.go): its
// entries are runs of their own, read one at a time. Each coordinator run
// it has to look past costs one coordinator call (next), whatever the
// partition's size.
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
	// owner is the coordinator's run being looked at; index, when it is a
	// segment object, its index, whose entries are its runs (else it is
	// its only run).
	owner diskless.RunCoordinate
	index *segmentIndex
	// run is the run being looked at: its coordinate, its bytes and its
	// batches as coordinates of their own (ByteOffset in the object, the
	// max timestamp of the batch's header).
	run     diskless.RunCoordinate
	buf     []byte
	batches []diskless.RunCoordinate
}

// enter makes r, a run the coordinator named, the one looked at: its runs
// are itself, or the entries of its index when it is a segment object.
// Errors: reading the index (KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE).
func (l *lookup) enter(ctx context.Context, r diskless.RunCoordinate) *kerr.Error {
	l.owner, l.index = r, nil
	if !r.Segment() {
		return nil
	}
	x, err := l.h.segmentIndexOf(ctx, &r)
	if err != nil {
		if errors.Is(err, cache.ErrCorrupt) || errors.Is(err, segment.ErrCorrupt) {
			l.corrupt(&r, err.Error())
			return kerr.CorruptMessage
		}
		l.h.warn(ctx, l.topic, l.tp.Partition, "list offsets: read failed",
			slog.Int64("offset", r.BaseOffset), slog.Any("err", err))
		return kerr.KafkaStorageError
	}
	l.index = x
	return nil
}

// runs is how many runs the owner holds.
func (l *lookup) runs() int {
	if l.index == nil {
		return 1
	}
	return len(l.index.entries)
}

// runAt returns the owner's run k.
func (l *lookup) runAt(k int) diskless.RunCoordinate {
	if l.index == nil {
		return l.owner
	}
	return l.index.entryRun(&l.owner, k)
}

// largestRunAfter returns the earliest of the owner's runs after k (−1:
// from the first) whose effective max timestamp is the largest of those,
// and that timestamp; −1 if there is none.
func (l *lookup) largestRunAfter(k int) (int, int64) {
	best, v := -1, int64(0)
	for j := k + 1; j < l.runs(); j++ {
		r := l.runAt(j)
		if m := r.MaxTimestamp(); best < 0 || m > v {
			best, v = j, m
		}
	}
	return best, v
}

// open reads run r and walks its batches into l.batches. A LogAppendTime
// run is not read: every record of it has the run's append time (SPEC
// §5), so it is looked at as one batch, from its coordinate. Errors: those
// of readRun, as scan reports them.
func (l *lookup) open(ctx context.Context, r diskless.RunCoordinate) *kerr.Error {
	if r.TimestampType == batch.TimestampLogAppendTime {
		l.run, l.buf, l.batches = r, nil, append(l.batches[:0], r)
		return nil
	}
	if r.ByteSize < batch.HeaderSize {
		l.corrupt(&r, "coordinate too small for a batch")
		return kerr.CorruptMessage
	}
	buf := make([]byte, r.ByteSize)
	seqEnd := int64(0)
	if l.index != nil {
		seqEnd = int64(l.owner.ByteSize) // r is an entry of the owner, a segment object
	}
	if err := l.h.readRun(ctx, &r, seqEnd, buf); err != nil {
		if errors.Is(err, cache.ErrCorrupt) {
			l.corrupt(&r, err.Error())
			return kerr.CorruptMessage
		}
		l.h.warn(ctx, l.topic, l.tp.Partition, "list offsets: read failed",
			slog.Int64("offset", r.BaseOffset), slog.Any("err", err))
		return kerr.KafkaStorageError
	}
	bs, err := walkRun(nil, buf, &r, false)
	if err != nil || len(bs) == 0 { // checked by the read (verifyRun)
		l.corrupt(&r, "bytes do not match the coordinate")
		return kerr.CorruptMessage
	}
	l.run, l.buf, l.batches = r, buf, l.batches[:0]
	for _, b := range bs {
		l.batches = append(l.batches, batchCoordinate(&r, b, batch.Header(buf[b.pos:b.pos+b.size]).MaxTimestamp()))
	}
	return nil
}

// bytesOf returns the bytes of c, a batch of the open run.
func (l *lookup) bytesOf(c *diskless.RunCoordinate) []byte {
	pos := c.ByteOffset - l.run.ByteOffset
	return l.buf[pos : pos+int64(c.ByteSize)]
}

// atOrAfter returns the first record at or above the log start offset with
// a timestamp ≥ target, looking in r, the coordinator's candidate run (the
// first run whose max timestamp is ≥ target), and then in the runs after
// it.
//
// Within a run the batches are looked at in offset order, each whose max
// timestamp is ≥ target scanned up to the first such record. A batch
// whose max timestamp is ≥ target but that has no such record at or above
// the log start offset is passed over: usually the log start lies inside
// it and its qualifying records were deleted. When the log start is at or
// below its base offset, every record was scanned and its header claims a
// timestamp no record has. Kafka's broker would have rewritten that header
// on produce; this sidecar validates headers only (DESIGN §Decisions), so
// it logs a warning naming the batch and passes over it as well,
// answering as a broker would have. After the run — after the last entry
// of a segment object's index — the next to look in is the first after it
// whose max timestamp is ≥ target: one coordinator call (next). Errors:
// those of enter, open, scan and next.
func (l *lookup) atOrAfter(ctx context.Context, r diskless.RunCoordinate, target int64) (hit, *kerr.Error) {
	atLeast := func(ts int64) bool { return ts >= target }
	for {
		if errc := l.enter(ctx, r); errc != nil {
			return miss, errc
		}
		for k := range l.runs() {
			if g := l.runAt(k); g.MaxTimestamp() < target || g.LastOffset < l.logStart {
				continue
			}
			if errc := l.open(ctx, l.runAt(k)); errc != nil {
				return miss, errc
			}
			for i := range l.batches {
				c := &l.batches[i]
				if c.MaxTimestamp() < target || c.LastOffset < l.logStart {
					continue
				}
				at, errc := l.first(ctx, c, atLeast)
				if errc != nil || at != miss {
					return at, errc
				}
				if l.logStart <= c.BaseOffset {
					l.corrupt(c, fmt.Sprintf("no record at or above timestamp %d, the batch's max timestamp is %d",
						target, c.MaxTimestamp()))
				}
			}
		}
		later, found, errc := l.next(ctx, &r, target)
		if errc != nil || !found {
			return miss, errc
		}
		r = later
	}
}

// maxTimestamp returns the earliest record at or above the log start offset
// holding the largest timestamp among those, given r, the coordinator's
// candidate: the earliest run with the largest max timestamp.
//
// Usually the first record of r's earliest batch holding that max
// timestamp is the answer. When the log start lies inside that batch the
// record may be deleted, and the answer is then the batch's largest record
// left or, if larger, the first record holding the largest max timestamp
// of the batches after it — later in its run, in the later runs of a
// segment object, or in the runs after r (next: one coordinator call). If
// the log start is at or below the batch's base offset and no record
// holds its max timestamp, its header is false (see atOrAfter): the
// lookup logs a warning and goes on the same way, taking the batch's
// largest record for its max. That answer is the best the index allows,
// not an exact one: a batch before it may hold a larger record than it
// really has, and finding it would mean reading every batch. Errors:
// those of enter, open, scan and next.
func (l *lookup) maxTimestamp(ctx context.Context, r diskless.RunCoordinate) (hit, *kerr.Error) {
	// Each turn starts with c, a batch of the open run, and (1) every
	// record at or above the log start offset and before c timestamped
	// below c's max timestamp, and (2) no batch after c with a larger max
	// timestamp, as of the coordinator answer that named c's run. The
	// coordinator's candidate run, its earliest run holding its max (a
	// segment's entry) and that run's earliest batch holding it meet both.
	// A turn moves on to later, the earliest batch after c with the
	// largest max timestamp, only if that is larger than every record c
	// has left: (2) holds by the choice of later, (1) by that and because
	// the batches between c and later have smaller max timestamps. If
	// later then neither answers nor is corrupt, the log start has passed
	// its base offset.
	if errc := l.enter(ctx, r); errc != nil {
		return miss, errc
	}
	gi, _ := l.largestRunAfter(-1)
	if errc := l.open(ctx, l.runAt(gi)); errc != nil {
		return miss, errc
	}
	ci := l.largestAfter(-1)
	for {
		c := l.batches[ci]
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
		// later: the earliest batch after c with the largest max
		// timestamp: later in c's run, in a later run of the owner, or in
		// the runs after the owner.
		li := l.largestAfter(ci)
		gj, gv := l.largestRunAfter(gi)
		owner := l.owner
		later, found, errc := l.next(ctx, &owner, diskless.ListOffsetsMaxTimestamp)
		if errc != nil {
			return miss, errc
		}
		if best != miss && best.offset < l.logStart {
			// The log start moved past best meanwhile: c has less left.
			if best, errc = l.largest(ctx, &c); errc != nil {
				return miss, errc
			}
		}
		where, v := 0, int64(math.MinInt64) // 1: li, 2: gj, 3: later
		if li >= 0 {
			where, v = 1, l.batches[li].MaxTimestamp()
		}
		if gj >= 0 && (where == 0 || gv > v) {
			where, v = 2, gv
		}
		if found && (where == 0 || later.MaxTimestamp() > v) {
			where, v = 3, later.MaxTimestamp()
		}
		if where == 0 || (best != miss && v <= best.timestamp) {
			return best, nil
		}
		switch where {
		case 1:
			ci = li
		case 2:
			gi = gj
			if errc := l.open(ctx, l.runAt(gi)); errc != nil {
				return miss, errc
			}
			ci = l.largestAfter(-1)
		case 3:
			if errc := l.enter(ctx, later); errc != nil {
				return miss, errc
			}
			gi, _ = l.largestRunAfter(-1)
			if errc := l.open(ctx, l.runAt(gi)); errc != nil {
				return miss, errc
			}
			ci = l.largestAfter(-1)
		}
	}
}

// largestAfter returns the index of the earliest batch of the open run
// after batch i (−1: from the first) whose max timestamp is the largest
// of those batches, or −1 if there is none.
func (l *lookup) largestAfter(i int) int {
	best := -1
	for j := i + 1; j < len(l.batches); j++ {
		if best < 0 || l.batches[j].MaxTimestamp() > l.batches[best].MaxTimestamp() {
			best = j
		}
	}
	return best
}

// next returns the coordinator's candidate for target (a timestamp ≥ 0 or
// diskless.ListOffsetsMaxTimestamp) among the runs after r, and
// whether there is one: one ListOffsetsFrom call from r's last offset + 1,
// answered from the partition as it is then (runs committed since the
// lookup began included, runs below a log start that has moved past r
// excluded). It takes up the log start offset of that answer. Errors: the
// coordinator's, or UNKNOWN_SERVER_ERROR for a candidate that is not after
// r (the lookup could not make progress).
func (l *lookup) next(ctx context.Context, r *diskless.RunCoordinate, target int64) (diskless.RunCoordinate, bool, *kerr.Error) {
	from := r.LastOffset + 1
	res := l.h.coord.ListOffsetsFrom(ctx, l.tp, target, from)
	if res.Err != nil {
		return diskless.RunCoordinate{}, false, res.Err
	}
	l.logStart = max(l.logStart, res.LogStartOffset)
	if res.Candidate == nil {
		return diskless.RunCoordinate{}, false, nil
	}
	if res.Candidate.LastOffset < from {
		return diskless.RunCoordinate{}, false, kerr.UnknownServerError
	}
	return *res.Candidate, true, nil
}

// first returns the first record of c at or above the log start offset
// whose timestamp satisfies ok, or miss. The scan stops there.
func (l *lookup) first(ctx context.Context, c *diskless.RunCoordinate, ok func(ts int64) bool) (hit, *kerr.Error) {
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
func (l *lookup) largest(ctx context.Context, c *diskless.RunCoordinate) (hit, *kerr.Error) {
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
func (l *lookup) scan(ctx context.Context, c *diskless.RunCoordinate, fn func(hit) bool) *kerr.Error {
	buf := l.bytesOf(c)
	h, n, err := batch.Parse(buf) // checked by the read (verifyRun)
	if err != nil || n != len(buf) {
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
	err = scanRecords(src, span, func(offset, ts int64) bool {
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
func (l *lookup) scanFailed(c *diskless.RunCoordinate, err error) *kerr.Error {
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

func (l *lookup) corrupt(c *diskless.RunCoordinate, why string) {
	l.h.warn(context.Background(), l.topic, l.tp.Partition, "list offsets: corrupt batch",
		append(l.batchAttrs(c), slog.String("reason", why))...)
}

// batchAttrs are the log attributes naming c.
func (l *lookup) batchAttrs(c *diskless.RunCoordinate) []slog.Attr {
	return []slog.Attr{slog.Int64("offset", c.BaseOffset), slog.String("object", c.ObjectKey),
		slog.Int64("byte_offset", int64(c.ByteOffset)), slog.Int64("size", int64(c.ByteSize))}
}
