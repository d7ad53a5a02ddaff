package group

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// OffsetAndMetadata is one committed offset of a group's partition.
type OffsetAndMetadata struct {
	Offset      int64
	LeaderEpoch int32 // −1: none
	Metadata    string
	// CommitTimestamp is the coordinator's time of the commit, ms.
	CommitTimestamp int64
	// ExpireTimestamp is ms, or −1 (expiry by offsets.retention.minutes).
	ExpireTimestamp int64
	// TopicID is the topic id the commit named (OffsetCommit v10+), else
	// all zero.
	TopicID [16]byte
}

type topicPartition struct {
	topic     string
	partition int32
}

// Offsets is the committed-offsets table of one coordinator shard:
// group → topic → partition → OffsetAndMetadata, plus the offsets of open
// transactions (TxnOffsetCommit, pending until record 110). It is a pure
// function of the records applied to it (Apply) or of a snapshot section
// (DecodeSnapshot): replaying a shard's log rebuilds it exactly (DESIGN
// invariant 6). Not safe for concurrent use; the shard's driver owns it.
type Offsets struct {
	groups map[string]map[string]map[int32]OffsetAndMetadata
	// pending holds the transactional offsets by producer id.
	pending map[int64]*pendingTxn
	// open counts, per group and partition, the producers with a pending
	// offset there (OffsetFetch's UNSTABLE_OFFSET_COMMIT, KIP-447).
	open map[string]map[topicPartition]int
	// byTopic indexes the table by topic: topic → group → the group's
	// committed offsets of the topic plus its pending ones (open's counts),
	// so record 113 finds the groups holding offsets of a deleted topic
	// without visiting the others. Derived: never encoded.
	byTopic map[string]map[string]int
	n       int // committed offsets held
	// ended is the offsets' guard (DESIGN §Transactions, the offsets'
	// token): per producer id, the largest token of the records 110 that
	// ended its transactions here (TxnSeq and Timestamp not 0) and the
	// time of the last one. A record 107 of the producer whose token is
	// not above it was checked while its transaction was open and
	// reaches the shard after that transaction ended here: it is refused
	// (reached). An entry lasts expirationMs from its time, as producer
	// state does, and is swept once the clock passed that.
	ended map[int64]endedTokens
	// clock is the largest Timestamp of the records 110 applied (ms; 0:
	// none): the time the entries are swept by (tick).
	clock int64
	// expirationMs is producer.id.expiration.ms (SetProducerIDExpiration);
	// configuration, not state: never encoded.
	expirationMs int64
}

// endedTokens is one producer's entry of the offsets' guard: the largest
// token of its records 110 here and the latest of their times (ms).
type endedTokens struct {
	seq int64
	at  int64
}

// DefaultProducerIDExpirationMs is how long a table remembers a
// producer's ended token unless SetProducerIDExpiration says otherwise:
// Kafka's producer.id.expiration.ms default, one day.
const DefaultProducerIDExpirationMs int64 = 86_400_000

// endedSweepIntervalMs is how far the clock moves between two sweeps of
// the ended tokens: the period of the partitions' producer-state sweep
// (coordinator's producerSweepIntervalMs), as the entries expire with
// producer state.
const endedSweepIntervalMs = 60_000

type pendingTxn struct {
	epoch int16
	// seq is the largest token of the records 107 that wrote the pending
	// offsets (OffsetCommitRecord.TxnSeq): the producer's transaction they
	// belong to; 0 when none carried one.
	seq     int64
	offsets map[string]map[topicPartition]OffsetAndMetadata
}

// NewOffsets returns an empty table.
func NewOffsets() *Offsets {
	return &Offsets{
		groups:  make(map[string]map[string]map[int32]OffsetAndMetadata),
		pending: make(map[int64]*pendingTxn),
		open:    make(map[string]map[topicPartition]int),
		byTopic: make(map[string]map[string]int),
		ended:   make(map[int64]endedTokens),

		expirationMs: DefaultProducerIDExpirationMs,
	}
}

// SetProducerIDExpiration sets how long the table remembers a producer's
// ended token after the record 110 that ended it: producer.id.expiration.ms,
// ms, at least 1 (else ignored). The shard sets it on every table it
// creates or decodes before applying records to it: replay then refuses
// and forgets what the live table did.
func (o *Offsets) SetProducerIDExpiration(ms int64) {
	if ms > 0 {
		o.expirationMs = ms
	}
}

// reached reports whether the offsets' guard refuses a record 107 of
// producer pid with token seq written at t (ms): a record 110 here ended
// the producer's transaction seq or a later one, not expirationMs before
// t. A token below 1 (not known) is never refused.
func (o *Offsets) reached(pid, seq, t int64) bool {
	if seq <= 0 {
		return false
	}
	e, ok := o.ended[pid]
	return ok && t-e.at < o.expirationMs && seq <= e.seq
}

// tick moves the clock to t (ms) if later, sweeping the entries expired
// at t whenever it enters a new sweep interval: the entries kept are a
// function of the records applied, whatever the snapshots between them
// (the clock is in the snapshot).
func (o *Offsets) tick(t int64) {
	if t <= o.clock {
		return
	}
	if t/endedSweepIntervalMs != o.clock/endedSweepIntervalMs {
		for pid, e := range o.ended {
			if t-e.at >= o.expirationMs {
				delete(o.ended, pid)
			}
		}
	}
	o.clock = t
}

// remember adds a record 110's token to the offsets' guard: its
// producer's transactions up to TxnSeq ended here at Timestamp. A record
// without either (written before them) adds nothing.
func (o *Offsets) remember(r *TxnOffsetsEndedRecord) {
	if r.TxnSeq <= 0 || r.Timestamp <= 0 {
		return
	}
	o.tick(r.Timestamp)
	e := o.ended[r.ProducerID]
	o.ended[r.ProducerID] = endedTokens{seq: max(e.seq, r.TxnSeq), at: max(e.at, r.Timestamp)}
}

// index adds d to the count of the group's offsets of topic in byTopic.
func (o *Offsets) index(topic, group string, d int) {
	m := o.byTopic[topic]
	if m == nil {
		m = make(map[string]int)
		o.byTopic[topic] = m
	}
	m[group] += d
	if m[group] <= 0 {
		delete(m, group)
		if len(m) == 0 {
			delete(o.byTopic, topic)
		}
	}
}

// Empty reports whether the table holds nothing, committed, pending or
// of its guard (a shard then writes no snapshot section for it).
func (o *Offsets) Empty() bool { return !o.HoldsOffsets() && o.clock == 0 }

// HoldsOffsets reports whether the table holds offsets, committed or
// pending; the offsets' guard is not offsets.
func (o *Offsets) HoldsOffsets() bool { return len(o.groups) > 0 || len(o.pending) > 0 }

// Len returns the number of committed offsets held (pending ones excluded).
func (o *Offsets) Len() int { return o.n }

// Apply applies one record (107 … 110, 113). Every well-formed record applies:
// deleting what is not there, or ending a transaction with no pending
// offset, changes nothing; a commit replaces the partition's offset. A
// record 110 whose token (TxnSeq) is below the token of the producer's
// pending offsets changes nothing either: it ends an earlier transaction
// of the producer — written again by a coordinator that lost the id's
// shard while completing it, after the new owner completed it and the
// producer's next transaction committed offsets (DESIGN §Transactions) —
// and must not end the next one's. A token equal or above, or 0 on either
// side (records written before the token), ends them.
//
// The offsets' guard: a record 110 with a token and a time makes the
// table remember, for producer.id.expiration.ms from that time, that the
// producer's transactions up to that token ended here; a record 107 of
// the producer with a token not above it, committed (CommitTimestamp)
// within that time, changes nothing — its transaction ended here before
// it was written, and TxnOffsetCommit refuses it (Coordinator.
// CommitTxnOffsets), so only a log written without the guard holds one.
func (o *Offsets) Apply(rec Record) {
	switch r := rec.(type) {
	case *OffsetCommitRecord:
		o.applyCommit(r)
	case *OffsetsDeletedRecord:
		for i := range r.Topics {
			t := &r.Topics[i]
			for _, p := range t.Partitions {
				o.delete(r.Group, t.Name, p)
			}
		}
	case *GroupDeletedRecord:
		o.deleteGroup(r.Group)
	case *TxnOffsetsEndedRecord:
		o.endTxn(r)
	case *TopicOffsetsDeletedRecord:
		o.deleteTopic(r.TopicName)
	default:
		panic(fmt.Sprintf("group: Apply of unknown record %T", rec))
	}
}

func (o *Offsets) applyCommit(r *OffsetCommitRecord) {
	if r.ProducerID >= 0 {
		if o.reached(r.ProducerID, r.TxnSeq, r.CommitTimestamp) {
			return
		}
		txn := o.pending[r.ProducerID]
		if txn == nil {
			txn = &pendingTxn{offsets: make(map[string]map[topicPartition]OffsetAndMetadata)}
			o.pending[r.ProducerID] = txn
		}
		txn.epoch = r.ProducerEpoch
		txn.seq = max(txn.seq, r.TxnSeq)
		byTP := txn.offsets[r.Group]
		if byTP == nil {
			byTP = make(map[topicPartition]OffsetAndMetadata)
			txn.offsets[r.Group] = byTP
		}
		for i := range r.Topics {
			t := &r.Topics[i]
			for j := range t.Partitions {
				p := &t.Partitions[j]
				tp := topicPartition{t.Name, p.Partition}
				if _, ok := byTP[tp]; !ok {
					o.addOpen(r.Group, tp, 1)
				}
				byTP[tp] = offsetOf(r, t, p)
			}
		}
		return
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			o.put(r.Group, t.Name, p.Partition, offsetOf(r, t, p))
		}
	}
}

func offsetOf(r *OffsetCommitRecord, t *CommitTopic, p *CommitPartition) OffsetAndMetadata {
	return OffsetAndMetadata{
		Offset:          p.Offset,
		LeaderEpoch:     p.LeaderEpoch,
		Metadata:        p.Metadata,
		CommitTimestamp: r.CommitTimestamp,
		ExpireTimestamp: p.ExpireTimestamp,
		TopicID:         t.TopicID,
	}
}

func (o *Offsets) put(group, topic string, partition int32, v OffsetAndMetadata) {
	topics := o.groups[group]
	if topics == nil {
		topics = make(map[string]map[int32]OffsetAndMetadata)
		o.groups[group] = topics
	}
	parts := topics[topic]
	if parts == nil {
		parts = make(map[int32]OffsetAndMetadata)
		topics[topic] = parts
	}
	if _, ok := parts[partition]; !ok {
		o.n++
		o.index(topic, group, 1)
	}
	parts[partition] = v
}

func (o *Offsets) delete(group, topic string, partition int32) {
	if parts := o.groups[group][topic]; parts != nil {
		if _, ok := parts[partition]; ok {
			delete(parts, partition)
			o.n--
			o.index(topic, group, -1)
			if len(parts) == 0 {
				delete(o.groups[group], topic)
				if len(o.groups[group]) == 0 {
					delete(o.groups, group)
				}
			}
		}
	}
	// Kafka's tombstone removes a pending transactional offset too.
	tp := topicPartition{topic, partition}
	if o.open[group][tp] == 0 {
		return
	}
	for pid, txn := range o.pending {
		if byTP := txn.offsets[group]; byTP != nil {
			if _, ok := byTP[tp]; ok {
				delete(byTP, tp)
				o.addOpen(group, tp, -1)
				o.dropEmpty(pid, group)
			}
		}
	}
}

func (o *Offsets) deleteGroup(group string) {
	for topic, parts := range o.groups[group] {
		o.n -= len(parts)
		o.index(topic, group, -len(parts))
	}
	delete(o.groups, group)
	if len(o.open[group]) == 0 {
		return
	}
	for tp, k := range o.open[group] {
		o.index(tp.topic, group, -k)
	}
	for pid, txn := range o.pending {
		if _, ok := txn.offsets[group]; ok {
			delete(txn.offsets, group)
			o.dropEmpty(pid, group)
		}
	}
	delete(o.open, group)
}

func (o *Offsets) dropEmpty(pid int64, group string) {
	txn := o.pending[pid]
	if len(txn.offsets[group]) == 0 {
		delete(txn.offsets, group)
	}
	if len(txn.offsets) == 0 {
		delete(o.pending, pid)
	}
}

func (o *Offsets) addOpen(group string, tp topicPartition, d int) {
	o.index(tp.topic, group, d)
	m := o.open[group]
	if m == nil {
		m = make(map[topicPartition]int)
		o.open[group] = m
	}
	m[tp] += d
	if m[tp] <= 0 {
		delete(m, tp)
		if len(m) == 0 {
			delete(o.open, group)
		}
	}
}

func (o *Offsets) endTxn(r *TxnOffsetsEndedRecord) {
	o.remember(r)
	txn := o.pending[r.ProducerID]
	if txn == nil || r.TxnSeq != 0 && r.TxnSeq < txn.seq {
		return
	}
	delete(o.pending, r.ProducerID)
	for _, group := range slices.Sorted(maps.Keys(txn.offsets)) {
		byTP := txn.offsets[group]
		for tp, v := range byTP {
			o.addOpen(group, tp, -1)
			if r.Committed {
				o.put(group, tp.topic, tp.partition, v)
			}
		}
	}
}

// deleteTopic removes every group's offsets of topic, committed and
// pending (record 113), visiting only the groups byTopic names.
func (o *Offsets) deleteTopic(topic string) {
	for _, group := range slices.Sorted(maps.Keys(o.byTopic[topic])) {
		for p := range o.groups[group][topic] {
			o.delete(group, topic, p)
		}
		for tp := range o.open[group] {
			if tp.topic == topic {
				o.delete(group, topic, tp.partition)
			}
		}
	}
}

// HasTopic reports whether any group holds an offset, committed or
// pending, of topic.
func (o *Offsets) HasTopic(topic string) bool { return len(o.byTopic[topic]) > 0 }

// TopicNames returns the topics some group holds offsets of, sorted.
func (o *Offsets) TopicNames() []string { return slices.Sorted(maps.Keys(o.byTopic)) }

// GroupsOfTopic returns the groups holding offsets of topic, sorted.
func (o *Offsets) GroupsOfTopic(topic string) []string {
	return slices.Sorted(maps.Keys(o.byTopic[topic]))
}

// Get returns the committed offset of a group's partition.
func (o *Offsets) Get(group, topic string, partition int32) (OffsetAndMetadata, bool) {
	v, ok := o.groups[group][topic][partition]
	return v, ok
}

// HasPending reports whether an open transaction holds an offset for the
// group's partition (OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT for it, KIP-447).
func (o *Offsets) HasPending(group, topic string, partition int32) bool {
	return o.open[group][topicPartition{topic, partition}] > 0
}

// HasGroup reports whether the group holds committed or pending offsets.
func (o *Offsets) HasGroup(group string) bool {
	return len(o.groups[group]) > 0 || len(o.open[group]) > 0
}

// HasPendingGroup reports whether an open transaction holds offsets of the
// group.
func (o *Offsets) HasPendingGroup(group string) bool { return len(o.open[group]) > 0 }

// Groups returns the ids of the groups that hold offsets, sorted.
func (o *Offsets) Groups() []string {
	ids := make([]string, 0, len(o.groups)+len(o.open))
	for g := range o.groups {
		ids = append(ids, g)
	}
	for g := range o.open {
		if _, ok := o.groups[g]; !ok {
			ids = append(ids, g)
		}
	}
	slices.Sort(ids)
	return ids
}

// Topics returns the topics the group has committed offsets for, sorted.
func (o *Offsets) Topics(group string) []string {
	return slices.Sorted(maps.Keys(o.groups[group]))
}

// Partitions returns the partitions of a topic the group has committed
// offsets for, sorted.
func (o *Offsets) Partitions(group, topic string) []int32 {
	return slices.Sorted(maps.Keys(o.groups[group][topic]))
}

// snapshotVersion is the version of the offsets snapshot section.
const snapshotVersion = 1

// AppendSnapshot appends the table as a snapshot section to dst: uvarint
// section version 1, then groups, topics, partitions and pending
// transactions (each with its token as tagged field 0 when not 0) in
// sorted order, then the offsets' guard as the section's tagged field 0
// when its clock is not 0, so equal tables have equal bytes
// (docs/format/metadata-records.md §Consumer-group offsets in snapshots).
// A section written before the guard has no tag 0: nothing remembered.
func (o *Offsets) AppendSnapshot(dst []byte) []byte {
	dst = kbin.AppendUvarint(dst, snapshotVersion)
	groups := slices.Sorted(maps.Keys(o.groups))
	dst = kbin.AppendCompactArrayLen(dst, len(groups))
	for _, g := range groups {
		dst = kbin.AppendCompactString(dst, g)
		topics := slices.Sorted(maps.Keys(o.groups[g]))
		dst = kbin.AppendCompactArrayLen(dst, len(topics))
		for _, t := range topics {
			parts := o.groups[g][t]
			dst = kbin.AppendCompactString(dst, t)
			dst = kbin.AppendCompactArrayLen(dst, len(parts))
			for _, p := range slices.Sorted(maps.Keys(parts)) {
				dst = appendOffset(dst, p, parts[p])
			}
			dst = tagged.AppendNone(dst)
		}
		dst = tagged.AppendNone(dst)
	}
	pids := slices.Sorted(maps.Keys(o.pending))
	dst = kbin.AppendCompactArrayLen(dst, len(pids))
	for _, pid := range pids {
		txn := o.pending[pid]
		dst = kbin.AppendInt64(dst, pid)
		dst = kbin.AppendInt16(dst, txn.epoch)
		groups := slices.Sorted(maps.Keys(txn.offsets))
		dst = kbin.AppendCompactArrayLen(dst, len(groups))
		for _, g := range groups {
			byTP := txn.offsets[g]
			dst = kbin.AppendCompactString(dst, g)
			tps := slices.SortedFunc(maps.Keys(byTP), func(a, b topicPartition) int {
				return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
			})
			dst = kbin.AppendCompactArrayLen(dst, len(tps))
			for _, tp := range tps {
				dst = kbin.AppendCompactString(dst, tp.topic)
				dst = appendOffset(dst, tp.partition, byTP[tp])
			}
			dst = tagged.AppendNone(dst)
		}
		dst = appendSeqTag(dst, txn.seq)
	}
	return o.appendGuardTag(dst)
}

// appendGuardTag appends the section's tagged fields: tag 0, the
// offsets' guard — the clock, then the ended tokens by producer id —,
// written only when the clock is not 0.
func (o *Offsets) appendGuardTag(dst []byte) []byte {
	if o.clock == 0 {
		return tagged.AppendNone(dst)
	}
	f := kbin.AppendInt64(nil, o.clock)
	pids := slices.Sorted(maps.Keys(o.ended))
	f = kbin.AppendCompactArrayLen(f, len(pids))
	for _, pid := range pids {
		e := o.ended[pid]
		f = kbin.AppendInt64(f, pid)
		f = kbin.AppendInt64(f, e.seq)
		f = kbin.AppendInt64(f, e.at)
		f = tagged.AppendNone(f)
	}
	return append(tagged.AppendOne(dst, 0, len(f)), f...)
}

// readGuardTag reads the section's tagged fields appendGuardTag wrote;
// other tags are skipped.
func (o *Offsets) readGuardTag(r *kbin.Reader) error {
	err := tagged.Each(r, func(tag uint32, v []byte) error {
		if tag != 0 {
			return nil
		}
		return o.readGuard(&kbin.Reader{Src: v})
	})
	if err != nil {
		return fmt.Errorf("tagged field 0 (ended tokens): %w", err)
	}
	return okOrTruncated(r)
}

func (o *Offsets) readGuard(r *kbin.Reader) error {
	o.clock = r.Int64()
	if err := okOrTruncated(r); err != nil {
		return err
	}
	if o.clock <= 0 {
		return fmt.Errorf("clock %d", o.clock)
	}
	n, err := readArrayLen(r, 8+8+8+1)
	if err != nil {
		return err
	}
	prev := int64(-1)
	for range n {
		pid, seq, at := r.Int64(), r.Int64(), r.Int64()
		kmsg.SkipTags(r)
		if err := okOrTruncated(r); err != nil {
			return err
		}
		switch {
		case pid <= prev:
			return fmt.Errorf("producer id %d out of order", pid)
		case seq <= 0:
			return fmt.Errorf("producer id %d token %d", pid, seq)
		case at <= 0 || at > o.clock:
			return fmt.Errorf("producer id %d time %d (clock %d)", pid, at, o.clock)
		}
		prev = pid
		o.ended[pid] = endedTokens{seq: seq, at: at}
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%d bytes left", len(r.Src))
	}
	return nil
}

const offsetMinSize = 4 + 8 + 4 + 1 + 8 + 8 + 16 + 1

func appendOffset(dst []byte, partition int32, v OffsetAndMetadata) []byte {
	dst = kbin.AppendInt32(dst, partition)
	dst = kbin.AppendInt64(dst, v.Offset)
	dst = kbin.AppendInt32(dst, v.LeaderEpoch)
	dst = kbin.AppendCompactString(dst, v.Metadata)
	dst = kbin.AppendInt64(dst, v.CommitTimestamp)
	dst = kbin.AppendInt64(dst, v.ExpireTimestamp)
	dst = kbin.AppendUuid(dst, v.TopicID)
	return tagged.AppendNone(dst)
}

func readOffset(r *kbin.Reader) (int32, OffsetAndMetadata, error) {
	var v OffsetAndMetadata
	p := r.Int32()
	v.Offset = r.Int64()
	v.LeaderEpoch = r.Int32()
	var err error
	if v.Metadata, err = readString(r); err != nil {
		return 0, v, err
	}
	v.CommitTimestamp = r.Int64()
	v.ExpireTimestamp = r.Int64()
	v.TopicID = r.Uuid()
	kmsg.SkipTags(r)
	if err := okOrTruncated(r); err != nil {
		return 0, v, err
	}
	if p < 0 {
		return 0, v, fmt.Errorf("partition %d", p)
	}
	return p, v, nil
}

// DecodeSnapshot decodes a section written by AppendSnapshot from the front
// of b and returns the table and the bytes after the section. Errors wrap
// ErrBadRecord: a truncated section, an unknown version, a null string or
// array, names out of order or repeated, an empty group or topic.
func DecodeSnapshot(b []byte) (*Offsets, []byte, error) {
	o := NewOffsets()
	r := kbin.Reader{Src: b}
	if err := o.readSnapshot(&r); err != nil {
		return nil, nil, fmt.Errorf("%w: offsets snapshot: %v", ErrBadRecord, err)
	}
	return o, r.Src, nil
}

func (o *Offsets) readSnapshot(r *kbin.Reader) error {
	v := r.Uvarint()
	if !r.Ok() {
		return errTruncated
	}
	if v != snapshotVersion {
		return fmt.Errorf("version %d, want %d", v, snapshotVersion)
	}
	ng, err := readArrayLen(r, 3)
	if err != nil {
		return err
	}
	prevGroup := ""
	for range ng {
		g, err := readString(r)
		if err != nil {
			return err
		}
		if g <= prevGroup {
			return fmt.Errorf("group %q out of order", g)
		}
		prevGroup = g
		nt, err := readArrayLen(r, 3)
		if err != nil {
			return err
		}
		if nt == 0 {
			return fmt.Errorf("group %q without offsets", g)
		}
		prevTopic := ""
		for range nt {
			t, err := readString(r)
			if err != nil {
				return err
			}
			if t <= prevTopic {
				return fmt.Errorf("group %q topic %q out of order", g, t)
			}
			prevTopic = t
			np, err := readArrayLen(r, offsetMinSize)
			if err != nil {
				return err
			}
			if np == 0 {
				return fmt.Errorf("group %q topic %q without offsets", g, t)
			}
			prevPart := int32(-1)
			for range np {
				p, v, err := readOffset(r)
				if err != nil {
					return err
				}
				if p <= prevPart {
					return fmt.Errorf("group %q topic %q partition %d out of order", g, t, p)
				}
				prevPart = p
				o.put(g, t, p, v)
			}
			kmsg.SkipTags(r)
		}
		kmsg.SkipTags(r)
	}
	npid, err := readArrayLen(r, 8+2+1+1)
	if err != nil {
		return err
	}
	prevPID := int64(-1)
	for range npid {
		pid := r.Int64()
		epoch := r.Int16()
		if err := okOrTruncated(r); err != nil {
			return err
		}
		if pid <= prevPID {
			return fmt.Errorf("producer id %d out of order", pid)
		}
		prevPID = pid
		ngrp, err := readArrayLen(r, 3)
		if err != nil {
			return err
		}
		if ngrp == 0 {
			return fmt.Errorf("producer id %d without offsets", pid)
		}
		txn := &pendingTxn{epoch: epoch, offsets: make(map[string]map[topicPartition]OffsetAndMetadata, ngrp)}
		o.pending[pid] = txn
		prevGroup := ""
		for range ngrp {
			g, err := readString(r)
			if err != nil {
				return err
			}
			if g <= prevGroup {
				return fmt.Errorf("producer id %d group %q out of order", pid, g)
			}
			prevGroup = g
			ntp, err := readArrayLen(r, 1+offsetMinSize)
			if err != nil {
				return err
			}
			if ntp == 0 {
				return fmt.Errorf("producer id %d group %q without offsets", pid, g)
			}
			byTP := make(map[topicPartition]OffsetAndMetadata, ntp)
			txn.offsets[g] = byTP
			var prev topicPartition
			for k := range ntp {
				t, err := readString(r)
				if err != nil {
					return err
				}
				p, v, err := readOffset(r)
				if err != nil {
					return err
				}
				tp := topicPartition{t, p}
				if k > 0 && cmp.Or(cmp.Compare(tp.topic, prev.topic), cmp.Compare(tp.partition, prev.partition)) <= 0 {
					return fmt.Errorf("producer id %d group %q partition %s-%d out of order", pid, g, t, p)
				}
				prev = tp
				byTP[tp] = v
				o.addOpen(g, tp, 1)
			}
			kmsg.SkipTags(r)
		}
		if txn.seq, err = readSeqTag(r); err != nil {
			return err
		}
		if txn.seq < 0 {
			return fmt.Errorf("producer id %d transaction token %d", pid, txn.seq)
		}
	}
	if err := o.readGuardTag(r); err != nil {
		return err
	}
	if prevGroup == "" && ng > 0 {
		return errors.New("empty group id")
	}
	return nil
}
