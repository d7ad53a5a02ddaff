package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/internal/acl"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
	"github.com/diskless-sidecar/sidecar/txn"
)

// state is one shard's state: a pure function of its metadata log
// (DESIGN invariant 6). It does no IO and reads no clock: time comes in as
// arguments and records. The shard driver calls apply for every record it
// replays, and commitFile — which applies batch by batch with the same
// helpers — for every file it decides online.
//
// Fields of partition named vis* are not state: they are what readers may
// see, published by the driver once the records behind them are durable.
type state struct {
	shard int32
	// expirationMs is producer.id.expiration.ms: decisions treat older
	// producer state as absent, and sweeps drop it.
	expirationMs int64
	logger       *slog.Logger

	partitions map[diskless.TopicPartition]*partition
	// topicParts indexes partitions by topic id, then partition number
	// (nil for a partition of another shard): commitFile's lookup. It
	// holds partitions numbered below MaxPartitionsPerTopic, all that
	// CreateTopic makes; a log from elsewhere may hold others, found in
	// partitions only. Derived.
	topicParts map[diskless.TopicID][]*partition
	// files is the file table, indexed by runEntry.file (a slot);
	// fileByKey maps the object keys of the files it holds to their slots.
	// A file holds its slot from its commit until it is forgotten: closed
	// (record 106) and committed more than forgetClosedFilesAfterMs of log
	// time before a later commit (forgetClosed). Its key then leaves
	// fileByKey and its slot, emptied (fileEntry.free), goes on freeSlots
	// for a later commit to reuse. Only forgotten files' slots are reused,
	// so a slot with live batches, or released and not closed, never
	// changes hands while a batch entry or the file lifecycle refers to
	// it. The table holds the live, released and recently closed files,
	// not every file ever committed (docs/format/metadata-records.md
	// §Forgetting closed files).
	files     []fileEntry
	fileByKey map[string]int32
	// freeSlots holds the slots of forgotten files; addFile takes the
	// last one first.
	freeSlots []int32
	// closedQueue[closedHead:] holds the closed files not yet forgotten,
	// in close order: forgetClosed pops from the front.
	closedQueue []int32
	closedHead  int
	// nextFileSeq is the commit number the next committed file gets
	// (fileEntry.seq).
	nextFileSeq int64
	// released holds the files with no live batch left that are not
	// closed yet (record 106): the file lifecycle's work list. Derived.
	released map[int32]struct{}
	// releases and forgets count files released and forgotten since
	// this state was built, for Stats. Not state: not in snapshots.
	releases int64
	forgets  int64
	// ownerSets interns the files' owner sets (record 102's OwnerIds,
	// ascending, this shard included); fileEntry.owners indexes it.
	// Derived: snapshots store each open file's owners.
	ownerSets   [][]int32
	ownerSetIdx map[string]int32

	// topics and topicNames are the topic catalog (records 104 and 101);
	// only shard 0 holds entries.
	topics     map[diskless.TopicID]*topicEntry
	topicNames map[string]diskless.TopicID
	// deletedTopics holds the topics whose partitions on this shard are
	// deleted (record 101) and not yet purged (record 112); their
	// partitions have deleted set.
	deletedTopics map[diskless.TopicID]struct{}

	// nextProducerID is the first producer id not yet handed out in a
	// block (record 105).
	nextProducerID int64
	// lastAppendTime is the latest log-append time committed, ms; commit
	// times never go below it.
	lastAppendTime int64
	// nextSweep is the log-append time, ms, at or after which the next
	// commit drops expired producer state.
	nextSweep int64

	// groups is the committed-offsets table of the consumer groups this
	// shard owns (records 107 … 110 and 113, applied by group.Offsets; the
	// shard's group.Coordinator decides against it).
	groups *group.Offsets
	// txns is the state of the transactional ids this shard owns (record
	// 118, applied by txn.Table; the shard's txn.Coordinator decides
	// against it).
	txns *txn.Table

	// scram holds the SCRAM credentials (record 116; shard 0 only; nil
	// while there are none).
	scram map[scramKey]diskless.ScramCredential
	// acls holds the access control entries (record 117; shard 0 only),
	// sorted by acl.Compare; replaced on every change, never edited
	// (Coordinator.ACLs hands it out); nil while there are none.
	acls []acl.Binding

	// scratch is commitFile's working memory. Not state.
	scratch commitScratch
}

// producerSweepIntervalMs is how much log-append time passes between two
// sweeps of expired producer state (a memory bound only: decisions already
// treat expired state as absent).
const producerSweepIntervalMs = 60_000

// forgetClosedFilesAfterMs is how much log time must separate a closed
// file's commit from a later commit before that commit forgets it
// (forgetClosed): 1 hour. A forgotten key is answered as never committed
// (FileUnknown), and a CommitFile of it would commit it anew — so no
// commit attempt of a file may come this late. None does (doc.go,
// "Forgetting closed files"): every attempt is decided within
// OrphanScanGracePeriod (≥ 10 minutes, default 1 hour) of the upload, the
// committer giving up after diskless.commit.max.attempts (5) calls with
// under a second of backoff, and a file is forgotten only once an hour of
// log time has passed since its commit, past the least grace period
// (MinOrphanScanGracePeriod) — a shared file is also closed only once the
// grace period has passed since its commit. The hour keeps a closed file
// answering FileClosed, and a repeated commit of it answered from the
// table, for at least an hour of log time after its commit. A constant,
// not a Config field: what is forgotten is part of the state, which must
// follow from the log alone (DESIGN invariant 6) — a snapshot taken under
// one horizon and replayed under another would differ from a replay from
// the start. BenchmarkClosedFiles measures what forgetting saves.
const forgetClosedFilesAfterMs = 3_600_000

// Limits on what a shard accepts (docs/format/metadata-records.md §Limits).
const (
	// MaxPartitionsPerTopic bounds CreateTopic's partition count.
	MaxPartitionsPerTopic = 100_000
)

// fileEntry is one slot of the file table: a committed file, or a free
// slot (free) left by a forgotten one.
type fileEntry struct {
	key        string // "" in a free slot
	size       int64
	appendTime int64 // ms, the commit's log-append time
	// seq numbers the shard's file commits from 0, in log order. Slots are
	// reused, so slot numbers say nothing of commit order; seq does: it
	// never decreases along a partition index (findInFile).
	seq    int64
	format int8
	// closed is set by record 106: the shard is done with the object
	// (deleted, or left to a lower owner).
	closed bool
	// live is the number of this file's batches still in a partition
	// index; 0 means the shard no longer references the file.
	live int32
	// owners indexes state.ownerSets; −1 once closed.
	owners int32
}

// freeFile is what a free slot holds.
var freeFile = fileEntry{closed: true, owners: -1}

// free reports whether the slot is free: its file was forgotten and no
// file has taken it since.
func (f *fileEntry) free() bool { return f.key == "" }

// topicEntry is one topic of the catalog.
type topicEntry struct {
	id         diskless.TopicID
	name       string
	partitions int32
	configs    []records.TopicConfigEntry // as recorded, sorted by name
	config     topicconfig.Config
	// disable is the topic's diskless state (record 111).
	disable diskless.Disablement
}

// partition is one partition's index: its runs of batches in offset
// order, dense from logStart (or from a run containing it) to hwm.
type partition struct {
	tp        diskless.TopicPartition
	topicName string
	logStart  int64
	hwm       int64
	// segs are the partition's segment objects, then runs its WAL runs
	// (segments.go): its index, in offset order.
	segs      []segmentEntry
	runs      runIndex
	producers map[int64]*producerState
	// bytes is the sum of the indexed runs' byte sizes (retention.bytes).
	// Derived.
	bytes int64

	// deleted is set by record 101: the topic is gone; the purge empties
	// the partition (records 103) and record 112 removes it.
	deleted bool

	// txns are the partition's open and aborted transactions (txndata.go);
	// nil while it has none.
	txns *partTxns

	// Published view, see state. visLSO is the last stable offset.
	visible     bool
	visHWM      int64
	visLogStart int64
	visLSO      int64

	// What commitFile knows of the partition for the file it is deciding
	// (valid while fileGen is commitScratch.gen): the error its batches
	// get (unknown to the catalog, or its topic not ENABLED; nil: none),
	// and its slot in the record being built (−1: none yet). Not state.
	fileGen  uint64
	fileSlot int32
	fileErr  *kerr.Error
}

// runEntry is one run in a partition index, kept compact (48 bytes): the
// batches of one partition that one file commit accepted back to back in
// its object — consecutive offsets, adjacent bytes, one timestamp type —
// described as one byte range and one offset range. A file commit adds one
// entry per partition, more only where a refused batch (a duplicate, a
// fenced epoch) or a change of timestamp type interrupts the partition's
// batches, so the index grows by file commits, not by batches. The
// batches themselves are self-delimiting (SPEC §1): fetch reads the run's
// range and walks them by their headers. The object key lives in the file
// table.
type runEntry struct {
	baseOffset int64
	// maxTimestamp is the largest of the producers' maxTimestamps of the
	// run's batches, ms (−1 when none has one).
	maxTimestamp int64
	// prefixMaxTs is the largest effective max timestamp of this run
	// and all before it in its index chunk (runIndex.prefixMaxTs adds
	// the chunks before). Derived: not in snapshots.
	prefixMaxTs int64
	file        int32
	byteOffset  int32
	byteSize    int32
	// lastOffsetDelta is the run's last offset less its base offset; a
	// run ends before a batch that would take it past MaxInt32.
	lastOffsetDelta int32
	tsType          int8
}

func (e *runEntry) lastOffset() int64 { return e.baseOffset + int64(e.lastOffsetDelta) }

// producerState is what SPEC §3 keeps per (partition, producerId).
type producerState struct {
	epoch int16
	// lastWrite is the log-append time of the producer's last batch or
	// marker, ms: expiration counts from it.
	lastWrite int64
	// lastTimestamp is the timestamp of the producer's last batch or
	// marker as Kafka's producer entry keeps it, ms (DescribeProducers'
	// LastTimestamp, SPEC §15): its maxTimestamp with CreateTime, its
	// log-append time with LogAppendTime (effectiveMaxTs).
	lastTimestamp int64
	// lastOffset is the last offset of its last batch.
	lastOffset int64
	// seqs are the last producerWindow batches, oldest first.
	n    int8
	head int8 // index of the oldest entry when n == producerWindow
	seqs [producerWindow]seqEntry
}

// producerWindow is how many recent batches per producer are kept for
// duplicate detection (Kafka's 5 in-flight requests).
const producerWindow = 5

type seqEntry struct {
	baseSeq, lastSeq int32
	baseOffset       int64
	appendTime       int64
}

func (ps *producerState) newest() *seqEntry {
	i := (int(ps.head) + int(ps.n) - 1) % producerWindow
	return &ps.seqs[i]
}

// lastSeq is the last sequence of the producer's newest batch, −1 when
// it has none in its epoch (a marker started the state or bumped its
// epoch): its next batch's must then be 0, as Kafka's RecordBatch.NO_SEQUENCE
// is followed by 0 (SPEC §3, §15).
func (ps *producerState) lastSeq() int32 {
	if ps.n == 0 {
		return -1
	}
	return ps.newest().lastSeq
}

func (ps *producerState) push(e seqEntry) {
	if ps.n < producerWindow {
		ps.seqs[(int(ps.head)+int(ps.n))%producerWindow] = e
		ps.n++
		return
	}
	ps.seqs[ps.head] = e
	ps.head = (ps.head + 1) % producerWindow
}

// find returns the oldest entry of the window holding exactly the
// sequences [baseSeq, lastSeq], or nil. The window is seqs[:n] from head
// on, wrapping; head is 0 until it is full.
func (ps *producerState) find(baseSeq, lastSeq int32) *seqEntry {
	n, head := int(ps.n), int(ps.head)
	for i := head; i < n; i++ {
		if e := &ps.seqs[i]; e.baseSeq == baseSeq && e.lastSeq == lastSeq {
			return e
		}
	}
	for i := range head {
		if e := &ps.seqs[i]; e.baseSeq == baseSeq && e.lastSeq == lastSeq {
			return e
		}
	}
	return nil
}

func newState(shard int32, expirationMs int64, logger *slog.Logger) *state {
	st := &state{
		shard:         shard,
		expirationMs:  expirationMs,
		logger:        logger,
		partitions:    make(map[diskless.TopicPartition]*partition),
		topicParts:    make(map[diskless.TopicID][]*partition),
		fileByKey:     make(map[string]int32),
		released:      make(map[int32]struct{}),
		ownerSetIdx:   make(map[string]int32),
		topics:        make(map[diskless.TopicID]*topicEntry),
		topicNames:    make(map[string]diskless.TopicID),
		deletedTopics: make(map[diskless.TopicID]struct{}),
		groups:        group.NewOffsets(),
		txns:          txn.NewTable(),
	}
	st.groups.SetProducerIDExpiration(expirationMs)
	return st
}

// errInconsistent is wrapped by apply when a record contradicts the state:
// the log was not written by a correct coordinator.
var errInconsistent = errors.New("record contradicts shard state")

func inconsistent(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInconsistent, fmt.Sprintf(format, args...))
}

// apply applies one record. It checks the record against the state first
// and mutates nothing if it returns an error.
func (s *state) apply(rec records.Record) error {
	switch r := rec.(type) {
	case *records.PartitionCreated:
		return s.applyPartitionCreated(r)
	case *records.TopicDeleted:
		s.applyTopicDeleted(r)
		return nil
	case *records.TopicDisablement:
		return s.applyTopicDisablement(r)
	case *records.TopicPurged:
		return s.applyTopicPurged(r)
	case *records.FileCommitted:
		return s.applyFileCommitted(r)
	case *records.RecordsDeleted:
		return s.applyRecordsDeleted(r)
	case *records.TopicConfig:
		return s.applyTopicConfig(r)
	case *records.ProducerIDBlock:
		return s.applyProducerIDBlock(r)
	case *records.FileDeleted:
		return s.applyFileDeleted(r)
	case *records.SegmentCommitted:
		return s.applySegmentCommitted(r)
	case *records.ScramCredential:
		return s.applyScramCredential(r)
	case *records.ACL:
		return s.applyACL(r)
	default:
		return inconsistent("unknown record type %T", rec)
	}
}

func (s *state) applyPartitionCreated(r *records.PartitionCreated) error {
	tp := diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}
	if r.TopicID == (diskless.TopicID{}) || r.Partition < 0 {
		return inconsistent("partition %s/%d is invalid", r.TopicID, r.Partition)
	}
	if _, ok := s.partitions[tp]; ok {
		return inconsistent("partition %s/%d created twice", r.TopicID, r.Partition)
	}
	if _, ok := s.deletedTopics[r.TopicID]; ok {
		return inconsistent("partition %s/%d created in a deleted topic", r.TopicID, r.Partition)
	}
	s.addPartition(&partition{tp: tp, topicName: r.TopicName})
	return nil
}

// addPartition adds p, which must be new, to the partition maps.
func (s *state) addPartition(p *partition) {
	s.partitions[p.tp] = p
	if p.tp.Partition >= MaxPartitionsPerTopic {
		return
	}
	ps := s.topicParts[p.tp.TopicID]
	if n := int(p.tp.Partition) + 1; n > len(ps) {
		ps = slices.Grow(ps, n-len(ps))[:n]
	}
	ps[p.tp.Partition] = p
	s.topicParts[p.tp.TopicID] = ps
}

func (s *state) applyFileCommitted(r *records.FileCommitted) error {
	if err := s.checkFileCommitted(r); err != nil {
		return err
	}
	t := r.Topics[0].Partitions[0].Batches[0].LogAppendTimestamp
	fi := s.addFile(r.ObjectKey, r.FileSize, r.ObjectFormat, t, r.OwnerIDs)
	for i := range r.Topics {
		ft := &r.Topics[i]
		for j := range ft.Partitions {
			fp := &ft.Partitions[j]
			p := s.partitions[diskless.TopicPartition{TopicID: ft.TopicID, Partition: fp.Partition}]
			for k := range fp.Batches {
				s.appendBatch(p, fi, &fp.Batches[k])
			}
		}
	}
	s.finishFile(t)
	return nil
}

// checkFileCommitted validates record 102 against the state without
// mutating it.
func (s *state) checkFileCommitted(r *records.FileCommitted) error {
	if r.ObjectKey == "" {
		return inconsistent("file with empty object key")
	}
	if _, ok := s.fileByKey[r.ObjectKey]; ok {
		return inconsistent("file %q committed twice", r.ObjectKey)
	}
	if len(s.freeSlots) == 0 && len(s.files) >= math.MaxInt32 {
		return inconsistent("file table full")
	}
	if len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 || len(r.Topics[0].Partitions[0].Batches) == 0 {
		return inconsistent("file %q commits no batch", r.ObjectKey)
	}
	for _, id := range r.OwnerIDs {
		if id < 0 || id >= MaxShards {
			return inconsistent("file %q has owner %d", r.ObjectKey, id)
		}
	}
	t := r.Topics[0].Partitions[0].Batches[0].LogAppendTimestamp
	next := make(map[diskless.TopicPartition]int64)
	for i := range r.Topics {
		ft := &r.Topics[i]
		for j := range ft.Partitions {
			fp := &ft.Partitions[j]
			tp := diskless.TopicPartition{TopicID: ft.TopicID, Partition: fp.Partition}
			p := s.partitions[tp]
			if p == nil {
				return inconsistent("file %q commits to unknown partition %s/%d", r.ObjectKey, tp.TopicID, tp.Partition)
			}
			if p.deleted {
				return inconsistent("file %q commits to deleted partition %s/%d", r.ObjectKey, tp.TopicID, tp.Partition)
			}
			if _, dup := next[tp]; dup {
				return inconsistent("file %q lists partition %s/%d twice", r.ObjectKey, tp.TopicID, tp.Partition)
			}
			hwm := p.hwm
			for k := range fp.Batches {
				b := &fp.Batches[k]
				switch {
				case b.AssignedBaseOffset != hwm:
					return inconsistent("file %q assigns offset %d to %s/%d at high watermark %d",
						r.ObjectKey, b.AssignedBaseOffset, tp.TopicID, tp.Partition, hwm)
				case b.AssignedLastOffset < b.AssignedBaseOffset || b.AssignedLastOffset-b.AssignedBaseOffset > math.MaxInt32 ||
					b.AssignedLastOffset == math.MaxInt64:
					return inconsistent("file %q has offsets [%d, %d]", r.ObjectKey, b.AssignedBaseOffset, b.AssignedLastOffset)
				case b.LogAppendTimestamp != t:
					return inconsistent("file %q has two log-append times", r.ObjectKey)
				case b.ByteSize < 1 || b.ByteOffset < 0:
					return inconsistent("file %q has a batch at [%d, +%d)", r.ObjectKey, b.ByteOffset, b.ByteSize)
				case b.TimestampType != batch.TimestampCreateTime && b.TimestampType != batch.TimestampLogAppendTime:
					return inconsistent("file %q has timestamp type %d", r.ObjectKey, b.TimestampType)
				case b.Txn < diskless.TxnNone || b.Txn > diskless.TxnAbort || b.Txn != diskless.TxnNone && b.ProducerID < 0:
					return inconsistent("file %q has a batch of transaction kind %d, producer %d", r.ObjectKey, b.Txn, b.ProducerID)
				}
				hwm = b.AssignedLastOffset + 1
			}
			next[tp] = hwm
		}
	}
	return nil
}

// addFile adds a committed file to the file table, in the last freed slot
// if there is one, else in a new one, and returns its slot.
func (s *state) addFile(key string, size int64, format int8, appendTime int64, owners []int32) int32 {
	f := fileEntry{key: key, size: size, appendTime: appendTime, seq: s.nextFileSeq, format: format,
		owners: s.internOwners(owners)}
	s.nextFileSeq++
	var fi int32
	if n := len(s.freeSlots); n > 0 {
		fi = s.freeSlots[n-1]
		s.freeSlots = s.freeSlots[:n-1]
		s.files[fi] = f
	} else {
		fi = int32(len(s.files))
		s.files = append(s.files, f)
	}
	s.fileByKey[key] = fi
	return fi
}

// forgetClosed forgets the closed files at the front of closedQueue
// committed more than forgetClosedFilesAfterMs before log time now: their
// keys leave fileByKey and their slots go on freeSlots. It stops at the
// first that is not due, so a file may wait behind one closed before it
// and committed later (files are closed about in commit order: each
// after the same grace period); each file is popped once, so a commit
// pays O(1) amortised. Called at every file commit (finishFile), online
// and in replay alike, so that the same log forgets the same files at
// the same records.
func (s *state) forgetClosed(now int64) {
	if now < math.MinInt64+forgetClosedFilesAfterMs {
		return
	}
	cutoff := now - forgetClosedFilesAfterMs
	for s.closedHead < len(s.closedQueue) {
		fi := s.closedQueue[s.closedHead]
		f := &s.files[fi]
		if f.appendTime >= cutoff {
			break
		}
		delete(s.fileByKey, f.key)
		*f = freeFile
		s.freeSlots = append(s.freeSlots, fi)
		s.closedQueue[s.closedHead] = 0
		s.closedHead++
		s.forgets++
	}
	// Reclaim the popped front once it is most of the array.
	if h := s.closedHead; h > 0 && h >= len(s.closedQueue)/2 {
		s.closedQueue = append(s.closedQueue[:0], s.closedQueue[h:]...)
		s.closedHead = 0
	}
}

// closedFiles returns the closed files not yet forgotten, in close order.
func (s *state) closedFiles() []int32 { return s.closedQueue[s.closedHead:] }

// internOwners returns the index in ownerSets of the owner set ids,
// normalised to ascending unique shard ids including this shard (a record
// 102 always names its own shard; the normalisation keeps a record that
// does not from hiding this shard from the file lifecycle).
func (s *state) internOwners(ids []int32) int32 {
	norm := ids
	if !ownersNormal(ids, s.shard) {
		norm = append(slices.Clone(ids), s.shard)
		slices.Sort(norm)
		norm = slices.Compact(norm)
	}
	var buf [64]byte
	key := buf[:0]
	for _, id := range norm {
		key = binary.BigEndian.AppendUint32(key, uint32(id))
	}
	if i, ok := s.ownerSetIdx[string(key)]; ok {
		return i
	}
	i := int32(len(s.ownerSets))
	s.ownerSets = append(s.ownerSets, slices.Clone(norm))
	s.ownerSetIdx[string(key)] = i
	return i
}

// ownersNormal reports whether ids is strictly ascending and holds self.
func ownersNormal(ids []int32, self int32) bool {
	has := false
	for i, id := range ids {
		if i > 0 && id <= ids[i-1] {
			return false
		}
		has = has || id == self
	}
	return has
}

// fileOwners returns the owner shards of an open file, ascending.
func (s *state) fileOwners(f *fileEntry) []int32 {
	if f.owners < 0 {
		return nil
	}
	return s.ownerSets[f.owners]
}

// dropRun accounts for a run leaving a partition index (releaseSlot).
func (s *state) dropRun(e *runEntry) { s.releaseSlot(e.file) }

// appendBatch adds one accepted batch to p's index and producer state.
// Offsets and times must already be checked (checkFileCommitted, or the
// decision that built b).
func (s *state) appendBatch(p *partition, fi int32, b *records.CommittedBatch) {
	s.indexBatch(p, fi, b)
	s.recordProducer(p, p.producers[b.ProducerID], b)
	p.trackTxn(b, s.expirationMs)
}

// recordProducer updates p's producer state with an accepted batch b of
// a producer (none for a batch without a producer id): a data batch's
// sequences (recordProducerBatch), a marker's epoch and time
// (recordProducerMarker). ps is p.producers[b.ProducerID].
func (s *state) recordProducer(p *partition, ps *producerState, b *records.CommittedBatch) {
	switch {
	case b.ProducerID < 0:
	case b.Txn >= diskless.TxnCommit:
		s.recordProducerMarker(p, ps, b)
	default:
		s.recordProducerBatch(p, ps, b)
	}
}

// indexBatch adds one accepted batch to p's index: it extends p's last
// run when that run is of the same file and timestamp type and ends where
// the batch starts in the object (the batch before it in the file was
// accepted), else starts a new run. A file's batches are decided in one
// call, so only a run of the file being committed, which no reader sees
// yet and no snapshot has frozen, is ever extended (DESIGN invariant 6:
// replay extends the same runs, record 102 listing the batches in the
// same order).
func (s *state) indexBatch(p *partition, fi int32, b *records.CommittedBatch) {
	f := &s.files[fi]
	p.bytes += int64(b.ByteSize)
	p.hwm = b.AssignedLastOffset + 1
	x := &p.runs
	if n := x.len(); n > 0 {
		if e := x.at(n - 1); e.file == fi && e.tsType == b.TimestampType &&
			int64(e.byteOffset)+int64(e.byteSize) == int64(b.ByteOffset) &&
			b.AssignedLastOffset-e.baseOffset <= math.MaxInt32 &&
			int64(e.byteSize)+int64(b.ByteSize) <= math.MaxInt32 {
			x.extendLast(int32(b.AssignedLastOffset-e.baseOffset), e.byteSize+b.ByteSize, max(e.maxTimestamp, b.BatchMaxTimestamp),
				effectiveMaxTs(b.TimestampType, b.BatchMaxTimestamp, f.appendTime))
			return
		}
	}
	f.live++
	e := runEntry{
		baseOffset:      b.AssignedBaseOffset,
		maxTimestamp:    b.BatchMaxTimestamp,
		file:            fi,
		byteOffset:      b.ByteOffset,
		byteSize:        b.ByteSize,
		lastOffsetDelta: int32(b.AssignedLastOffset - b.AssignedBaseOffset),
		tsType:          b.TimestampType,
	}
	x.push(e, effectiveMaxTs(e.tsType, e.maxTimestamp, f.appendTime))
}

// recordProducerBatch updates the producer state with an accepted batch;
// ps is p.producers[b.ProducerID] (nil when absent). It depends only on
// the batch, so replay rebuilds the same state: a batch that does not
// continue the stored sequence in the stored epoch starts the state
// afresh (new, expired or fenced producer).
func (s *state) recordProducerBatch(p *partition, ps *producerState, b *records.CommittedBatch) {
	if ps != nil && (ps.epoch != b.ProducerEpoch || b.BaseSequence != batch.AddSequence(ps.lastSeq(), 1)) {
		*ps = producerState{}
	}
	ps = p.producerEntry(ps, b.ProducerID)
	ps.touch(b)
	ps.push(seqEntry{
		baseSeq:    b.BaseSequence,
		lastSeq:    b.LastSequence,
		baseOffset: b.AssignedBaseOffset,
		appendTime: b.LogAppendTimestamp,
	})
}

// recordProducerMarker updates the producer state with an accepted
// marker b (COMMIT or ABORT), as Kafka's partition leader updates its
// producer state entry with a marker (SPEC §15): a producer with no state
// here (none, or expired at b's log-append time) gets one at the marker's
// epoch, holding no batch; a marker of a newer epoch than the state's
// takes it and forgets the batches, so the producer's next batch must
// start at sequence 0 (SPEC §3's epoch bump); one of the same epoch keeps
// them. Either way the marker's log-append time is the producer's last
// write (expiration counts from it), its timestamp the producer's
// lastTimestamp (DescribeProducers' LastTimestamp), and
// its offset the producer's last. A marker of an older epoch than the
// state's changes nothing (the shard refuses one at its commit,
// markerEpochStale, SPEC §15; a log written before that check may hold
// one). ps is
// p.producers[b.ProducerID] (nil when absent). It depends only on the
// batch and the state, so replay rebuilds the same state.
func (s *state) recordProducerMarker(p *partition, ps *producerState, b *records.CommittedBatch) {
	switch {
	case ps == nil:
	case s.expired(ps, b.LogAppendTimestamp), b.ProducerEpoch > ps.epoch:
		*ps = producerState{}
	case b.ProducerEpoch < ps.epoch:
		return
	}
	p.producerEntry(ps, b.ProducerID).touch(b)
}

// producerEntry returns ps, or when ps is nil (p holds no state for
// producer id) a new empty entry for id in p.producers.
func (p *partition) producerEntry(ps *producerState, id int64) *producerState {
	if ps != nil {
		return ps
	}
	if p.producers == nil {
		p.producers = make(map[int64]*producerState)
	}
	ps = new(producerState)
	p.producers[id] = ps
	return ps
}

// touch makes the accepted batch or marker b the producer's last write:
// its epoch, log-append time (expiration counts from it), timestamp
// (effectiveMaxTs; DescribeProducers' LastTimestamp) and last offset.
// The sequence window is the caller's (recordProducerBatch pushes b).
func (ps *producerState) touch(b *records.CommittedBatch) {
	ps.epoch = b.ProducerEpoch
	ps.lastWrite = b.LogAppendTimestamp
	ps.lastTimestamp = effectiveMaxTs(b.TimestampType, b.BatchMaxTimestamp, b.LogAppendTimestamp)
	ps.lastOffset = b.AssignedLastOffset
}

// finishFile ends a file commit at log-append time t: the log's clock
// moves on, which may expire producer state and forget closed files.
func (s *state) finishFile(t int64) {
	s.lastAppendTime = max(s.lastAppendTime, t)
	if t >= s.nextSweep {
		s.sweepProducers(t)
	}
	s.forgetClosed(s.lastAppendTime)
}

// sweepProducers drops producer state idle for expirationMs at time now.
func (s *state) sweepProducers(now int64) {
	for _, p := range s.partitions {
		for id, ps := range p.producers {
			if s.expired(ps, now) {
				delete(p.producers, id)
			}
		}
		p.sweepEnded(now, s.expirationMs)
	}
	s.nextSweep = now + producerSweepIntervalMs
}

func (s *state) expired(ps *producerState, now int64) bool {
	return now-ps.lastWrite >= s.expirationMs
}

// effectiveMaxTs returns an indexed batch's effective max timestamp.
func (s *state) effectiveMaxTs(e *runEntry) int64 {
	return effectiveMaxTs(e.tsType, e.maxTimestamp, s.files[e.file].appendTime)
}

func effectiveMaxTs(tsType int8, maxTs, appendTime int64) int64 {
	if tsType == batch.TimestampLogAppendTime {
		return appendTime
	}
	return maxTs
}

func (s *state) applyRecordsDeleted(r *records.RecordsDeleted) error {
	tp := diskless.TopicPartition{TopicID: r.TopicID, Partition: r.Partition}
	p := s.partitions[tp]
	if p == nil {
		return inconsistent("records deleted from unknown partition %s/%d", tp.TopicID, tp.Partition)
	}
	if r.NewLogStartOffset > p.hwm {
		return inconsistent("log start %d above high watermark %d of %s/%d", r.NewLogStartOffset, p.hwm, tp.TopicID, tp.Partition)
	}
	if r.NewLogStartOffset <= p.logStart {
		return nil
	}
	p.logStart = r.NewLogStartOffset
	p.trimTxns()
	// Whole segments below the log start go, then whole runs.
	if ns := len(p.segs); ns > 0 {
		k := sort.Search(ns, func(i int) bool { return p.segs[i].lastOffset >= p.logStart })
		if k > 0 {
			s.dropSegments(p, k)
		}
	}
	x := &p.runs
	k := x.searchOffset(x.len(), p.logStart)
	for i := 0; i < k; {
		run := x.slice(i, k)
		for j := range run {
			p.bytes -= int64(run[j].byteSize)
			s.dropRun(&run[j])
		}
		i += len(run)
	}
	if k > 0 {
		x.dropFront(k, s.effectiveMaxTs)
	}
	for id, ps := range p.producers {
		if ps.lastOffset < p.logStart {
			delete(p.producers, id)
		}
	}
	return nil
}

func (s *state) applyTopicConfig(r *records.TopicConfig) error {
	old := s.topics[r.TopicID]
	switch {
	case r.TopicID == (diskless.TopicID{}):
		return inconsistent("topic %q has the zero id", r.TopicName)
	case old != nil && old.name != r.TopicName:
		return inconsistent("topic id %s renamed from %q to %q", r.TopicID, old.name, r.TopicName)
	case old != nil && r.NumPartitions < old.partitions:
		return inconsistent("topic %q shrinks from %d to %d partitions", r.TopicName, old.partitions, r.NumPartitions)
	case topicconfig.ValidateName(r.TopicName) != nil:
		return inconsistent("invalid topic name %q", r.TopicName)
	case r.NumPartitions < 1 || r.NumPartitions > MaxPartitionsPerTopic:
		return inconsistent("topic %q has %d partitions", r.TopicName, r.NumPartitions)
	}
	if id, ok := s.topicNames[r.TopicName]; ok && old == nil {
		return inconsistent("topic %q created twice (ids %s and %s)", r.TopicName, id, r.TopicID)
	}
	raw := make(map[string]string, len(r.Configs))
	for _, c := range r.Configs {
		raw[c.Name] = c.Value
	}
	cfg, err := topicconfig.Parse(raw)
	if err != nil {
		// Accepted when written; a later version refuses it. Keep the topic
		// serving with default values rather than refusing to start.
		s.logger.Warn("coordinator: stored topic config no longer parses; using defaults",
			"topic", r.TopicName, "err", err)
		cfg = topicconfig.Defaults()
		cfg.Raw = raw
	}
	te := &topicEntry{
		id:         r.TopicID,
		name:       r.TopicName,
		partitions: r.NumPartitions,
		configs:    r.Configs,
		config:     cfg,
	}
	if old != nil {
		// A catalog change (config change, CreatePartitions): the
		// entry is replaced, its diskless state kept. Entries are
		// immutable once published (the snapshot freezes them), so a
		// new one.
		te.disable = old.disable
	}
	s.topics[r.TopicID] = te
	s.topicNames[r.TopicName] = r.TopicID
	return nil
}

func (s *state) applyFileDeleted(r *records.FileDeleted) error {
	fi, ok := s.fileByKey[r.ObjectKey]
	if !ok {
		return inconsistent("deletion of unknown file %q", r.ObjectKey)
	}
	f := &s.files[fi]
	switch {
	case f.closed:
		return inconsistent("file %q deleted twice", r.ObjectKey)
	case f.live > 0:
		return inconsistent("deletion of file %q with %d live batches", r.ObjectKey, f.live)
	case !slices.Contains(s.fileOwners(f), r.DeleterShard) || r.DeleterShard > s.shard:
		return inconsistent("file %q deleted by shard %d, not this or a lower owner", r.ObjectKey, r.DeleterShard)
	}
	f.closed = true
	f.owners = -1
	delete(s.released, fi)
	s.closedQueue = append(s.closedQueue, fi)
	return nil
}

func (s *state) fileState(key string) diskless.FileState {
	fi, ok := s.fileByKey[key]
	if !ok {
		return diskless.FileUnknown
	}
	switch f := &s.files[fi]; {
	case f.closed:
		return diskless.FileClosed
	case f.live > 0:
		return diskless.FileLive
	default:
		return diskless.FileReleased
	}
}

// producerIDBlockSize is how many producer ids one record 105 hands out
// (Kafka's ProducerIdManager block size).
const producerIDBlockSize = 1000

func (s *state) applyProducerIDBlock(r *records.ProducerIDBlock) error {
	if r.FirstProducerID != s.nextProducerID || r.BlockSize < 1 || r.FirstProducerID > math.MaxInt64-int64(r.BlockSize) {
		return inconsistent("producer id block [%d, +%d) does not follow %d", r.FirstProducerID, r.BlockSize, s.nextProducerID)
	}
	s.nextProducerID += int64(r.BlockSize)
	return nil
}
