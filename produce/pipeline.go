package produce

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/wal"
)

// uploadLoop packs and uploads sealed files until toUpload is closed, and
// hands each to the committer. Files may finish out of order; the
// committer decides when each may commit (commitOrder).
func (h *Handler) uploadLoop() {
	var packer wal.Packer
	for f := range h.toUpload {
		f.locs = make([]wal.Location, len(f.batches))
		f.object = packer.Pack(make([]byte, 0, f.size), f.batches, f.locs)
		ctx, span := h.fileSpan(h.pipeCtx, f, "produce.file.upload")
		f.key, f.uploadErr = h.uploader.Upload(ctx, f.object)
		endFileSpan(span, f, f.uploadErr)
		f.uploadDone = time.Now()
		if f.uploadErr == nil && h.cache != nil {
			h.cache.Put(f.key, f.object)
		}
		h.uploadedC <- f
	}
}

// commitLoop is the committer: it registers sealed files in seal order
// (toCommit), learns of their uploads (uploadedC) and of their commits
// (finishedC), and hands each file to a commit worker (runC) once it is
// uploaded and no earlier unfinished file holds one of its keys
// (commitOrder: per producer and partition, files are decided in seal
// order, DESIGN §Produce step 6). It closes each file's prefixDone once
// it and every file sealed before it have been answered (Drain). It
// returns once toCommit is closed and every file has been answered,
// closing runC.
func (h *Handler) commitLoop() {
	order := newCommitOrder()
	// Both lists drop their heads by moving the rest down (few files are
	// in flight), so that their arrays serve every file without growing.
	var (
		runnable []*file // may commit, in seal order
		// unanswered holds the registered files in seal order from the
		// oldest not answered on: empty once every file is answered.
		unanswered []*file
		toCommit   = h.toCommit
	)
	// ready queues f, in seal order, once it is registered, uploaded and
	// free of earlier files (blockers 0): each of the three events calls
	// it, and the last of them queues f.
	ready := func(f *file) {
		if !f.registered || !f.uploadSeen || f.blockers > 0 {
			return
		}
		i, _ := slices.BinarySearchFunc(runnable, f, bySeq)
		runnable = slices.Insert(runnable, i, f)
	}
	for toCommit != nil || len(unanswered) > 0 {
		var run chan<- *file
		var next *file
		if len(runnable) > 0 {
			run, next = h.runC, runnable[0]
		}
		select {
		case f, ok := <-toCommit:
			if !ok {
				toCommit = nil
				continue
			}
			f.registered = true
			unanswered = append(unanswered, f)
			order.add(f)
			ready(f)
		case f := <-h.uploadedC:
			// An upload may end before its file's registration reaches
			// this loop: both queues are sent to at the seal.
			f.uploadSeen = true
			ready(f)
		case run <- next:
			runnable = slices.Delete(runnable, 0, 1)
			if unanswered[0] != next {
				h.metrics.early.Add(context.Background(), 1)
			}
		case f := <-h.finishedC:
			f.answered = true
			for _, g := range order.finish(f) {
				ready(g)
			}
			k := 0
			for k < len(unanswered) && unanswered[k].answered {
				close(unanswered[k].prefixDone)
				k++
			}
			unanswered = slices.Delete(unanswered, 0, k)
		}
	}
	close(h.runC)
}

// commitWorker commits the files the committer hands it and answers
// their requests, until runC is closed.
func (h *Handler) commitWorker() {
	for f := range h.runC {
		f.commitStart = time.Now()
		h.commit(f)
		if h.cfg.Transactions != nil {
			// Decided: the batches are no longer in flight (txn.go).
			h.txnDoneCommits(f.commits)
		}
		h.metrics.file(f, time.Now())
		h.pending.Add(-int64(f.size))
		// Drop the references to request buffers and the object before
		// the waiters read the results; the memory is free again.
		f.object, f.batches, f.commits, f.locs = nil, nil, nil, nil
		h.memory.Release(f.memory)
		close(f.done)
		h.finishedC <- f
	}
}

// commit fills f.results: the coordinators' answers, or KAFKA_STORAGE_ERROR
// (retriable) for every batch when the upload failed (SPEC §2).
func (h *Handler) commit(f *file) {
	if f.uploadErr != nil {
		// Producers keep sending while the store is down: one line, then
		// a count a minute (DESIGN §Logging).
		h.logs.Log(context.Background(), slog.LevelError, "object store",
			"upload failed; failing the file's batches with KAFKA_STORAGE_ERROR",
			slog.Uint64("file", f.seq), slog.Int("bytes", f.size), slog.Int("batches", len(f.batches)),
			slog.Any("err", f.uploadErr))
		f.results = failed(len(f.batches), kerr.KafkaStorageError)
		return
	}
	for i := range f.commits {
		f.commits[i].ByteOffset = f.locs[i].ByteOffset
	}
	ctx, span := h.fileSpan(h.pipeCtx, f, "produce.file.commit")
	f.results = h.committer.Commit(ctx, f.key, int64(len(f.object)), f.commits)
	endFileSpan(span, f, nil)
	if len(f.results) != len(f.commits) {
		panic("produce: committer returned a result count different from the batch count")
	}
}

func failed(n int, err *kerr.Error) []diskless.CommitBatchResult {
	rs := make([]diskless.CommitBatchResult, n)
	for i := range rs {
		rs[i].Err = err
	}
	return rs
}

// Drain waits until every batch accepted before the call has its answer:
// the active file and every sealed file have been committed (or failed)
// and answered. Files may be answered out of seal order, so it waits for
// the newest file's prefixDone (it and every file before it answered). It
// seals nothing: the active file seals by size or age as
// usual. A sidecar confirms a topic's disablement (SPEC §10) after it,
// so that the batches it took before it began refusing the topic are
// decided and answered first. Errors: ctx's, when it ends first.
func (h *Handler) Drain(ctx context.Context) error {
	h.mu.Lock()
	f := h.mu.active
	if f == nil {
		f = h.mu.sealed
	}
	h.mu.Unlock()
	if f == nil {
		return nil
	}
	select {
	case <-f.prefixDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close seals the active file, lets every sealed file finish (upload,
// commit, answer) and stops the pipeline goroutines. Requests that arrive
// after Close get NOT_LEADER_OR_FOLLOWER, which clients retry. If ctx ends
// first, uploads and commits in flight are cancelled, their requests are
// answered with KAFKA_STORAGE_ERROR, and Close returns ctx's error after
// the goroutines are gone.
func (h *Handler) Close(ctx context.Context) error {
	if h.closing.Swap(true) {
		return ErrClosed // and leaves the first call's drain alone
	}
	// Past the deadline, cancel uploads and commits even if this call is
	// still waiting for mu (a seal blocked on a full queue holds it): the
	// cancelled pipeline drains the queues and the seal goes through.
	defer context.AfterFunc(ctx, h.pipeCancel)()
	h.mu.Lock()
	h.mu.closed = true
	h.sealLocked(sealClose)
	close(h.toUpload)
	close(h.toCommit)
	h.mu.Unlock()

	h.wg.Wait()
	h.pipeCancel()
	h.logs.Close()
	// Non-nil whenever ctx ended before the drain did, so a cancelled
	// file is never reported as a clean close.
	return ctx.Err()
}
