package fetch

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/segment"
)

// Shared empty values for response fields where Kafka sends an empty value
// rather than null. Zero-length, so sharing them is safe.
var (
	// noRecords is the records of a partition without data.
	noRecords = []byte{}
	// noAborted is the aborted transactions of a read_committed fetch:
	// there are no transactions.
	noAborted = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
)

// fetchVersions: Fetch 4–16 (SPEC §6). v4 is the first with the isolation
// level and the last stable offset, and consumers that speak it read record
// batches v2; v13+ name topics by id (KIP-516); v16 adds the (tagged) node
// endpoints of KIP-951. v17 and v18 only add follower fields (directory id,
// the KIP-1166 high watermark), meaningless for a leaderless sidecar.
var fetchVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 1, MinVersion: 4, MaxVersion: 16}

// Fetch answers req, a Fetch v4–16 request, with exactly one response of
// the same version (SPEC §4), whatever happens: errors are per partition,
// and the top-level error is only FETCH_SESSION_ID_NOT_FOUND, for an
// incremental fetch-session request (v7+, SessionEpoch ∉ {0, −1}).
//
// Response topics and partitions mirror the request's, in order; v13+
// topics carry their topic id. Per partition errors:
//
//   - UNKNOWN_TOPIC_ID (v13+) or UNKNOWN_TOPIC_OR_PARTITION: unknown topic,
//     or a partition it does not have;
//   - FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (v9+): CurrentLeaderEpoch
//     below / above [Config.LeaderEpoch] (−1: not checked);
//   - OFFSET_OUT_OF_RANGE: fetch offset below the log start offset or above
//     the high watermark, with both filled in;
//   - KAFKA_STORAGE_ERROR, CORRUPT_MESSAGE, UNSUPPORTED_COMPRESSION_TYPE
//     (zstd before v10): the partition's first batch cannot be served (see
//     the package comment for a bad batch later on);
//   - UNSUPPORTED_VERSION: a version outside fetchVersions, which the
//     server does not advertise.
//
// Errors found before the index is consulted, and coordinator errors other
// than OFFSET_OUT_OF_RANGE, carry offsets −1, as Kafka sends them; every
// other entry carries the partition's high_watermark, last_stable_offset
// and log_start_offset, also when the byte budget left it empty. Under
// read_committed (isolation_level 1, SPEC §15) no batch at or past the
// last stable offset is served and the aborted transactions overlapping
// what is are listed.
//
// Budgets (KIP-74): max_bytes, capped by [Config.MaxBytes], is shared by
// the partitions in request order, partition_max_bytes bounds each, and the
// first batch of the response is returned even if larger than both.
//
// Fetch returns at once if min_bytes are available, any partition has an
// error, or max_wait_ms is 0; otherwise it waits (see the package comment)
// for at most min(max_wait_ms, [Config.MaxWait]). If ctx ends first it
// answers at once with the offsets known and no records.
func (h *Handler) Fetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	if req.Version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		// An incremental fetch names a session, and this server never
		// creates one (every response has SessionID 0). Kafka answers an
		// unknown session this way, with no topics; clients then fall
		// back to full fetches.
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp
	}
	op := h.resolve(req, resp)
	op.poll(ctx)
	op.read(ctx)
	return resp
}

// fetchOp is the state of one Fetch; it lives for the call only.
type fetchOp struct {
	h   *Handler
	req *kmsg.FetchRequest
	// maxBytes is the request's max_bytes, capped by Config.MaxBytes.
	maxBytes int32
	// parts are the partitions that passed resolve, in request order, and
	// finds their FindBatches requests, index for index.
	parts []fetchPart
	finds []diskless.FindBatchesRequest
	// cancelled is set when ctx ended while waiting: answer without reading.
	cancelled bool
}

// fetchPart is one partition of a fetchOp.
type fetchPart struct {
	out      *kmsg.FetchResponseTopicPartition // its response entry
	topic    string                            // for logs
	maxBytes int32                             // partition_max_bytes
	offset   int64                             // fetch_offset
	// end is, for read_committed, the last stable offset of the last
	// look: no batch at or past it is served (SPEC §15); else MaxInt64.
	end int64
	// sel are the runs chosen by the last look, within the budgets, tail
	// the bytes read of the last (its ByteSize, or less: a prefix), and
	// size the bytes read in all (the batches served from them, from the
	// one holding the fetch offset, are at most that).
	sel  []diskless.RunCoordinate
	tail int32
	size int64
	// seqEnd is, when sel are a segment object's index entries, the
	// object's data size (cache.Object.SequentialEnd); 0 for WAL runs.
	seqEnd int64
	// next is the run after sel, if the partition has one (empty
	// ObjectKey if not): its object is read ahead when sel ends in
	// another.
	next diskless.RunCoordinate
	// buf receives sel's bytes; cut is the index of the first run whose
	// read failed (len(sel) if none) and cutGood how many of its leading
	// batches passed their check, readErr that failure and cutErr its
	// code: KAFKA_STORAGE_ERROR (the read failed) or CORRUPT_MESSAGE (the
	// bytes failed their check on both reads).
	buf     []byte
	cut     int
	cutGood int
	cutErr  *kerr.Error
	readErr error
}

// resolve builds the response skeleton, fills in the errors that do not
// depend on the index (version, topic, partition, leader epoch) and returns
// the fetchOp for the partitions that remain.
func (h *Handler) resolve(req *kmsg.FetchRequest, resp *kmsg.FetchResponse) *fetchOp {
	total := 0
	for i := range req.Topics {
		total += len(req.Topics[i].Partitions)
	}
	op := &fetchOp{
		h:        h,
		req:      req,
		maxBytes: min(req.MaxBytes, h.cfg.MaxBytes),
		parts:    make([]fetchPart, 0, total),
		finds:    make([]diskless.FindBatchesRequest, 0, total),
	}
	supported := req.Version >= fetchVersions.MinVersion && req.Version <= fetchVersions.MaxVersion
	byID := req.Version >= 13
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		out := &resp.Topics[i]
		out.Default()
		out.Topic, out.TopicID = rt.Topic, rt.TopicID
		var (
			t       diskless.Topic
			ok      bool
			missing = kerr.UnknownTopicOrPartition
		)
		if byID {
			t, ok = h.coord.TopicByID(rt.TopicID)
			missing = kerr.UnknownTopicID
		} else {
			t, ok = h.coord.Topic(rt.Topic)
		}
		out.Partitions = make([]kmsg.FetchResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			o := &out.Partitions[j]
			o.Default()
			o.Partition = rp.Partition
			o.RecordBatches = noRecords
			var errc *kerr.Error
			switch {
			case !supported:
				errc = kerr.UnsupportedVersion
			case !ok:
				errc = missing
			case !partitionExists(&t, rp.Partition):
				errc = kerr.UnknownTopicOrPartition
			case req.Version >= 9:
				errc = h.checkLeaderEpoch(rp.CurrentLeaderEpoch)
			}
			if errc != nil {
				setPartitionError(o, errc)
				continue
			}
			if req.IsolationLevel == 1 {
				// read_committed: Kafka sends a list (maybe empty); null
				// is for read_uncommitted.
				o.AbortedTransactions = noAborted
			}
			op.parts = append(op.parts, fetchPart{out: o, topic: t.Name, maxBytes: rp.PartitionMaxBytes, offset: rp.FetchOffset, end: math.MaxInt64})
			op.finds = append(op.finds, diskless.FindBatchesRequest{
				TopicID:       t.ID,
				Partition:     rp.Partition,
				Offset:        rp.FetchOffset,
				MaxBytes:      min(rp.PartitionMaxBytes, op.maxBytes),
				ReadCommitted: req.IsolationLevel == 1,
			})
		}
	}
	return op
}

// setPartitionError marks o as failed with errc and unknown offsets, as
// Kafka does for a partition it could not read.
func setPartitionError(o *kmsg.FetchResponseTopicPartition, errc *kerr.Error) {
	o.ErrorCode = errc.Code
	o.HighWatermark, o.LastStableOffset, o.LogStartOffset = -1, -1, -1
}

// poll looks at the index until the request can be answered: min_bytes
// found, a partition error, max_wait passed, or ctx done (SPEC §4).
func (op *fetchOp) poll(ctx context.Context) {
	if len(op.parts) == 0 {
		return
	}
	minBytes := int64(op.req.MinBytes)
	wait := min(time.Duration(max(op.req.MaxWaitMillis, 0))*time.Millisecond, op.h.cfg.MaxWait)

	// The watch is taken before each look: a commit during the look
	// closes it, and the next look sees that commit.
	watch := op.h.coord.Watch()
	found, failed := op.look(ctx)
	if failed || found >= minBytes || wait <= 0 || op.disabling() {
		return
	}
	ctx, span := op.h.tr.Start(ctx, "fetch.long_poll", 0)
	outcome := op.wait(ctx, watch, wait, minBytes)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("diskless.fetch.max_wait_ms", wait.Milliseconds()),
			attribute.String("diskless.fetch.outcome", outcome))
	}
	span.End()
}

// wait is poll's long-poll: it waits for a commit (watch), then looks
// again, until min_bytes are found, a partition fails, the topic is being
// disabled, wait passes (one last look) or ctx ends. It returns which
// ended it, for the span: "min_bytes", "error", "disabling", "expired"
// or "cancelled".
func (op *fetchOp) wait(ctx context.Context, watch <-chan struct{}, wait time.Duration, minBytes int64) string {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for expired := false; !expired; {
		select {
		case <-watch:
		case <-timer.C:
			expired = true // one last look, as Kafka does when the wait ends
		case <-ctx.Done():
			op.cancelled = true
			return "cancelled"
		}
		watch = op.h.coord.Watch()
		found, failed := op.look(ctx)
		switch {
		case failed:
			return "error"
		case found >= minBytes:
			return "min_bytes"
		case op.disabling():
			return "disabling"
		}
	}
	return "expired"
}

// disabling reports whether a topic of the request is no longer ENABLED
// (SPEC §10): long-polls on it end, answering what there is.
func (op *fetchOp) disabling() bool {
	for i := range op.finds {
		if i > 0 && op.finds[i].TopicID == op.finds[i-1].TopicID {
			continue
		}
		if t, ok := op.h.coord.TopicByID(op.finds[i].TopicID); ok && t.Disablement.State != diskless.TopicEnabled {
			return true
		}
	}
	return false
}

// look asks the coordinator for every partition's batches, applies the
// budgets and fills in each partition's offsets and error. It returns the
// bytes chosen and whether any partition has an error.
func (op *fetchOp) look(ctx context.Context) (found int64, failed bool) {
	ctx, span := op.h.tr.Start(ctx, "fetch.find", 0)
	found, failed = op.find(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("diskless.partitions", len(op.finds)),
			attribute.Int64("diskless.bytes", found), attribute.Bool("diskless.fetch.failed", failed))
	}
	span.End()
	return found, failed
}

// find is look's work, under its span.
func (op *fetchOp) find(ctx context.Context) (found int64, failed bool) {
	results := op.h.coord.FindBatches(ctx, op.finds)
	if len(results) != len(op.finds) {
		// Every fetch would run into it: rate-limited too.
		op.h.rl.Log(ctx, slog.LevelError, "", "fetch: coordinator broke the FindBatches contract",
			slog.Int("requests", len(op.finds)), slog.Int("results", len(results)))
		for i := range op.parts {
			op.parts[i].sel, op.parts[i].size = nil, 0
			setPartitionError(op.parts[i].out, kerr.UnknownServerError)
		}
		return 0, true
	}
	b := newBudget(op.maxBytes)
	for i := range op.parts {
		p, r, o := &op.parts[i], &results[i], op.parts[i].out
		p.sel, p.size, p.next = nil, 0, diskless.RunCoordinate{}
		if r.Err != nil {
			setPartitionError(o, r.Err)
			if r.Err.Code == kerr.OffsetOutOfRange.Code {
				o.HighWatermark, o.LastStableOffset, o.LogStartOffset = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
			}
			failed = true
			continue
		}
		o.ErrorCode = 0
		o.HighWatermark, o.LastStableOffset, o.LogStartOffset = r.HighWatermark, r.LastStableOffset, r.LogStartOffset
		if op.req.IsolationLevel == 1 {
			p.end = r.LastStableOffset
			o.AbortedTransactions = noAborted
			if len(r.Aborted) > 0 {
				o.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(r.Aborted))
				for k, a := range r.Aborted {
					o.AbortedTransactions[k] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
				}
			}
		}
		runs, next, seqEnd, err := op.h.expandSegments(ctx, r.Runs, r.Next, p.offset, int64(min(p.maxBytes, op.maxBytes)))
		if err != nil {
			errc := kerr.KafkaStorageError
			if errors.Is(err, cache.ErrCorrupt) || errors.Is(err, segment.ErrCorrupt) {
				errc = kerr.CorruptMessage
			}
			op.h.warn(ctx, p.topic, o.Partition, "fetch: a segment's index cannot be read",
				slog.String("object", r.Runs[0].ObjectKey), slog.String("code", errc.Message), slog.Any("err", err))
			o.ErrorCode = errc.Code
			failed = true
			continue
		}
		r.Runs, r.Next = runs, next
		n, tail, size := b.take(r.Runs, p.maxBytes, p.offset)
		if n == 0 && len(r.Runs) > 0 && r.Runs[0].ByteSize < batch.HeaderSize {
			op.h.warn(ctx, p.topic, o.Partition, "fetch: coordinate too small for a batch",
				slog.Int64("offset", r.Runs[0].BaseOffset),
				slog.String("object", r.Runs[0].ObjectKey), slog.Int64("size", int64(r.Runs[0].ByteSize)))
			o.ErrorCode = kerr.CorruptMessage.Code
			failed = true
			continue
		}
		p.sel, p.tail, p.size, p.next, p.seqEnd = r.Runs[:n], tail, size, r.Next, seqEnd
		if n < len(r.Runs) {
			p.next = r.Runs[n]
		}
		found += min(size, max(int64(p.maxBytes), batch.HeaderSize))
	}
	return found, failed
}

// readAhead hints to the reader, for every partition whose next batch lies
// in another object than its last chosen one, that object: a partition
// catching up moves to it with its next fetch, and the cache reads it
// ahead if its data is beyond the cache's reach (DESIGN §Decisions:
// lagging reads).
func (op *fetchOp) readAhead() {
	for i := range op.parts {
		p := &op.parts[i]
		if len(p.sel) == 0 || p.next.ObjectKey == "" || p.next.ObjectKey == p.sel[len(p.sel)-1].ObjectKey {
			continue
		}
		o := cache.Object{Key: p.next.ObjectKey, Size: p.next.FileSize, WrittenMs: p.next.LogAppendTime}
		if p.next.Segment() {
			o.SequentialEnd = int64(p.next.ByteSize)
		}
		op.h.r.ReadAhead(o)
	}
}

// read reads the chosen runs into one exactly sized buffer per partition,
// walks their batches, serves each partition's batches from the one
// holding its fetch offset within the byte budgets (in request order,
// KIP-74: applied again here to the batches, whose sizes the look did not
// know), rewrites their headers and sets each partition's records, or its
// error if its first batch cannot be served.
func (op *fetchOp) read(ctx context.Context) {
	if op.cancelled || ctx.Err() != nil {
		return // every entry already has noRecords
	}
	nspans := 0
	for i := range op.parts {
		nspans += countSpans(op.parts[i].sel)
	}
	if nspans == 0 {
		return
	}
	spans := make([]span, 0, nspans)
	for i := range op.parts {
		p := &op.parts[i]
		p.cut = len(p.sel)
		if len(p.sel) == 0 {
			continue
		}
		p.buf = make([]byte, p.size)
		n := len(spans)
		spans = appendSpans(spans, i, p.sel, p.tail, p.buf)
		for k := n; k < len(spans); k++ {
			spans[k].seqEnd = p.seqEnd
		}
	}
	op.readAhead()
	rctx, span := op.h.tr.Start(ctx, "fetch.read", 0)
	op.h.readSpans(rctx, spans)
	if span.IsRecording() {
		var n int64
		failed := 0
		for i := range spans {
			n += int64(len(spans[i].dst))
			if spans[i].err != nil {
				failed++
			}
		}
		span.SetAttributes(attribute.Int("diskless.fetch.ranges", len(spans)), attribute.Int64("diskless.bytes", n),
			attribute.Int("diskless.fetch.ranges.failed", failed))
	}
	span.End()
	for i := range spans {
		s := &spans[i]
		if s.err == nil {
			continue
		}
		cut, good, errc := s.run, 0, kerr.KafkaStorageError
		if errors.Is(s.err, cache.ErrCorrupt) {
			// The span failed its check on both reads: serve the batches
			// before the first bad one (the second read's, checked now).
			k, n, _ := verifyRuns(s.dst, s.rs)
			cut, good, errc = s.run+k, n, kerr.CorruptMessage
		}
		if p := &op.parts[s.part]; cut < p.cut || (cut == p.cut && good < p.cutGood) {
			p.cut, p.cutGood, p.cutErr, p.readErr = cut, good, errc, s.err
		}
	}

	b := newBudget(op.maxBytes)
	var bs []runBatch
	for i := range op.parts {
		if p := &op.parts[i]; len(p.sel) > 0 {
			bs = op.serve(ctx, p, &b, bs[:0])
		}
	}
}

// serve sets p's records from its runs read into p.buf: the batches from
// the one holding the fetch offset, within the budget b (KIP-74), up to
// the first that cannot be served — the first of the run whose read
// failed (p.cut, after its p.cutGood leading batches that passed their
// check), one whose framing does not walk, or one stamp refuses (zstd
// before Fetch v10). The bad batch is reported only when the budget
// reaches it: as the partition's error when no batch comes before it,
// else in the log, the client meeting it at its next fetch. bs is scratch
// space, returned for reuse.
func (op *fetchOp) serve(ctx context.Context, p *fetchPart, b *budget, bs []runBatch) []runBatch {
	var (
		stop    *kerr.Error // why the walk stopped early, nil if it did not
		stopRun int         // the run it stopped in
		stopErr error       // the failure behind stop, for the log
	)
	pos := 0
	for k := range p.sel {
		r := &p.sel[k]
		first := len(bs)
		size, prefix := int(r.ByteSize), false
		if k == len(p.sel)-1 && p.tail < r.ByteSize {
			size, prefix = int(p.tail), true
		}
		var err error
		bs, err = walkRun(bs, p.buf[pos:pos+size], r, prefix)
		switch {
		case k == p.cut:
			// Only the batches before the bad one passed their check.
			bs = bs[:min(len(bs), first+p.cutGood)]
			stop, stopRun, stopErr = p.cutErr, k, p.readErr
		case err != nil:
			stop, stopRun, stopErr = kerr.CorruptMessage, k, err
		}
		for j := first; j < len(bs); j++ {
			bs[j].pos += pos
			bs[j].run = k
		}
		pos += size
		if stop != nil {
			break
		}
	}
	skip := 0
	for skip < len(bs) && bs[skip].last < p.offset {
		skip++
	}
	served := bs[skip:]
	for len(served) > 0 && served[len(served)-1].base >= p.end {
		// read_committed: nothing at or past the last stable offset.
		// A bad batch after it is past it too: not reported.
		served = served[:len(served)-1]
		stop = nil
	}
	n, size := b.takeBatches(served, p.maxBytes)
	allowZstd := op.req.Version >= 10
	reached := stop != nil && n == len(served) // the budget reaches the bad batch
	for j := range n {
		r := &p.sel[served[j].run]
		if errc := stampBatch(p.buf, r, served[j], op.h.cfg.LeaderEpoch, allowZstd); errc != nil {
			n, size = j, int64(served[j].pos-served[0].pos)
			stop, stopRun, stopErr, reached = errc, served[j].run, nil, true
			break
		}
	}
	if reached {
		next := p.sel[stopRun].BaseOffset
		if n > 0 {
			next = served[n-1].last + 1
		}
		r := &p.sel[stopRun]
		switch {
		case stop == kerr.UnsupportedCompressionType:
		case stopRun == p.cut && stopErr == p.readErr:
			op.h.warn(ctx, p.topic, p.out.Partition, "fetch: read failed",
				slog.Int64("offset", next), slog.String("object", r.ObjectKey),
				slog.String("code", stop.Message), slog.Any("err", stopErr))
		default:
			op.h.warn(ctx, p.topic, p.out.Partition, "fetch: corrupt batch",
				slog.Int64("offset", next), slog.String("object", r.ObjectKey),
				slog.Int64("byte_offset", r.ByteOffset), slog.Int64("size", int64(r.ByteSize)))
		}
		if n == 0 {
			p.out.ErrorCode = stop.Code
			return bs
		}
	}
	if n > 0 {
		start := served[0].pos
		p.out.RecordBatches = p.buf[start : start+int(size) : start+int(size)]
	}
	return bs
}
