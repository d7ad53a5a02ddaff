package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// File lifecycle (DESIGN §Coordinators, invariant 5). A shard releases a
// file when its last live batch in it leaves a partition index
// (retention, DeleteRecords, topic deletion). Among the owners that
// committed the file, the lowest one deletes the object; the others close
// their reference by handing the deletion over to it. The deleting shard
// waits until
//
//  1. OrphanScanGracePeriod has passed since its commit of the file, so
//     that no other owner's commit of the same object can still be in
//     flight (the bound the orphan scan relies on too), and which owners
//     know the file no longer changes — unless the shard is the file's
//     only owner (OwnerIds fixes them at the first commit): then no other
//     commit of it can come, and a repeat of its own is answered from the
//     file table (replayCommit), which keeps the file after its deletion;
//  2. no owner reports live batches in it (DescribeFiles), and
//  3. FileDeletionDelay has passed since it first saw that, so that a
//     fetch that planned its reads before the batches went still finds
//     the object (Kafka's file.delete.delay.ms);
//
// then deletes the object and records record 106 once the delete
// succeeded. A restart forgets only the delay's start (it starts again);
// a file with record 106 is never deleted again by its shard, and a delete
// whose record 106 did not become durable is repeated (deleting a missing
// object is fine).

// deleteConcurrency bounds the object deletes one pass runs at once.
const deleteConcurrency = 16

// ObjectDeleter is what the coordinator needs of the object store: delete
// released and orphaned objects, and list the WAL prefix for the orphan
// scan. objstore.Store satisfies it; so does any wrapper (metrics,
// retries).
type ObjectDeleter interface {
	// Delete removes the object; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix,
	// stopping at fn's first error, which it returns. fn may call Delete.
	List(ctx context.Context, prefix string, fn func(objstore.ObjectInfo) error) error
}

// FileDescriber answers DescribeFiles (SPEC §9, API key 100, KIP-1164)
// for one shard: what it knows of each object key. The Coordinator
// implements it for the shards it runs; a client of another sidecar's
// shards can implement it with the RPC (FileLive is KIP-1164's
// HasLiveBatches; the other states need a tagged field).
type FileDescriber interface {
	// DescribeFiles returns one FileState per key, in order. An error
	// means the shard's answer is unknown: callers retry later and
	// assume nothing.
	DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error)
}

var _ FileDescriber = (*Coordinator)(nil)

// DescribeFiles returns what shard knows of each object key (SPEC §9
// DisklessDescribeFiles): FileUnknown, FileLive, FileReleased or
// FileClosed. Errors: a shard out of range; ErrShardFailed (with
// kerr.KafkaStorageError) for a failed shard. It does not block on the
// shard's driver. A commit still being written may already count as
// FileLive (never the other way round): callers err towards keeping
// objects.
func (c *Coordinator) DescribeFiles(ctx context.Context, shard int32, keys []string) ([]diskless.FileState, error) {
	if shard < 0 || shard >= c.cfg.NumShards {
		return nil, fmt.Errorf("coordinator: DescribeFiles: shard %d out of [0, %d)", shard, c.cfg.NumShards)
	}
	s := c.shards[shard]
	// A replica may lag: only the owner knows a file is not live — and
	// only once its log confirms that no other sidecar took the shard
	// over, whose commits may have made the file live (confirm.go).
	l, ok := s.hostedLog()
	if !ok {
		return nil, s.roleError(s.roleOf())
	}
	if err := s.confirm(ctx, l); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil {
		return nil, s.failedError()
	}
	out := make([]diskless.FileState, len(keys))
	for i, k := range keys {
		out[i] = s.mu.st.fileState(k)
	}
	return out, nil
}

func (c *Coordinator) describer() FileDescriber {
	if c.cfg.Files != nil {
		return c.cfg.Files
	}
	return c
}

// releasedFile is a file a shard released and has not closed.
type releasedFile struct {
	key        string
	owners     []int32 // ascending, the shard included
	appendTime int64   // ms, the shard's commit of it
}

// releasedFiles returns s's released files, by key.
func (s *shard) releasedFiles() []releasedFile {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil {
		return nil
	}
	st := s.mu.st
	out := make([]releasedFile, 0, len(st.released))
	for fi := range st.released {
		f := &st.files[fi]
		out = append(out, releasedFile{key: f.key, owners: st.fileOwners(f), appendTime: f.appendTime})
	}
	slices.SortFunc(out, func(a, b releasedFile) int { return cmp.Compare(a.key, b.key) })
	return out
}

// runFileDeletion runs one pass of the file lifecycle over every shard
// (see above): it deletes the objects that are due, hands released files
// over to the lower owner that deletes them, and records both (record
// 106). Config.FileDeletionDelay/2 runs it periodically; tests call it
// directly. Failed deletes are logged, counted (Stats.DeleteFailures) and
// retried on the next pass. With Config.Objects nil it does nothing. The
// error joins the shards' failures.
func (c *Coordinator) runFileDeletion(ctx context.Context) error {
	if c.cfg.Objects == nil {
		return nil
	}
	c.jobs.deletion.Lock()
	defer c.jobs.deletion.Unlock()
	nowMs := c.nowMs()
	var errs []error
	for _, s := range c.shards {
		if !c.owns(s) {
			continue // its owner's job
		}
		if err := c.deleteFiles(ctx, s, nowMs); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: file deletion on shard %d: %w", s.id, err))
			if errors.Is(err, diskless.ErrClosed) || ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// deleteFiles runs the file lifecycle pass of one shard. c.jobs.deletion
// is held.
func (c *Coordinator) deleteFiles(ctx context.Context, s *shard, nowMs int64) error {
	files := s.releasedFiles()
	quiet := c.jobs.quiet[s.id]
	if len(quiet) > 0 {
		// Forget files closed since the last pass.
		keep := make(map[string]bool, len(files))
		for _, f := range files {
			keep[f.key] = true
		}
		for k := range quiet {
			if !keep[k] {
				delete(quiet, k)
			}
		}
	}
	graceMs := c.cfg.OrphanScanGracePeriod.Milliseconds()
	settled := files[:0]
	for _, f := range files {
		if len(f.owners) == 1 || nowMs-f.appendTime >= graceMs {
			settled = append(settled, f)
		}
	}
	if len(settled) == 0 {
		return nil
	}
	states, err := c.ownerStates(ctx, s.id, settled)
	if err != nil {
		return err
	}
	var (
		closes   []records.Record
		toDelete []string
		errs     []error
	)
	delayMs := c.cfg.FileDeletionDelay.Milliseconds()
	for i, f := range settled {
		lower, live, unknown := int32(-1), false, false
		for j, o := range f.owners {
			st := states[i][j]
			switch {
			case o == s.id:
			case st < 0:
				unknown = true // that owner did not answer
			case o < s.id && diskless.FileState(st) != diskless.FileUnknown && lower < 0:
				lower = o // owners ascend: the lowest that knows the file
			}
			live = live || diskless.FileState(st) == diskless.FileLive
		}
		switch {
		case lower >= 0:
			closes = append(closes, &records.FileDeleted{ObjectKey: f.key, DeleterShard: lower})
		case unknown:
		case live:
			delete(quiet, f.key)
		default:
			since, ok := quiet[f.key]
			if !ok {
				since = nowMs
				quiet[f.key] = since
			}
			if nowMs-since >= delayMs {
				toDelete = append(toDelete, f.key)
			}
		}
	}
	for i, err := range c.deleteObjects(ctx, toDelete) {
		if err != nil {
			c.stats.DeleteFailures.Add(1)
			c.logger.Warn("coordinator: deleting a released object failed; retrying on the next pass",
				"shard", s.id, "key", toDelete[i], "err", err)
			errs = append(errs, err)
			continue
		}
		c.stats.ObjectsDeleted.Add(1)
		closes = append(closes, &records.FileDeleted{ObjectKey: toDelete[i], DeleterShard: s.id})
	}
	if len(closes) > 0 {
		if err := s.closeFiles(ctx, closes); err != nil {
			errs = append(errs, err)
		} else {
			for _, r := range closes {
				delete(quiet, r.(*records.FileDeleted).ObjectKey)
			}
		}
	}
	return errors.Join(errs...)
}

// ownerStates asks every other owner of each file what it knows of it,
// one DescribeFiles per owner shard. states[i][j] is the FileState of
// files[i].owners[j], or −1 when that owner could not answer (logged).
func (c *Coordinator) ownerStates(ctx context.Context, self int32, files []releasedFile) ([][]int8, error) {
	type ref struct{ file, owner int }
	byOwner := make(map[int32][]ref)
	states := make([][]int8, len(files))
	for i, f := range files {
		states[i] = make([]int8, len(f.owners))
		for j, o := range f.owners {
			if o != self {
				byOwner[o] = append(byOwner[o], ref{i, j})
			}
		}
	}
	d := c.describer()
	for _, o := range slices.Sorted(maps.Keys(byOwner)) {
		refs := byOwner[o]
		keys := make([]string, len(refs))
		for k, r := range refs {
			keys[k] = files[r.file].key
		}
		got, err := d.DescribeFiles(ctx, o, keys)
		if err == nil && len(got) != len(keys) {
			err = fmt.Errorf("%d answers for %d keys", len(got), len(keys))
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			c.logger.Warn("coordinator: DescribeFiles failed; the files wait for the next pass",
				"shard", self, "owner", o, "files", len(keys), "err", err)
		}
		for k, r := range refs {
			if err != nil {
				states[r.file][r.owner] = -1
			} else {
				states[r.file][r.owner] = int8(got[k])
			}
		}
	}
	return states, nil
}

// deleteObjects deletes keys from the object store, deleteConcurrency at
// a time, and returns each delete's error in key order.
func (c *Coordinator) deleteObjects(ctx context.Context, keys []string) []error {
	errs := make([]error, len(keys))
	sem := make(chan struct{}, deleteConcurrency)
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = c.cfg.Objects.Delete(ctx, k)
		})
	}
	wg.Wait()
	return errs
}

// closeFiles appends and applies records 106, skipping files no longer
// released (closed meanwhile, or state rebuilt).
func (s *shard) closeFiles(ctx context.Context, recs []records.Record) error {
	resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		out := make([]records.Record, 0, len(recs))
		for _, r := range recs {
			fi, ok := st.fileByKey[r.(*records.FileDeleted).ObjectKey]
			if _, released := st.released[fi]; ok && released {
				out = append(out, r)
			}
		}
		return out, nil
	}})
	return resp.err
}
