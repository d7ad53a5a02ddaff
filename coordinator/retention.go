package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Retention and DeleteRecords move a partition's log start offset with
// record 103, appended through the shard's driver like a commit and
// applied only once durable (a deferred request): readers never see a
// log start that a crash could take back.

// runRetention applies every topic's retention.ms and retention.bytes to
// the partitions of every shard, as Kafka's log retention does every
// log.retention.check.interval.ms (Config.RetentionCheckInterval runs it
// periodically; tests call it directly). Per partition, the log start
// moves past the longest prefix of whole index entries — segment objects,
// then WAL runs (segments.go) — that are
//
//   - older than retention.ms (unless −1): the entry's effective max
//     timestamp — the log-append time on LogAppendTime entries (a
//     segment's latest), else the producers' largest max timestamp, or
//     the log-append time when that is −1 — is below now − retention.ms,
//     as Kafka judges a segment by its largest timestamp. Time retention
//     may empty the partition: the log start then equals the high
//     watermark;
//   - or beyond retention.bytes (unless −1): the oldest entry goes while
//     the bytes left would still be ≥ retention.bytes (Kafka's rule:
//     retention.bytes is kept, at most one segment more).
//
// now is Config.Now. Only durable runs are judged. Each move is one
// record 103 (Stats.RetentionMoves); files left without live batches are
// released (Stats.FilesReleased) for the file lifecycle. Producer state
// whose batches are all gone is dropped (SPEC §3). The error joins the
// shards' failures (ErrClosed, storage errors); a failed shard is skipped
// and the others still run.
func (c *Coordinator) runRetention(ctx context.Context) error {
	c.jobs.retention.Lock()
	defer c.jobs.retention.Unlock()
	now := c.nowMs()
	cat := c.catalog.Load()
	var errs []error
	for _, s := range c.shards {
		if !c.owns(s) {
			continue // its owner's job
		}
		moves := s.retentionMoves(cat, now)
		if len(moves) == 0 {
			continue
		}
		n, err := s.moveLogStarts(ctx, moves)
		if err != nil {
			errs = append(errs, fmt.Errorf("coordinator: retention on shard %d: %w", s.id, err))
			if errors.Is(err, diskless.ErrClosed) || ctx.Err() != nil {
				break
			}
			continue
		}
		c.stats.RetentionMoves.Add(int64(n))
	}
	return errors.Join(errs...)
}

// logStartMove is one log start move decided by retention.
type logStartMove struct {
	tp    diskless.TopicPartition
	start int64
}

// retentionMoves returns the moves retention makes on s's partitions at
// nowMs, in partition order. It reads the state under the read lock.
func (s *shard) retentionMoves(cat *catalog, nowMs int64) []logStartMove {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil {
		return nil
	}
	st := s.mu.st
	var out []logStartMove
	for tp, p := range st.partitions {
		t := cat.byID[tp.TopicID]
		if t == nil || !p.visible || tp.Partition >= t.Partitions {
			continue // not (or no longer) a topic of the catalog
		}
		if start, ok := st.retentionStart(p, t.Config.RetentionMs, t.Config.RetentionBytes, nowMs); ok {
			out = append(out, logStartMove{tp, start})
		}
	}
	slices.SortFunc(out, func(a, b logStartMove) int { return diskless.ComparePartitions(a.tp, b.tp) })
	return out
}

// moveLogStarts appends and applies one record 103 per move that still
// moves a log start forward, and returns how many did.
func (s *shard) moveLogStarts(ctx context.Context, moves []logStartMove) (int, error) {
	var n int
	resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		recs := make([]records.Record, 0, len(moves))
		for _, m := range moves {
			p := st.partitions[m.tp]
			if p == nil || m.start <= p.logStart || m.start > p.hwm {
				continue // moved further meanwhile, or deleted
			}
			recs = append(recs, &records.RecordsDeleted{TopicID: m.tp.TopicID, Partition: m.tp.Partition, NewLogStartOffset: m.start})
		}
		n = len(recs)
		return recs, nil
	}})
	if resp.err != nil {
		return 0, resp.err
	}
	return n, nil
}

// retentionStart returns the log start offset retention moves p to at
// nowMs (see runRetention), judging the published batches only, and
// whether that moves it forward.
func (s *state) retentionStart(p *partition, retentionMs, retentionBytes, nowMs int64) (int64, bool) {
	x := &p.runs
	nr := p.visibleLen()
	ns := len(p.segs)
	n := ns + nr
	if n == 0 || (retentionMs < 0 && retentionBytes < 0) {
		return 0, false
	}
	ts := func(j int) int64 {
		if j < ns {
			return p.segs[j].retentionTs()
		}
		return s.retentionTimestamp(x.at(j - ns))
	}
	k := 0 // the first k entries (segments, then runs) go
	if retentionMs >= 0 {
		cutoff := nowMs - retentionMs
		for k < n && ts(k) < cutoff {
			k++
		}
	}
	if retentionBytes >= 0 {
		size := p.bytes
		for i := nr; i < x.len(); i++ {
			size -= int64(x.at(i).byteSize) // not yet durable
		}
		for i := range k {
			size -= int64(p.entryBytes(i))
		}
		for k < n && size-int64(p.entryBytes(k)) >= retentionBytes {
			size -= int64(p.entryBytes(k))
			k++
		}
	}
	if k == 0 {
		return 0, false
	}
	start := p.visHWM
	if k < n {
		start = s.entryCoordinate(p, k).BaseOffset
	}
	return start, start > p.logStart
}

// retentionTimestamp is the time retention.ms judges a batch by: its
// effective max timestamp (RunCoordinate.MaxTimestamp), or its
// log-append time when the producer sent none (−1), as Kafka falls back
// to a segment's modification time.
func (s *state) retentionTimestamp(e *runEntry) int64 {
	if e.tsType == batch.TimestampLogAppendTime || e.maxTimestamp < 0 {
		return s.files[e.file].appendTime
	}
	return e.maxTimestamp
}

// DeleteRecords moves a partition's log start offset up to offset (Kafka
// DeleteRecords, SPEC §5) and returns the log start offset after the call
// (the low watermark). offset −1 means the high watermark. An offset at or
// below the current log start changes nothing and returns the current log
// start. The log start may fall inside a batch: FindBatches then still
// returns that batch, and ListOffsets and FindBatches report the new log
// start. The move is durable (record 103) before DeleteRecords returns or
// any reader sees it; files left without live batches are released, and
// producer state whose batches are all gone is dropped (SPEC §3).
//
// Errors: kerr.UnknownTopicOrPartition; kerr.OffsetOutOfRange for an
// offset < −1 or above the high watermark; ErrClosed, ctx's error before
// the shard took the request, ErrShardFailed (with kerr.KafkaStorageError)
// or the log write's error. The low watermark is −1 with an error.
func (c *Coordinator) DeleteRecords(ctx context.Context, tp diskless.TopicPartition, offset int64) (int64, error) {
	t := c.catalog.Load().byID[tp.TopicID]
	if t == nil || tp.Partition < 0 || tp.Partition >= t.Partitions {
		return -1, kerr.UnknownTopicOrPartition
	}
	low := int64(-1)
	resp := c.shards[c.ShardFor(tp.TopicID, tp.Partition)].do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		p := st.partitions[tp]
		if p == nil || !p.visible {
			return nil, kerr.UnknownTopicOrPartition
		}
		target := offset
		if offset == -1 {
			target = p.hwm
		}
		if target < 0 || target > p.hwm {
			return nil, kerr.OffsetOutOfRange
		}
		if target <= p.logStart {
			low = p.logStart
			return nil, nil
		}
		low = target
		return []records.Record{&records.RecordsDeleted{TopicID: tp.TopicID, Partition: tp.Partition, NewLogStartOffset: target}}, nil
	}})
	if resp.err != nil {
		return -1, resp.err
	}
	return low, nil
}
