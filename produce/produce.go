// Package produce handles Kafka Produce requests for diskless topics
// (DESIGN §Produce): it validates each partition's record batch without
// copying or decoding it, appends the valid batches of every connection to
// one shared active file, seals that file by size or age, and drives each
// sealed file through packing (wal), upload and commit. A request is
// answered only when its file is durable in the object store and committed
// by the coordinator shards (DESIGN invariant 1).
//
// Life of a batch:
//
//	Produce ─▶ validate ─▶ wait for memory ─▶ active file ─▶ seal
//	  ─▶ upload worker: wal.Pack, Uploader.Upload, ObjectCache.Put
//	  ─▶ committer (seal order): Committer.Commit ─▶ results ─▶ response
//
// Goroutines: UploadConcurrency upload workers and one committer, started by
// New and stopped by Close. Lock order: Handler.mu (the active file) is
// never held while waiting for memory or for the pipeline queues, except
// the hand-off of a sealed file to the queues, which is what keeps seal
// order equal to commit order.
package produce

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
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
		seq    uint64
		closed bool
	}

	metrics *metrics
	// pending is the record-batch bytes in files not yet answered (the
	// diskless.produce.pending gauge).
	pending atomic.Int64

	toUpload chan *file // sealed files, in seal order, to upload workers
	toCommit chan *file // sealed files, in seal order, to the committer

	// pipeCtx is cancelled when Close gives up waiting for the drain.
	pipeCtx    context.Context
	pipeCancel context.CancelFunc
	wg         sync.WaitGroup
}

// New starts the produce pipeline. cache may be nil.
func New(cfg Config, cat Catalog, up Uploader, cm Committer, cache ObjectCache) (*Handler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{
		cfg:       cfg,
		catalog:   cat,
		uploader:  up,
		committer: cm,
		cache:     cache,
		memory:    semaphore.NewWeighted(cfg.MaxPendingBytes),
		// The queues hold pointers only; their depth is bounded in bytes
		// by memory, so a generous length never grows the heap much.
		toUpload: make(chan *file, queueDepth),
		toCommit: make(chan *file, queueDepth),
	}
	var err error
	if h.metrics, err = newMetrics(cfg.MeterProvider, h.pending.Load); err != nil {
		return nil, err
	}
	h.pipeCtx, h.pipeCancel = context.WithCancel(context.Background())
	for range cfg.UploadConcurrency {
		h.wg.Go(h.uploadLoop)
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
func (h *Handler) Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		fillAll(req, resp, kerr.InvalidRequiredAcks)
		return answered(req, resp)
	}
	if req.TransactionID != nil {
		// Transactions are not supported on diskless topics (SPEC §2).
		fillAll(req, resp, kerr.InvalidRequest)
		return answered(req, resp)
	}
	if req.Version < 3 {
		// Produce v0–2 carry message formats v0/v1, which diskless topics
		// do not store; the version is advertised only for librdkafka's
		// sake (SPEC §6).
		fillAll(req, resp, kerr.UnsupportedForMessageFormat)
		return answered(req, resp)
	}

	now := h.cfg.Now().UnixMilli()
	var (
		entries []pendingEntry
		refs    []partitionRef
		// size is the bytes of the accepted batches; offered, of every
		// partition's records.
		size, offered int64
		// seen catches a partition named twice in one request, which no
		// client sends; both copies are refused rather than stored twice.
		seen map[diskless.TopicPartition]*kmsg.ProduceResponseTopicPartition
		// dups is set when seen caught one.
		dups bool
	)
	if len(req.Topics) > 1 || (len(req.Topics) == 1 && len(req.Topics[0].Partitions) > 1) {
		seen = make(map[diskless.TopicPartition]*kmsg.ProduceResponseTopicPartition)
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		rt, st := &req.Topics[ti], &resp.Topics[ti]
		*st = kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		topic, terr := h.resolve(req.Version, rt)
		// The topic's limits and timestamp type hold for all its partitions.
		cfg := &topic.Config
		lim := batch.Limits{
			MaxBytes:        int(cfg.MaxMessageBytes),
			AllowZstd:       req.Version >= 7,
			CheckTimestamps: !cfg.LogAppendTime,
		}
		lim.MinTimestamp, lim.MaxTimestamp = batch.WindowMs(now, cfg.TimestampBeforeMaxMs, cfg.TimestampAfterMaxMs)
		tsType := batch.TimestampCreateTime
		if cfg.LogAppendTime {
			tsType = batch.TimestampLogAppendTime
		}
		for pi := range rt.Partitions {
			rp, sp := &rt.Partitions[pi], &st.Partitions[pi]
			*sp = newPartitionResponse(rp.Partition)
			offered += int64(len(rp.Records))
			if terr != nil {
				sp.ErrorCode = terr.Code
				continue
			}
			if rp.Partition < 0 || rp.Partition >= topic.Partitions {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			if seen != nil {
				tp := diskless.TopicPartition{TopicID: topic.ID, Partition: rp.Partition}
				if first, dup := seen[tp]; dup {
					sp.ErrorCode = kerr.InvalidRequest.Code
					first.ErrorCode = kerr.InvalidRequest.Code
					dups = true
					continue
				}
				seen[tp] = sp
			}
			hdr, verr := batch.ValidateProduce(rp.Records, lim)
			if verr != nil {
				sp.ErrorCode = verr.Code
				continue
			}
			refs = append(refs, partitionRef{resp: sp, logAppendTime: cfg.LogAppendTime})
			entries = append(entries, newPendingEntry(topic.ID, rp.Partition, hdr, tsType))
			size += int64(len(hdr))
		}
	}
	if dups {
		// Drop the entries of partitions found duplicated after their
		// first copy was accepted.
		kept := 0
		for i, r := range refs {
			if r.resp.ErrorCode != 0 {
				size -= int64(len(entries[i].Batch))
				continue
			}
			refs[kept], entries[kept] = r, entries[i]
			kept++
		}
		refs, entries = refs[:kept], entries[:kept]
	}
	if len(entries) == 0 {
		return answered(req, resp)
	}
	if size < offered {
		// Some of the request's bytes were refused. The entries are views
		// into the request's frame, which the server accounts for only
		// until it answers (acks=0: at once; a client that has gone: at
		// once too), while the pipeline's memory bound counts accepted
		// bytes only: copy them, so the file does not keep the refused
		// bytes alive uncounted. One buffer serves the whole request: its
		// entries all go into one file and are freed together.
		buf := make([]byte, 0, size)
		for i := range entries {
			start := len(buf)
			buf = append(buf, entries[i].Batch...)
			entries[i].Batch = batch.Header(buf[start:len(buf):len(buf)])
		}
	}
	if len(entries) > h.cfg.MaxBatchesPerFile {
		// More partitions in one request than a file may hold: no client
		// builds such a request.
		for _, r := range refs {
			r.resp.ErrorCode = kerr.InvalidRequest.Code
		}
		return answered(req, resp)
	}

	// Wait for room in the pipeline, up to the request's timeout (a
	// request with no time left still goes in if there is room now). The
	// cap lets a single request larger than the whole budget through alone.
	need := min(size, h.cfg.MaxPendingBytes)
	if !h.memory.TryAcquire(need) {
		wctx, cancel := context.WithTimeout(ctx, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
		err := h.memory.Acquire(wctx, need)
		cancel()
		if err != nil {
			for _, r := range refs {
				r.resp.ErrorCode = kerr.RequestTimedOut.Code
			}
			return answered(req, resp)
		}
	}

	f, first, err := h.append(entries, int(size), need)
	if err != nil {
		h.memory.Release(need)
		for _, r := range refs {
			r.resp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
		return answered(req, resp)
	}
	if req.Acks == 0 {
		// No answer is sent: do not hold the connection's pipeline until
		// the file commits. The batches are stored all the same.
		return func() *kmsg.ProduceResponse { return nil }
	}
	return func() *kmsg.ProduceResponse {
		select {
		case <-f.done:
		case <-ctx.Done():
			// The connection is gone (or the server stopped hard): there
			// is no one to answer. The file still completes on its own.
			return nil
		}
		for i, r := range refs {
			res := &f.results[first+i]
			if res.Err != nil {
				r.resp.ErrorCode = res.Err.Code
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
