// Package produce handles Kafka Produce requests for diskless topics
// (DESIGN §Produce): it validates each partition's record batch as a
// broker does, every record read but nothing copied, appends the valid batches of every connection to
// one shared active file, seals that file by size or age, and drives each
// sealed file through packing (wal), upload and commit. A request is
// answered only when its file is durable in the object store and committed
// by the coordinator shards (DESIGN invariant 1).
//
// Life of a batch:
//
//	Produce: validate ─▶ admit (wait for memory) ─▶ append (active file) ─▶ seal
//	  ─▶ upload worker: wal.Pack, Uploader.Upload, ObjectCache.Put
//	  ─▶ committer (seal order per producer and partition, commitOrder)
//	  ─▶ commit worker: Committer.Commit ─▶ results ─▶ response
//
// Goroutines: UploadConcurrency upload workers, one committer and
// commitWorkers commit workers, started by New and stopped by Close. Lock
// order: Handler.mu (the active file) is never held while waiting for
// memory or for the pipeline queues, except the hand-off of a sealed file
// to the queues, which is what makes the committer's order of
// registration the seal order.
package produce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/ratelog"
	"github.com/diskless-sidecar/sidecar/internal/tracing"
)

// Catalog resolves the topics a Produce request names.
type Catalog interface {
	Topic(name string) (diskless.Topic, bool)
	TopicByID(id diskless.TopicID) (diskless.Topic, bool)
}

// Uploader stores one packed WAL object under a fresh key and returns the
// key; it retries internally and returns an error only when it gave up.
type Uploader interface {
	Upload(ctx context.Context, data []byte) (key string, err error)
}

// Committer commits an uploaded object's batches to the coordinator shards
// that own them and returns one result per batch, in order.
type Committer interface {
	Commit(ctx context.Context, objectKey string, size int64, batches []diskless.CommitBatch) []diskless.CommitBatchResult
}

// ObjectCache receives every object this sidecar uploaded, so that fetches
// of fresh data need no GET (DESIGN §Fetch step 3). It may keep data.
type ObjectCache interface {
	Put(key string, data []byte)
}

// queueDepth is the number of sealed files each pipeline queue holds; a
// seal waits when it is full. A variable so tests can make it small.
var queueDepth = 1024

// commitWorkers is the number of files committed at once: files that no
// earlier unfinished file constrains (commitOrder) may commit side by
// side, and a shard's driver takes their CommitFiles in one group commit
// (one fsync).
const commitWorkers = 4

// ErrClosed is returned by Close when called twice.
var ErrClosed = errors.New("produce: handler closed")

// Handler is the Produce request handler. It is safe for concurrent use.
type Handler struct {
	cfg       Config
	catalog   Catalog
	uploader  Uploader
	committer Committer
	cache     ObjectCache // may be nil

	// memory bounds the record-batch bytes in the pipeline
	// (Config.MaxPendingBytes); acquired before append, released when
	// the file is answered.
	memory *semaphore.Weighted

	// closing is set by the first Close.
	closing atomic.Bool
	// mu guards the active file and the closed flag.
	mu struct {
		sync.Mutex
		active *file
		// sealed is the file sealed last (Drain).
		sealed *file
		seq    uint64
		closed bool
	}

	metrics *metrics
	// tr starts the produce path's spans when tracing is on.
	tr tracing.Tracer
	// logs rate-limits the lines producers can cause again and again.
	logs *ratelog.Limiter
	// pending is the record-batch bytes in files not yet answered (the
	// diskless.produce.pending gauge).
	pending atomic.Int64
	// txnMu guards gates: per producer id, its transactional batches in
	// flight (txn.go).
	txnMu struct {
		sync.Mutex
		gates map[int64]*txnGate
	}

	toUpload  chan *file // sealed files, in seal order, to upload workers
	toCommit  chan *file // sealed files, in seal order, to the committer
	uploadedC chan *file // uploaded (or failed) files, from upload workers to the committer
	runC      chan *file // files that may commit, from the committer to commit workers
	finishedC chan *file // answered files, from commit workers to the committer

	// pipeCtx is cancelled when Close gives up waiting for the drain.
	pipeCtx    context.Context
	pipeCancel context.CancelFunc
	wg         sync.WaitGroup
}

// New starts the produce pipeline. cache may be nil.
func New(cfg Config, cat Catalog, up Uploader, cm Committer, cache ObjectCache) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	h := &Handler{
		cfg:       cfg,
		catalog:   cat,
		uploader:  up,
		committer: cm,
		cache:     cache,
		memory:    semaphore.NewWeighted(cfg.MaxPendingBytes),
		logs:      ratelog.New(cfg.Logger, ratelog.Config{}),
		tr:        tracing.New(cfg.TracerProvider),
		// The queues hold pointers only; their depth is bounded in bytes
		// by memory, so a generous length never grows the heap much.
		toUpload:  make(chan *file, queueDepth),
		toCommit:  make(chan *file, queueDepth),
		uploadedC: make(chan *file, queueDepth),
		runC:      make(chan *file),
		finishedC: make(chan *file, commitWorkers),
	}
	var err error
	if h.metrics, err = newMetrics(cfg.MeterProvider, h.pending.Load); err != nil {
		return nil, err
	}
	h.pipeCtx, h.pipeCancel = context.WithCancel(context.Background())
	for range cfg.UploadConcurrency {
		h.wg.Go(h.uploadLoop)
	}
	for range commitWorkers {
		h.wg.Go(h.commitWorker)
	}
	h.wg.Go(h.commitLoop)
	return h, nil
}

// partitionRef ties one partition entry of a response to the file entry
// whose result fills it: refs[i] is answered by the request's i-th entry.
type partitionRef struct {
	resp *kmsg.ProduceResponseTopicPartition
	// logAppendTime is true when the topic uses LogAppendTime, so the
	// response carries the append time instead of −1.
	logAppendTime bool
}

// produceVersions: Produce 0–13 (SPEC §6). From 0 for librdkafka's sake,
// which asks for a range starting there, although Produce refuses v0–2
// (message formats v0/v1, no record batch v2) with
// UNSUPPORTED_FOR_MESSAGE_FORMAT; v13 names topics by id (KIP-516).
var produceVersions = kmsg.ApiVersionsResponseApiKey{ApiKey: 0, MinVersion: 0, MaxVersion: 13}

// APIVersions returns the versions of Produce the Handler serves
// (produceVersions); the server advertises them in ApiVersions
// (server.Producer).
func (h *Handler) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{produceVersions}
}

// Produce validates req, appends its valid batches to the active file and
// returns a function that blocks until every partition has its answer
// (SPEC §2), or returns nil early once ctx (the connection's) is done. It
// must be called in request order per connection; it blocks only while
// waiting for memory (up to the request's timeout). For acks=0 the returned
// function returns nil at once: no response is sent, but the batches are
// stored all the same. A partition named twice in one request gets
// INVALID_REQUEST for both copies.
//
// It runs in four steps: validate (the request, then each partition:
// duplicates, topic, partition, batch), admit (the accepted batches fit
// one file, and their bytes the pipeline's memory), append (to the active
// file) and await (the file's commit, in the returned function). A step
// that refuses the request answers every partition still unanswered and
// stops.
func (h *Handler) Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	_, span := h.tr.Start(ctx, "produce.validate", 0)
	if errc := refuseRequest(req, h.cfg.Transactions != nil); errc != nil {
		fillAll(req, resp, errc)
		endStep(span, errc)
		return answered(req, resp)
	}
	a := h.validate(ctx, req, resp)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("diskless.batches", len(a.entries)), attribute.Int64("diskless.bytes", a.size),
			attribute.Int64("diskless.bytes.refused", a.offered-a.size))
	}
	span.End()
	if len(a.entries) == 0 {
		return answered(req, resp)
	}
	_, span = h.tr.Start(ctx, "produce.wait_memory", 0)
	need, errc := h.admit(ctx, req.TimeoutMillis, &a)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int64("diskless.bytes", need))
	}
	endStep(span, errc)
	if errc != nil {
		a.fail(errc)
		h.txnDone(a.entries)
		return answered(req, resp)
	}
	// The request's span, if sampled, is linked from its file's spans.
	var sc trace.SpanContext
	if h.tr.On() {
		sc = trace.SpanContextFromContext(ctx)
	}
	_, span = h.tr.Start(ctx, "produce.buffer", 0)
	f, first, errc := h.appendAccepted(&a, need, sc)
	if span.IsRecording() && f != nil {
		span.SetAttributes(attribute.Int64("diskless.file.seq", int64(f.seq)))
	}
	endStep(span, errc)
	if errc != nil {
		a.fail(errc)
		h.txnDone(a.entries)
		return answered(req, resp)
	}
	if req.Acks == 0 {
		// No answer is sent: do not hold the connection's pipeline until
		// the file commits. The batches are stored all the same.
		return func() *kmsg.ProduceResponse { return nil }
	}
	return await(ctx, req.Version, deadline(req.TimeoutMillis), resp, f, first, a.refs)
}

// deadline is when a Produce request of timeoutMillis that arrives now
// must be answered by (await); the zero time for a timeout ≤ 0: no bound
// (a broker completes such a request at once when its replicas are in
// sync, as a sidecar's commit would be).
func deadline(timeoutMillis int32) time.Time {
	if timeoutMillis <= 0 {
		return time.Time{}
	}
	return time.Now().Add(time.Duration(timeoutMillis) * time.Millisecond)
}

// endStep ends the span of one step of Produce, failed with errc's name
// if the step refused the request.
func endStep(span trace.Span, errc *kerr.Error) {
	if errc != nil && span.IsRecording() {
		span.SetStatus(otelcodes.Error, errc.Message)
	}
	span.End()
}

// refuseRequest returns the error every partition of req gets when the
// request as a whole cannot be served, or nil; txns says whether a
// transaction coordinator serves.
func refuseRequest(req *kmsg.ProduceRequest, txns bool) *kerr.Error {
	switch {
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return kerr.InvalidRequiredAcks
	case req.TransactionID != nil && !txns:
		// Without a transaction coordinator transactions are not
		// supported (SPEC §2).
		return kerr.InvalidRequest
	case req.Version < 3:
		// Produce v0–2 carry message formats v0/v1, which diskless topics
		// do not store; the version is advertised only for librdkafka's
		// sake (produceVersions).
		return kerr.UnsupportedForMessageFormat
	}
	return nil
}

// accepted is what validate keeps of a request: its valid batches, in
// request order, and the response entries their results fill.
type accepted struct {
	entries []pendingEntry
	refs    []partitionRef // refs[i] is answered by entries[i]
	// size is the bytes of the accepted batches; offered, of every
	// partition's records.
	size, offered int64
}

// fail answers every accepted partition with errc: nothing of the request
// is stored.
func (a *accepted) fail(errc *kerr.Error) {
	for _, r := range a.refs {
		r.resp.ErrorCode = errc.Code
	}
}

// validate builds resp's topics and partitions in request order, answers
// every partition it refuses and returns the others' batches. Per
// partition, the first of these that applies: UNKNOWN_TOPIC_ID (v13+) or
// UNKNOWN_TOPIC_OR_PARTITION for an unknown topic, UNKNOWN_TOPIC_OR_PARTITION
// for a partition the topic does not have, INVALID_REQUEST for a partition
// named more than once (markDuplicates), then batch.ValidateProduce's
// error against the topic's limits (which reads every record, and may
// rewrite a batch's max timestamp in the request's bytes); batches are not
// copied. A transactional batch then gets
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED in a request without a
// transactional id, as Kafka answers (SPEC §15), or else its check's
// error: the request's transactional batches are checked together, once
// all are validated (txnCheck: one call to the transaction coordinator,
// one RPC when its shard is on another sidecar, rather than one per
// partition).
func (h *Handler) validate(ctx context.Context, req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) accepted {
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	n := 0
	for ti := range req.Topics {
		rt, st := &req.Topics[ti], &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for pi := range rt.Partitions {
			st.Partitions[pi] = newPartitionResponse(rt.Partitions[pi].Partition)
		}
		n += len(rt.Partitions)
	}
	markDuplicates(req, resp, n)

	now := h.cfg.Now().UnixMilli()
	var (
		a    accepted
		txns []int // the transactional batches in a.entries, checked at the end
	)
	for ti := range req.Topics {
		rt, st := &req.Topics[ti], &resp.Topics[ti]
		topic, terr := h.resolve(req.Version, rt)
		var tmsg *string
		if terr == nil {
			// A topic being disabled, or disabled, takes no produce
			// (SPEC §10): every partition gets the state's error.
			if derr, msg := topic.ProduceError(); derr != nil {
				terr, tmsg = derr, &msg
			}
		}
		// The topic's limits and timestamp type hold for all its partitions.
		cfg := &topic.Config
		lim := batch.Limits{
			MaxBytes:           int(cfg.MaxMessageBytes),
			AllowZstd:          req.Version >= 7,
			CheckTimestamps:    !cfg.LogAppendTime,
			AllowTransactional: h.cfg.Transactions != nil,
		}
		lim.MinTimestamp, lim.MaxTimestamp = batch.WindowMs(now, cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs)
		tsType := batch.TimestampCreateTime
		if cfg.LogAppendTime {
			tsType = batch.TimestampLogAppendTime
		}
		for pi := range rt.Partitions {
			rp, sp := &rt.Partitions[pi], &st.Partitions[pi]
			a.offered += int64(len(rp.Records))
			switch {
			case terr != nil:
				sp.ErrorCode = terr.Code
				sp.ErrorMessage = tmsg // v8+
				continue
			case rp.Partition < 0 || rp.Partition >= topic.Partitions:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case sp.ErrorCode != 0:
				continue // named more than once: INVALID_REQUEST
			}
			hdr, verr := batch.ValidateProduce(rp.Records, lim)
			if verr != nil {
				sp.ErrorCode = verr.Code
				continue
			}
			e := newPendingEntry(topic.ID, rp.Partition, hdr, tsType)
			if hdr.Attributes()&batch.AttrTransactional != 0 {
				if req.TransactionID == nil {
					sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
					continue
				}
				h.txnBegin(e.commit.ProducerID)
				txns = append(txns, len(a.entries))
			}
			a.refs = append(a.refs, partitionRef{resp: sp, logAppendTime: cfg.LogAppendTime})
			a.entries = append(a.entries, e)
			a.size += int64(len(hdr))
		}
	}
	if len(txns) > 0 {
		h.txnCheck(ctx, *req.TransactionID, req.Version, &a, txns)
	}
	return a
}

// duplicateScanMax is the largest request, in partitions, whose duplicates
// markDuplicates finds by comparing every pair (allocating nothing, 120
// comparisons at most); larger ones go through a map.
const duplicateScanMax = 16

// markDuplicates sets INVALID_REQUEST on every copy of a partition that
// req names more than once (by topic name, or topic id from v13, and
// partition), before anything else is looked at: no client sends such a
// request, and storing both copies, or choosing one, would be wrong. resp
// holds req's n partitions with no error yet. validate answers an unknown
// topic or partition with its own error instead.
func markDuplicates(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, n int) {
	if n < 2 {
		return
	}
	sameTopic := func(i, j int) bool {
		if req.Version >= 13 {
			return req.Topics[i].TopicID == req.Topics[j].TopicID
		}
		return req.Topics[i].Topic == req.Topics[j].Topic
	}
	if n <= duplicateScanMax {
		for ti := range req.Topics {
			for pi := range req.Topics[ti].Partitions {
				p := req.Topics[ti].Partitions[pi].Partition
				for tj := 0; tj <= ti; tj++ {
					if !sameTopic(ti, tj) {
						continue
					}
					end := len(req.Topics[tj].Partitions)
					if tj == ti {
						end = pi
					}
					for pj := range end {
						if req.Topics[tj].Partitions[pj].Partition == p {
							resp.Topics[ti].Partitions[pi].ErrorCode = kerr.InvalidRequest.Code
							resp.Topics[tj].Partitions[pj].ErrorCode = kerr.InvalidRequest.Code
						}
					}
				}
			}
		}
		return
	}
	type key struct {
		name      string
		id        [16]byte
		partition int32
	}
	first := make(map[key]*kmsg.ProduceResponseTopicPartition, n)
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		k := key{id: rt.TopicID}
		if req.Version < 13 {
			k = key{name: rt.Topic}
		}
		for pi := range rt.Partitions {
			k.partition = rt.Partitions[pi].Partition
			sp := &resp.Topics[ti].Partitions[pi]
			if f, dup := first[k]; dup {
				f.ErrorCode = kerr.InvalidRequest.Code
				sp.ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			first[k] = sp
		}
	}
}

// admit checks that the accepted batches fit in one file and waits for
// room for their bytes in the pipeline (Config.MaxPendingBytes), up to the
// request's timeoutMillis (a request with no time left still goes in if
// there is room now). It returns the memory taken — capped at the whole
// budget, so that a single request larger than it goes through alone — or
// the error to answer the accepted partitions with: INVALID_REQUEST (more
// partitions in one request than a file may hold; no client builds such a
// request), REQUEST_TIMED_OUT.
func (h *Handler) admit(ctx context.Context, timeoutMillis int32, a *accepted) (int64, *kerr.Error) {
	if len(a.entries) > h.cfg.MaxBatchesPerFile {
		return 0, kerr.InvalidRequest
	}
	need := min(a.size, h.cfg.MaxPendingBytes)
	if !h.memory.TryAcquire(need) {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMillis, 0))*time.Millisecond)
		err := h.memory.Acquire(wctx, need)
		cancel()
		if err != nil {
			return 0, kerr.RequestTimedOut
		}
	}
	return need, nil
}

// appendAccepted appends the accepted batches to the active file (append)
// and returns the file and the index of their first entry in it, or
// NOT_LEADER_OR_FOLLOWER once the handler is closed (the memory taken,
// need, is then given back).
//
// If the request had refused bytes, the batches are copied first: they are
// views into the request's frame, which the server accounts for only until
// it answers (acks=0: at once; a client that has gone: at once too), while
// the pipeline's memory bound counts accepted bytes only, so the file must
// not keep the refused bytes alive uncounted. One buffer serves the whole
// request: its entries all go into one file and are freed together.
func (h *Handler) appendAccepted(a *accepted, need int64, sc trace.SpanContext) (*file, int, *kerr.Error) {
	if a.size < a.offered {
		buf := make([]byte, 0, a.size)
		for i := range a.entries {
			start := len(buf)
			buf = append(buf, a.entries[i].Batch...)
			a.entries[i].Batch = batch.Header(buf[start:len(buf):len(buf)])
		}
	}
	f, first, err := h.append(a.entries, int(a.size), need, sc)
	if err != nil {
		h.memory.Release(need)
		return nil, 0, kerr.NotLeaderForPartition
	}
	return f, first, nil
}

// await returns the wait function of a request whose accepted batches are
// entries first… of f: it blocks until f is committed, or ctx is done (the
// connection is gone, or the server stopped hard: there is no one to
// answer, so it returns nil; the file still completes on its own), then
// fills each accepted partition of resp from its batch's result. A
// transactional batch the partition's shard refused as its transaction's
// marker came first (INVALID_TXN_STATE) gets TRANSACTION_ABORTABLE from
// Produce v11 (version), as the check's refusal (txnStateError).
//
// A file not committed by the request's deadline (zero: none) answers
// every accepted partition REQUEST_TIMED_OUT then, as Kafka's leader
// answers a produce whose replication did not complete within its
// timeout: the client does not know whether the batches were stored and
// retries them (an idempotent producer with the same sequence numbers,
// which the partition's shard answers as duplicates if the file was
// committed after all). The file goes on on its own. So a sidecar whose
// commit cannot complete — cut off from Kafka, its shard rebuilding from
// a log it cannot read — answers by the timeout instead of holding the
// request (DESIGN §Produce).
func await(ctx context.Context, version int16, deadline time.Time, resp *kmsg.ProduceResponse, f *file, first int, refs []partitionRef) func() *kmsg.ProduceResponse {
	return func() *kmsg.ProduceResponse {
		var expired <-chan time.Time
		if !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil
		case <-expired:
			for _, r := range refs {
				r.resp.ErrorCode = kerr.RequestTimedOut.Code
			}
			return resp
		}
		for i, r := range refs {
			res := &f.results[first+i]
			if res.Err != nil {
				r.resp.ErrorCode = txnStateError(res.Err, version).Code
				continue
			}
			r.resp.BaseOffset = res.BaseOffset
			r.resp.LogStartOffset = res.LogStartOffset
			if r.logAppendTime {
				r.resp.LogAppendTime = res.LogAppendTime
			}
		}
		return resp
	}
}

// resolve finds the topic a request topic names: by name before v13, by id
// from v13 (KIP-516).
func (h *Handler) resolve(version int16, rt *kmsg.ProduceRequestTopic) (diskless.Topic, *kerr.Error) {
	if version >= 13 {
		t, ok := h.catalog.TopicByID(rt.TopicID)
		if !ok {
			return t, kerr.UnknownTopicID
		}
		return t, nil
	}
	t, ok := h.catalog.Topic(rt.Topic)
	if !ok {
		return t, kerr.UnknownTopicOrPartition
	}
	return t, nil
}

func newPartitionResponse(partition int32) kmsg.ProduceResponseTopicPartition {
	p := kmsg.NewProduceResponseTopicPartition()
	p.Partition = partition
	p.BaseOffset = -1
	p.LogAppendTime = -1
	p.LogStartOffset = -1
	return p
}

// fillAll answers every partition of req with err.
func fillAll(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, err *kerr.Error) {
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := newPartitionResponse(rp.Partition)
			sp.ErrorCode = err.Code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
}

// answered returns a wait function for a response that is already complete.
func answered(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse) func() *kmsg.ProduceResponse {
	if req.Acks == 0 {
		return func() *kmsg.ProduceResponse { return nil }
	}
	return func() *kmsg.ProduceResponse { return resp }
}
