package batch

import (
	"errors"
	"fmt"
	"math"
)

// ErrRunMismatch is wrapped by CheckRun's errors: stored batches that are
// not the run their caller says.
var ErrRunMismatch = errors.New("batch: stored batches do not match their run")

// CheckRun checks stored batches as the store should hold them (produce
// accepted them so, SPEC §2): p is a run's bytes from its start —
// consecutive batches of one partition whose offsets begin at base and
// end at last at most — and each batch must be well framed, magic 2,
// with stored base offset 0, recordsCount of its offset span, a
// maxTimestamp not above maxTs and a matching CRC-32C. With prefix, p may
// end inside a batch, which is not checked. It returns how many leading
// batches pass, the offset after the last of them, the largest of their
// maxTimestamps (math.MinInt64 for none) and why the next one does not
// (wrapping ErrRunMismatch). A caller that read the whole run then checks
// that next is last+1 and the largest maxTimestamp maxTs: the batches
// add up to the run.
func CheckRun(p []byte, base, last, maxTs int64, prefix bool) (n int, next, seenMax int64, err error) {
	pos := 0
	next, seenMax = base, math.MinInt64
	for pos < len(p) {
		h, size, err := Parse(p[pos:])
		if err != nil {
			if prefix && errors.Is(err, ErrShort) {
				break
			}
			return n, next, seenMax, fmt.Errorf("%w: batch at offset %d: %w", ErrRunMismatch, next, err)
		}
		end := next + int64(h.LastOffsetDelta())
		switch {
		case h.Magic() != 2 || h.LastOffsetDelta() < 0 || end > last:
			return n, next, seenMax, fmt.Errorf("%w: batch at offset %d: framing, magic or offset span", ErrRunMismatch, next)
		case h.BaseOffset() != 0 || int64(h.RecordsCount()) != int64(h.LastOffsetDelta())+1:
			return n, next, seenMax, fmt.Errorf("%w: batch at offset %d: stored base offset %d, %d records", ErrRunMismatch, next, h.BaseOffset(), h.RecordsCount())
		case h.MaxTimestamp() > maxTs:
			return n, next, seenMax, fmt.Errorf("%w: batch at offset %d: max timestamp %d, the run's is %d", ErrRunMismatch, next, h.MaxTimestamp(), maxTs)
		case h.ComputeCRC() != h.CRC():
			return n, next, seenMax, fmt.Errorf("%w: batch at offset %d: CRC-32C mismatch", ErrRunMismatch, next)
		}
		seenMax = max(seenMax, h.MaxTimestamp())
		pos += size
		next = end + 1
		n++
	}
	return n, next, seenMax, nil
}
