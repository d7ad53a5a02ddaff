package produce

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/wal"
)

// pendingEntry is one validated batch on its way into a file: where it goes
// in the object (wal.Entry) and the header fields its commit needs, read
// once here so the pipeline never parses a header again.
type pendingEntry struct {
	wal.Entry
	commit diskless.CommitBatch
}

func newPendingEntry(id diskless.TopicID, partition int32, h batch.Header, tsType int8) pendingEntry {
	return pendingEntry{
		Entry: wal.Entry{TopicID: id, Partition: partition, Batch: h},
		commit: diskless.CommitBatch{
			TopicID:           id,
			Partition:         partition,
			Magic:             h.Magic(),
			ByteSize:          int32(len(h)),
			LastOffsetDelta:   h.LastOffsetDelta(),
			BatchMaxTimestamp: h.MaxTimestamp(),
			TimestampType:     tsType,
			ProducerID:        h.ProducerID(),
			ProducerEpoch:     h.ProducerEpoch(),
			BaseSequence:      h.BaseSequence(),
			LastSequence:      h.LastSequence(),
		},
	}
}

// file is the active file while it fills, then a sealed file moving through
// the pipeline. Entries keep arrival order across all connections; batches
// and commits are parallel slices so that the packer takes batches as they
// are.
type file struct {
	seq     uint64
	batches []wal.Entry
	commits []diskless.CommitBatch
	size    int   // record-batch bytes in batches
	memory  int64 // bytes acquired from Handler.memory for this file
	timer   *time.Timer

	// links are the span contexts of the sampled requests whose batches
	// the file carries, at most maxFileLinks (tracing only; nil when off),
	// and requests their number, all of them.
	links    []trace.Link
	requests int

	// created, sealed and sealReason time the file for the metrics.
	created, sealed time.Time
	sealReason      string

	// Set by the upload worker before it hands the file to the committer
	// (Handler.uploadedC).
	object     []byte
	key        string
	locs       []wal.Location
	uploadErr  error
	uploadDone time.Time

	// The committer's own (commitLoop): the file's keys and how many of
	// them an earlier unfinished file holds (commitOrder; 0 once
	// registered: free of earlier files), whether it is registered,
	// uploaded, and answered.
	keys                             []orderKey
	blockers                         int
	registered, uploadSeen, answered bool

	// Set by the commit worker before done is closed; read-only afterwards.
	commitStart time.Time
	results     []diskless.CommitBatchResult
	done        chan struct{}
	// prefixDone is closed by the committer once this file and every file
	// sealed before it have been answered (Drain).
	prefixDone chan struct{}
}

// maxFileLinks bounds the requests a file's spans link to: the SDK's
// default limit of links per span (sdktrace.SpanLimits, 128), past which
// it would drop them anyway.
const maxFileLinks = 128

// append adds one request's entries to the active file, creating it (and
// its age timer) if needed, and seals the file once it has reached
// BufferMaxBytes: a file sealed by size holds between BufferMaxBytes and
// BufferMaxBytes plus one request, never well below the buffer, so that
// objects (and their PUTs) are as few as the buffer allows (bench/RESULTS.md
// entry 8: 143–163 objects per GiB when files were sealed before a request
// that would cross the buffer, 128 or fewer now). The current file is
// sealed first only if the request would take it past MaxBatchesPerFile,
// or past wal.MaxObjectBytes. It returns the file and the index of the
// request's first entry in it. bytes is the sum of the entries' batch
// lengths; memory is the amount the caller acquired, released when the
// file is answered; sc is the request's span context, linked from the
// file's spans if sampled.
func (h *Handler) append(entries []pendingEntry, bytes int, memory int64, sc trace.SpanContext) (*file, int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return nil, 0, ErrClosed
	}
	if f := h.mu.active; f != nil {
		// Seal first rather than let this request take the file past a
		// hard limit: commits stay within MaxBatchesPerFile, objects within
		// what the format addresses (a request of up to 2 GiB on a buffer
		// of up to 1 GiB could cross it).
		switch {
		case len(f.batches)+len(entries) > h.cfg.MaxBatchesPerFile:
			h.sealLocked(sealCount)
		case int64(f.size)+int64(bytes) > wal.MaxObjectBytes:
			h.sealLocked(sealSize)
		}
	}
	f := h.mu.active
	if f == nil {
		h.mu.seq++
		f = &file{
			created:    time.Now(),
			seq:        h.mu.seq,
			done:       make(chan struct{}),
			prefixDone: make(chan struct{}),
		}
		seq := f.seq
		f.timer = time.AfterFunc(h.cfg.CommitInterval, func() { h.sealByAge(seq) })
		h.mu.active = f
	}
	first := len(f.batches)
	if sc.IsSampled() {
		f.requests++
		if len(f.links) < maxFileLinks {
			f.links = append(f.links, trace.Link{SpanContext: sc})
		}
	}
	for i := range entries {
		f.batches = append(f.batches, entries[i].Entry)
		f.commits = append(f.commits, entries[i].commit)
	}
	f.size += bytes
	f.memory += memory
	h.pending.Add(int64(bytes))
	if f.size >= h.cfg.BufferMaxBytes {
		h.sealLocked(sealSize)
	}
	return f, first, nil
}

// sealByAge seals the active file if it is still the one whose timer fired.
func (h *Handler) sealByAge(seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.mu.active; f != nil && f.seq == seq {
		h.sealLocked(sealAge)
	}
}

// Why a file was sealed (the reason attribute of diskless.produce.files).
const (
	sealSize  = "size"  // reached diskless.append.buffer.max.bytes
	sealAge   = "age"   // diskless.append.commit.interval.ms passed
	sealCount = "count" // reached MaxBatchesPerFile
	sealClose = "close" // the handler is closing
)

// sealLocked hands the active file to the pipeline. Sending to the commit
// queue under mu makes the committer's order of registration the seal
// order, on which commitOrder rests.
func (h *Handler) sealLocked(reason string) {
	f := h.mu.active
	if f == nil {
		return
	}
	h.mu.active = nil
	h.mu.sealed = f
	f.timer.Stop()
	f.sealed, f.sealReason = time.Now(), reason
	h.toCommit <- f
	h.toUpload <- f
}
