package fetch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// readSpans reads every span, up to cfg.ReadConcurrency objects at a
// time, and records each outcome in span.err. The spans are grouped by
// object (which reorders them) and each object's spans are one ReadRanges
// call, given the object's size and the oldest commit time among them, and
// checking each span's runs (spanChecker); a failed read of an object
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
		o := cache.Object{Key: obj[0].key, Size: obj[0].size, WrittenMs: obj[0].written, SequentialEnd: obj[0].seqEnd}
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
// i: each run against its coordinate (verifyRuns).
type spanChecker []span

func (c *spanChecker) Check(i int, p []byte) error {
	s := &(*c)[i]
	if k, _, err := verifyRuns(p, s.rs); err != nil {
		return fmt.Errorf("run at offset %d: %w", s.rs[k].BaseOffset, err)
	}
	return nil
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

// readRun fills buf (r.ByteSize bytes) with the run r names, checked
// against r, given its object's size and commit time (so that an old run
// is not cached in the main LRU) and seqEnd, the object's
// cache.Object.SequentialEnd (a segment object's data size, else 0).
// Errors: the read's, or one wrapping cache.ErrCorrupt if the bytes failed
// their check twice.
func (h *Handler) readRun(ctx context.Context, r *diskless.RunCoordinate, seqEnd int64, buf []byte) error {
	rs := []cache.Range{{Off: r.ByteOffset, P: buf}}
	check := spanChecker{{rs: []diskless.RunCoordinate{*r}}}
	o := cache.Object{Key: r.ObjectKey, Size: r.FileSize, WrittenMs: r.LogAppendTime, SequentialEnd: seqEnd}
	if err := h.r.ReadRanges(ctx, o, rs, &check); err != nil {
		return fmt.Errorf("fetch: read %s [%d, %d): %w", r.ObjectKey, r.ByteOffset, r.ByteOffset+int64(len(buf)), err)
	}
	return nil
}
