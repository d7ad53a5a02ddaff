package coordinator

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/backoff"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/segment"
)

// Consolidation (DESIGN §Consolidation, issue 17). A partition's WAL runs
// cost an index entry each for as long as they are retained, and keep
// every WAL object they lie in alive; runConsolidation rewrites the runs of
// WAL objects committed more than Config.ConsolidationMinAge ago into
// segment objects (docs/format/segment-object.md) — one partition's
// batches, copied byte for byte, in offset order — and swaps each
// partition's runs for the segment with one record 114, so that a shard
// keeps one entry per segment per partition and the WAL objects are
// released (file lifecycle) once no owner has runs in them.
//
// A pass, per shard: plan under the read lock — per partition, the WAL
// runs after those its segment builder holds, old enough and published;
// read each WAL object those runs lie in once (one ranged GET of the range
// they cover, throttled by Config.ConsolidationMaxBytesPerSec), check
// every batch (batch.CheckRun), and append each run to its partition's
// builder (segment.Writer over a staging file under
// Config.ConsolidationStagingDir); a builder that would pass segment.bytes
// or change timestamp type is sealed first, and one whose first run is
// segment.ms past the minimum age is sealed at the end of the pass.
// Sealing uploads the object under a fresh key and commits record 114
// through the shard's driver as a deferred request, decided against the
// durable state: if the partition's first runs are no longer the ones the
// builder holds (retention or DeleteRecords moved the log start, the topic
// went), nothing is written and the object is deleted at once. Builders
// live in memory and staging only: after a restart, consolidation starts
// again from what the log says (the runs still in WAL objects), and an
// object uploaded whose record never became durable is an orphan, deleted
// by the orphan scan after the grace period.

// SegmentStore is what consolidation needs of the object store: read WAL
// objects, put segment objects and delete those never committed.
// objstore.Store satisfies it.
type SegmentStore interface {
	// ReadRange reads as objstore.Store.ReadRange does (DESIGN §The read
	// contract).
	ReadRange(ctx context.Context, key string, off int64, p []byte) (n int, size int64, err error)
	// Put stores data under key, atomically.
	Put(ctx context.Context, key string, data []byte) error
	// Delete removes the object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// consolidation is the consolidator's state: per shard, the segment
// builders of its partitions. Guarded by jobs.consolidation.
type consolidation struct {
	shards   []map[diskless.TopicPartition]*segmentBuilder
	throttle throttle
}

// segmentBuilder is the segment being built for one partition: the WAL
// runs it holds (its partition's first WAL runs, in order) and their
// bytes, staged.
type segmentBuilder struct {
	tp     diskless.TopicPartition
	tsType int8
	runs   []heldRun
	w      *segment.Writer
	stage  stage
	// firstAppend is the log-append time of its first run.
	firstAppend int64
}

// heldRun identifies one WAL run a builder holds.
type heldRun struct {
	key        string
	byteOffset int32
	byteSize   int32
	base       int64
}

// segmentLimits are the roll limits of a partition's segments.
type segmentLimits struct {
	bytes int64
	ms    int64
}

// consolidationWork is one WAL run to add to its partition's builder.
type consolidationWork struct {
	tp     diskless.TopicPartition
	run    diskless.RunCoordinate
	seq    int64 // its file's commit number: WAL objects are read in commit order
	limits segmentLimits
}

// errSegmentStale refuses a record 114 whose builder no longer matches the
// partition's first runs.
var errSegmentStale = errors.New("coordinator: segment no longer matches the partition's WAL runs")

// segmentLimitsOf returns t's roll limits: its segment.bytes and
// segment.ms when set (segment.bytes at least 1 MiB and at most 1 GiB),
// else the configured defaults.
func (c *Coordinator) segmentLimitsOf(t *diskless.Topic) segmentLimits {
	l := segmentLimits{bytes: c.cfg.SegmentBytes, ms: c.cfg.SegmentRollTime.Milliseconds()}
	if v, err := strconv.ParseInt(t.Config.Raw["segment.bytes"], 10, 64); err == nil && v > 0 {
		l.bytes = min(max(v, 1<<20), MaxSegmentBytes)
	}
	if v, err := strconv.ParseInt(t.Config.Raw["segment.ms"], 10, 64); err == nil && v > 0 {
		l.ms = v
	}
	return l
}

// runConsolidation runs one consolidation pass over every shard (see
// above); Config.ConsolidationInterval runs it periodically, tests call it
// directly. Failures of one partition (a WAL object that does not read or
// check out) are logged and counted (Stats.ConsolidationFailures) and the
// partition is tried again next pass; the error joins the shards'
// failures.
func (c *Coordinator) runConsolidation(ctx context.Context) error {
	if c.cfg.Segments == nil || c.cfg.ConsolidationMinAge < 0 {
		return nil
	}
	c.jobs.consolidation.Lock()
	defer c.jobs.consolidation.Unlock()
	cs := &c.consolidation
	if cs.shards == nil {
		cs.shards = make([]map[diskless.TopicPartition]*segmentBuilder, len(c.shards))
		for i := range cs.shards {
			cs.shards[i] = make(map[diskless.TopicPartition]*segmentBuilder)
		}
		cs.throttle.rate = c.cfg.ConsolidationMaxBytesPerSec
	}
	var errs []error
	for _, s := range c.shards {
		if !c.owns(s) {
			// Its owner's job; what this sidecar built when it owned the
			// shard is discarded (the owner starts from the log).
			for tp, b := range cs.shards[s.id] {
				b.stage.remove()
				delete(cs.shards[s.id], tp)
			}
			continue
		}
		if err := c.consolidateShard(ctx, s, cs.shards[s.id]); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: consolidation on shard %d: %w", s.id, err))
			if errors.Is(err, diskless.ErrClosed) || ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Consolidate runs one consolidation pass now, as the periodic one does
// every Config.ConsolidationInterval (runConsolidation): for tests and
// tools that drive it. Errors: those of the pass, joined.
func (c *Coordinator) Consolidate(ctx context.Context) error { return c.runConsolidation(ctx) }

// dropBuilders discards every builder (Close, and tests that restart).
func (c *Coordinator) dropBuilders() {
	c.jobs.consolidation.Lock()
	defer c.jobs.consolidation.Unlock()
	for _, bs := range c.consolidation.shards {
		for tp, b := range bs {
			b.stage.remove()
			delete(bs, tp)
		}
	}
}

// consolidateShard runs a pass over shard s with its builders bs.
func (c *Coordinator) consolidateShard(ctx context.Context, s *shard, bs map[diskless.TopicPartition]*segmentBuilder) error {
	now := c.nowMs()
	work, stale := s.consolidationPlan(c, now, bs)
	for _, tp := range stale {
		bs[tp].stage.remove()
		delete(bs, tp)
	}
	// Group the runs by WAL object, objects in commit order.
	slices.SortStableFunc(work, func(a, b consolidationWork) int { return cmp.Compare(a.seq, b.seq) })
	failed := make(map[diskless.TopicPartition]bool)
	var errs []error
	for i := 0; i < len(work); {
		j := i + 1
		for j < len(work) && work[j].run.ObjectKey == work[i].run.ObjectKey {
			j++
		}
		if err := c.consolidateObject(ctx, s, bs, work[i:j], failed); err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil || errors.Is(err, diskless.ErrClosed) {
				return errors.Join(errs...)
			}
		}
		i = j
	}
	// Seal the builders whose first run has waited segment.ms.
	for _, tp := range sortedBuilders(bs) {
		b := bs[tp]
		if failed[tp] {
			continue
		}
		t := c.catalog.Load().byID[tp.TopicID]
		if t == nil {
			continue
		}
		if l := c.segmentLimitsOf(t); now-b.firstAppend >= c.cfg.ConsolidationMinAge.Milliseconds()+l.ms {
			if err := c.sealSegment(ctx, s, bs, b); err != nil && !errors.Is(err, errSegmentStale) {
				errs = append(errs, err)
				if ctx.Err() != nil || errors.Is(err, diskless.ErrClosed) {
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

func sortedBuilders(bs map[diskless.TopicPartition]*segmentBuilder) []diskless.TopicPartition {
	tps := make([]diskless.TopicPartition, 0, len(bs))
	for tp := range bs {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, diskless.ComparePartitions)
	return tps
}

// consolidationPlan returns, under s's read lock, the runs to consolidate
// at nowMs — per partition of the catalog, the published WAL runs after
// those its builder holds whose file was committed at least
// ConsolidationMinAge before nowMs, in order — and the partitions whose
// builder no longer holds their first runs (stale: to be discarded).
func (s *shard) consolidationPlan(c *Coordinator, nowMs int64, bs map[diskless.TopicPartition]*segmentBuilder) (work []consolidationWork, stale []diskless.TopicPartition) {
	cat := c.catalog.Load()
	cutoff := nowMs - c.cfg.ConsolidationMinAge.Milliseconds()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil {
		return nil, nil
	}
	st := s.mu.st
	for tp, b := range bs {
		if p := st.partitions[tp]; p == nil || p.deleted || !st.holds(p, b) {
			stale = append(stale, tp)
		}
	}
	for tp, p := range st.partitions {
		t := cat.byID[tp.TopicID]
		if t == nil || p.deleted || !p.visible || tp.Partition >= t.Partitions {
			continue
		}
		i := 0
		if b := bs[tp]; b != nil && !slices.Contains(stale, tp) {
			i = len(b.runs)
		}
		x := &p.runs
		n := p.visibleLen()
		var limits segmentLimits
		for ; i < n; i++ {
			e := x.at(i)
			f := &st.files[e.file]
			if f.appendTime > cutoff {
				break // file commit times never decrease along a partition
			}
			if limits.bytes == 0 {
				limits = c.segmentLimitsOf(t)
			}
			work = append(work, consolidationWork{tp: tp, run: st.coordinate(e), seq: f.seq, limits: limits})
		}
	}
	return work, stale
}

// holds reports whether b's runs are p's first WAL runs.
func (st *state) holds(p *partition, b *segmentBuilder) bool {
	x := &p.runs
	if len(b.runs) > x.len() {
		return false
	}
	for i, h := range b.runs {
		e := x.at(i)
		if e.baseOffset != h.base || e.byteOffset != h.byteOffset || e.byteSize != h.byteSize || st.files[e.file].key != h.key {
			return false
		}
	}
	return true
}

// consolidateObject reads the runs of one WAL object (work, all of it)
// with one ranged read of the bytes they cover, checks each, and adds it
// to its partition's builder, sealing builders that reach their limits.
// A run that does not check out fails its partition for this pass.
func (c *Coordinator) consolidateObject(ctx context.Context, s *shard, bs map[diskless.TopicPartition]*segmentBuilder,
	work []consolidationWork, failed map[diskless.TopicPartition]bool) error {
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, w := range work {
		if !failed[w.tp] {
			lo, hi = min(lo, w.run.ByteOffset), max(hi, w.run.ByteOffset+int64(w.run.ByteSize))
		}
	}
	if hi <= lo {
		return nil
	}
	key := work[0].run.ObjectKey
	if err := c.consolidation.throttle.wait(ctx, hi-lo); err != nil {
		return err
	}
	buf := make([]byte, hi-lo)
	c.stats.ConsolidationReads.Add(1)
	n, size, err := c.cfg.Segments.ReadRange(ctx, key, lo, buf)
	if err == nil && (n != len(buf) || size != work[0].run.FileSize) {
		err = fmt.Errorf("read %d bytes of an object of %d, want %d of %d: %w", n, size, len(buf), work[0].run.FileSize, io.ErrUnexpectedEOF)
	}
	if err != nil {
		c.stats.ConsolidationFailures.Add(1)
		for _, w := range work {
			failed[w.tp] = true
		}
		return fmt.Errorf("reading WAL object %s [%d, %d): %w", key, lo, hi, err)
	}
	c.stats.ConsolidationReadBytes.Add(int64(n))
	var errs []error
	for _, w := range work {
		if failed[w.tp] {
			continue
		}
		r := &w.run
		p := buf[r.ByteOffset-lo : r.ByteOffset-lo+int64(r.ByteSize)]
		if k, next, maxTs, err := batch.CheckRun(p, r.BaseOffset, r.LastOffset, r.BatchMaxTimestamp, false); err != nil ||
			next != r.LastOffset+1 || maxTs != r.BatchMaxTimestamp {
			c.stats.ConsolidationFailures.Add(1)
			failed[w.tp] = true
			c.logger.Error("coordinator: a WAL run does not check out; its partition is not consolidated",
				"shard", s.id, "topic", w.tp.TopicID, "partition", w.tp.Partition, "object", key,
				"offset", r.BaseOffset, "good_batches", k, "err", err)
			continue
		}
		if err := c.addRun(ctx, s, bs, &w, p); err != nil {
			// Its runs are not the partition's first any more, or the
			// builder failed: the partition waits for the next pass.
			failed[w.tp] = true
			if errors.Is(err, errSegmentStale) {
				continue
			}
			errs = append(errs, err)
			if ctx.Err() != nil || errors.Is(err, diskless.ErrClosed) {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// addRun appends run w (its bytes p) to its partition's builder, sealing
// the builder first when the run could take its object (data, index and
// trailer: segment.Writer.SizeWith) past segment.bytes or is
// of another timestamp type, and starting one when there is none.
func (c *Coordinator) addRun(ctx context.Context, s *shard, bs map[diskless.TopicPartition]*segmentBuilder, w *consolidationWork, p []byte) error {
	r := &w.run
	b := bs[w.tp]
	if b != nil && (b.tsType != r.TimestampType || b.w.SizeWith(int64(len(p))) > w.limits.bytes ||
		r.LastOffset-b.runs[0].base > math.MaxInt32) {
		if err := c.sealSegment(ctx, s, bs, b); err != nil {
			return err
		}
		b = nil
	}
	if b == nil {
		st, err := c.newStage(s.id)
		if err != nil {
			return err
		}
		b = &segmentBuilder{tp: w.tp, tsType: r.TimestampType, stage: st, firstAppend: r.LogAppendTime,
			w: segment.NewWriter(st, w.tp.TopicID, w.tp.Partition, r.BaseOffset, uint32(c.cfg.ConsolidationIndexIntervalBytes))}
		bs[w.tp] = b
	}
	if err := b.w.Add(p, r.BaseOffset, r.LogAppendTime, r.TimestampType); err != nil {
		b.stage.remove()
		delete(bs, w.tp)
		return fmt.Errorf("staging run %s [%d, %d] of %s/%d: %w", r.ObjectKey, r.BaseOffset, r.LastOffset, w.tp.TopicID, w.tp.Partition, err)
	}
	b.runs = append(b.runs, heldRun{key: r.ObjectKey, byteOffset: int32(r.ByteOffset), byteSize: r.ByteSize, base: r.BaseOffset})
	return nil
}

// sealSegment uploads b's segment object and commits record 114 swapping
// b's runs for it, then forgets b. If the partition's first runs are no
// longer b's, nothing is committed, the object is deleted and the error
// is errSegmentStale; if the shard is no longer hosted here
// (diskless.ErrNotCoordinator: it moved before the record was decided),
// the object is deleted too; if the commit fails otherwise, its outcome
// is unknown (the record may be durable) and the object is left to the
// orphan scan.
func (c *Coordinator) sealSegment(ctx context.Context, s *shard, bs map[diskless.TopicPartition]*segmentBuilder, b *segmentBuilder) error {
	delete(bs, b.tp)
	defer b.stage.remove()
	tail, tr := b.w.Finish()
	data, err := b.stage.bytes(len(tail))
	if err != nil {
		return fmt.Errorf("reading the staged segment of %s/%d: %w", b.tp.TopicID, b.tp.Partition, err)
	}
	data = append(data, tail...)
	key := c.newObjectKey()
	if err := c.cfg.Segments.Put(ctx, key, data); err != nil {
		c.stats.ConsolidationFailures.Add(1)
		return fmt.Errorf("uploading segment %s of %s/%d: %w", key, b.tp.TopicID, b.tp.Partition, err)
	}
	c.stats.SegmentsUploaded.Add(1)
	c.stats.SegmentBytesUploaded.Add(int64(len(data)))
	rec := &records.SegmentCommitted{
		ObjectKey:     key,
		ObjectFormat:  segment.ObjectFormat,
		FileSize:      int64(len(data)),
		TopicID:       b.tp.TopicID,
		Partition:     b.tp.Partition,
		BaseOffset:    tr.BaseOffset,
		LastOffset:    b.w.NextOffset() - 1,
		DataSize:      int32(tr.DataSize),
		IndexEntries:  int32(tr.IndexEntries),
		MaxTimestamp:  b.w.MaxTimestamp(),
		AppendTime:    b.w.AppendTime(),
		TimestampType: b.tsType,
		ReplacedRuns:  int32(len(b.runs)),
	}
	resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		p := st.partitions[b.tp]
		if p == nil || p.deleted || !st.holds(p, b) || p.visibleLen() < len(b.runs) {
			return nil, errSegmentStale
		}
		rec.CommitTimestamp = max(c.nowMs(), st.lastAppendTime)
		if err := st.checkSegmentCommitted(rec); err != nil {
			return nil, fmt.Errorf("%w: %w", errSegmentStale, err)
		}
		return []records.Record{rec}, nil
	}})
	switch {
	case errors.Is(resp.err, errSegmentStale), errors.Is(resp.err, diskless.ErrNotCoordinator):
		// Never written: the runs changed, or the shard moved to another
		// sidecar before the record was decided (a request refused or
		// still queued when the driver stops gets ErrNotCoordinator).
		c.stats.SegmentsAbandoned.Add(1)
		c.logger.Info("coordinator: a segment was not committed; deleting it",
			"shard", s.id, "key", key, "err", resp.err)
		if err := c.cfg.Segments.Delete(ctx, key); err != nil {
			c.logger.Warn("coordinator: deleting an uncommitted segment failed; the orphan scan will", "key", key, "err", err)
		}
		if errors.Is(resp.err, diskless.ErrNotCoordinator) {
			return resp.err
		}
		return errSegmentStale
	case resp.err != nil:
		c.stats.ConsolidationFailures.Add(1)
		return fmt.Errorf("committing segment %s of %s/%d: %w", key, b.tp.TopicID, b.tp.Partition, resp.err)
	}
	c.stats.SegmentsCommitted.Add(1)
	c.stats.RunsConsolidated.Add(int64(len(b.runs)))
	return nil
}

// newObjectKey returns a fresh object key under the WAL objects' prefix:
// "<ObjectKeyPrefix>/<32 hex digits of 128 random bits>", as upload names
// WAL objects (SPEC §7), so that the orphan scan covers segment objects.
func (c *Coordinator) newObjectKey() string {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never returns an error (crypto/rand, Go 1.24+)
	return c.cfg.ObjectKeyPrefix + "/" + hex.EncodeToString(id[:])
}

// stage holds a segment's data while it is built: a file under
// ConsolidationStagingDir, or memory when that is "".
type stage interface {
	io.Writer
	// bytes returns the data written, with room for extra more bytes.
	bytes(extra int) ([]byte, error)
	// remove discards the stage.
	remove()
}

// newStage returns a fresh stage for shard.
func (c *Coordinator) newStage(shard int32) (stage, error) {
	if c.cfg.ConsolidationStagingDir == "" {
		return new(memStage), nil
	}
	dir := filepath.Join(c.cfg.ConsolidationStagingDir, fmt.Sprintf("shard-%d", shard))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "segment-*.staging")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return nil, err
	}
	return &fileStage{name: name}, nil
}

type memStage struct{ bytes.Buffer }

func (m *memStage) bytes(extra int) ([]byte, error) {
	return append(make([]byte, 0, m.Len()+extra), m.Bytes()...), nil
}
func (m *memStage) remove() { m.Reset() }

// stageBufferBytes is how much of a segment a file stage holds in memory
// before it appends it to its file: every partition of a shard may have a
// segment being built, so the files are not kept open (one descriptor per
// partition), and each append opens, writes and closes its file.
const stageBufferBytes = 16 << 10

// fileStage stages a segment in a file of its own, through a small buffer.
type fileStage struct {
	name string
	buf  []byte
	size int64 // bytes in the file
	err  error
}

func (s *fileStage) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.buf = append(s.buf, p...)
	if len(s.buf) >= stageBufferBytes {
		s.err = s.flush()
	}
	return len(p), s.err
}

// flush appends the buffer to the file.
func (s *fileStage) flush() error {
	f, err := os.OpenFile(s.name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	n, err := f.Write(s.buf)
	s.size += int64(n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	s.buf = s.buf[:0]
	return err
}

func (s *fileStage) bytes(extra int) ([]byte, error) {
	if s.err != nil {
		return nil, s.err
	}
	out := make([]byte, s.size, s.size+int64(len(s.buf))+int64(extra))
	f, err := os.Open(s.name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := io.ReadFull(f, out); err != nil {
		return nil, err
	}
	return append(out, s.buf...), nil
}

func (s *fileStage) remove() {
	os.Remove(s.name)
	s.buf = nil
}

// clearStaging removes what a previous process left under the staging
// directory: builders do not survive a restart.
func clearStaging(dir string) error {
	if dir == "" {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// throttle paces consolidation's reads to rate bytes per second (0: no
// limit): each read of n bytes waits until the bytes read before it have
// had their time.
type throttle struct {
	mu   sync.Mutex
	rate int64
	next time.Time
}

func (t *throttle) wait(ctx context.Context, n int64) error {
	if t.rate <= 0 {
		return nil
	}
	t.mu.Lock()
	now := time.Now()
	if t.next.Before(now) {
		t.next = now
	}
	at := t.next
	t.next = t.next.Add(time.Duration(float64(n) / float64(t.rate) * float64(time.Second)))
	t.mu.Unlock()
	return backoff.Sleep(ctx, time.Until(at))
}
