package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Stats counts the coordinator's background work since Open, for metrics
// (the caller exports them). Every field is updated atomically; read with
// Load.
type Stats struct {
	// RetentionMoves counts log start moves made by retention (records
	// 103 written by runRetention).
	RetentionMoves atomic.Int64
	// FilesReleased counts files whose last live batch left a shard's
	// partition indexes (retention, DeleteRecords, topic deletion); a
	// file shared by two shards counts once per shard.
	FilesReleased atomic.Int64
	// FilesForgotten counts closed files a shard dropped from its file
	// table (state.forgetClosed), their slots freed for reuse.
	FilesForgotten atomic.Int64
	// ObjectsDeleted counts objects the file lifecycle deleted.
	ObjectsDeleted atomic.Int64
	// DeleteFailures counts object deletes that failed (file lifecycle
	// and orphan scan); each is retried on the next pass.
	DeleteFailures atomic.Int64
	// OrphansFound counts objects older than the grace period that no
	// shard holds, per scan that found them.
	OrphansFound atomic.Int64
	// OrphansDeleted counts orphans deleted.
	OrphansDeleted atomic.Int64
	// OrphanScans counts orphan scans that completed.
	OrphanScans atomic.Int64
	// PurgedRuns counts runs (index entries) of deleted topics removed
	// by the purge (runPurge).
	PurgedRuns atomic.Int64
	// DisableSends counts DisklessDisableTopic requests sent to
	// sidecars, DisableSendFailures those that failed (and are sent
	// again).
	DisableSends        atomic.Int64
	DisableSendFailures atomic.Int64

	// Consolidation (runConsolidation): ConsolidationReads counts the
	// ranged reads of WAL objects and ConsolidationReadBytes their bytes;
	// SegmentsUploaded and SegmentBytesUploaded the segment objects put;
	// SegmentsCommitted those swapped in (records 114), RunsConsolidated
	// the WAL runs they replaced; SegmentsAbandoned the segments a log
	// start move made stale, deleted at once; ConsolidationFailures the
	// reads, checks, uploads and commits that failed (retried next pass).
	ConsolidationReads     atomic.Int64
	ConsolidationReadBytes atomic.Int64
	SegmentsUploaded       atomic.Int64
	SegmentBytesUploaded   atomic.Int64
	SegmentsCommitted      atomic.Int64
	RunsConsolidated       atomic.Int64
	SegmentsAbandoned      atomic.Int64
	ConsolidationFailures  atomic.Int64

	// Confirmations counts the confirmations of hosted shards' logs
	// (the read-index rule, confirm.go): one per wave of answers read
	// from state, not per answer; ConfirmationsFailed those that could
	// not tell (Kafka unreachable), answered NOT_LEADER_OR_FOLLOWER.
	Confirmations       atomic.Int64
	ConfirmationsFailed atomic.Int64
}

// Stats returns the coordinator's counters; the pointer stays valid after
// Close.
func (c *Coordinator) Stats() *Stats { return &c.stats }

// jobs serialises each background job with itself: the periodic loop and
// a direct call never overlap.
type jobs struct {
	retention sync.Mutex
	orphans   sync.Mutex
	deletion  sync.Mutex
	purge     sync.Mutex
	disable   sync.Mutex
	// consolidation also guards Coordinator.consolidation.
	consolidation sync.Mutex
	// quiet holds, per shard, when each released file was first seen
	// without live batches in any owner (ms, Config.Now); guarded by
	// deletion. In memory only: a restart starts the delay again.
	quiet []map[string]int64
	// unanswered holds, per disablement (topic id and epoch), when a
	// pass first found a shard of it that no sidecar answered for
	// (Config.Now); guarded by disable. In memory only, like quiet.
	unanswered map[unansweredKey]time.Time
}

// fileDeletionPass is how often the file lifecycle runs: twice per
// FileDeletionDelay, so an object goes at most 1.5 delays after it was
// released, but at most once a second.
func fileDeletionPass(delay time.Duration) time.Duration {
	return max(delay/2, time.Second)
}

// startBackground starts the periodic loops (retention, file deletion,
// orphan scan), owned by the Coordinator and joined by Close.
func (c *Coordinator) startBackground() {
	ctx, cancel := context.WithCancel(context.Background())
	c.bg.cancel = cancel
	c.every(ctx, c.cfg.RetentionCheckInterval, "retention check", c.runRetention)
	c.every(ctx, c.cfg.TxnAbortCheckInterval, "transaction check", c.runTxnCheck)
	c.every(ctx, c.cfg.TxnIDExpirationCheckInterval, "transactional id expiry", c.runTxnIDExpiry)
	if c.cfg.LifecycleInterval > 0 {
		c.bg.wg.Go(func() { c.lifecycleLoop(ctx) })
	}
	if c.cfg.Objects != nil {
		c.every(ctx, fileDeletionPass(c.cfg.FileDeletionDelay), "file deletion", c.runFileDeletion)
		c.every(ctx, c.cfg.OrphanScanInterval, "orphan scan", c.runOrphanScan)
	}
	if c.cfg.Segments != nil && c.cfg.ConsolidationMinAge >= 0 {
		c.every(ctx, c.cfg.ConsolidationInterval, "consolidation", c.runConsolidation)
	}
}

// every runs job every d (not at all when d ≤ 0) until ctx is done.
// Failures are logged; the next tick retries.
func (c *Coordinator) every(ctx context.Context, d time.Duration, name string, job func(context.Context) error) {
	if d <= 0 {
		return
	}
	c.bg.wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := job(ctx); err != nil && ctx.Err() == nil {
					c.logger.Warn("coordinator: "+name+" failed; retrying at the next tick", "err", err)
				}
			}
		}
	})
}

// stopBackground cancels the loops and waits for them.
func (c *Coordinator) stopBackground() {
	if c.bg.cancel != nil {
		c.bg.cancel()
	}
	c.bg.wg.Wait()
}
