package txn

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// Table is the state of the transactional ids of one shard: for each, the
// last record 118 applied. It is a pure function of the records applied
// (Apply) and of its snapshot section (AppendSnapshot, DecodeSnapshot).
// Not safe for concurrent use: the shard's driver changes it, readers
// hold the shard's lock.
type Table struct {
	ids map[string]*StateRecord
	// epoch is the largest CoordinatorEpoch of the records applied, those
	// of removed ids included; −1: none carried one.
	epoch int32
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{ids: make(map[string]*StateRecord), epoch: -1} }

// Apply applies one durable record 118: it becomes the id's state, or, in
// state Dead, removes the id. rec must not be changed afterwards.
func (t *Table) Apply(rec *StateRecord) {
	t.epoch = max(t.epoch, rec.CoordinatorEpoch)
	if rec.State == Dead {
		delete(t.ids, rec.TransactionalID)
		return
	}
	t.ids[rec.TransactionalID] = rec
}

// Get returns the state of transactional id id; the caller must not
// change it.
func (t *Table) Get(id string) (*StateRecord, bool) {
	r, ok := t.ids[id]
	return r, ok
}

// All yields the state of every transactional id, by id; the caller must
// not change them.
func (t *Table) All() iter.Seq[*StateRecord] {
	return func(yield func(*StateRecord) bool) {
		for _, id := range slices.Sorted(maps.Keys(t.ids)) {
			if !yield(t.ids[id]) {
				return
			}
		}
	}
}

// Len returns the number of transactional ids.
func (t *Table) Len() int { return len(t.ids) }

// Empty reports whether the table holds nothing: no transactional id and
// no coordinator epoch.
func (t *Table) Empty() bool { return len(t.ids) == 0 && t.epoch == -1 }

// HoldsIDs reports whether the table holds a transactional id.
func (t *Table) HoldsIDs() bool { return len(t.ids) > 0 }

// Epoch returns the largest coordinator epoch of the records applied
// (those of ids removed since included), −1 when none carried one: the
// shard's transaction coordinators so far used no epoch above it.
func (t *Table) Epoch() int32 { return t.epoch }

// Preparing returns the transactions whose outcome is decided and whose
// markers are not all written (PrepareCommit, PrepareAbort), by id.
func (t *Table) Preparing() []*StateRecord {
	var out []*StateRecord
	for _, id := range slices.Sorted(maps.Keys(t.ids)) {
		if r := t.ids[id]; r.State.preparing() {
			out = append(out, r)
		}
	}
	return out
}

// AppendSnapshot appends the table's snapshot section: uvarint section
// version 1, then a compact array of record-118 field sets by
// transactional id ascending, then a tagged-field section — tag 0 the
// coordinator epoch (Epoch) as an int32, written when not −1
// (docs/format/metadata-records.md §Transactions in snapshots). Equal
// tables have equal bytes.
func (t *Table) AppendSnapshot(dst []byte) []byte {
	dst = kbin.AppendUvarint(dst, 1)
	dst = kbin.AppendCompactArrayLen(dst, len(t.ids))
	for _, id := range slices.Sorted(maps.Keys(t.ids)) {
		dst = t.ids[id].appendFields(dst)
	}
	if t.epoch == -1 {
		return tagged.AppendNone(dst)
	}
	return kbin.AppendInt32(tagged.AppendOne(dst, 0, 4), t.epoch)
}

// DecodeSnapshot decodes a section AppendSnapshot wrote and returns the
// table and the bytes after the section. Errors wrap ErrBadRecord: a
// truncated section, another version, a malformed entry, ids out of order
// or repeated.
func DecodeSnapshot(b []byte) (*Table, []byte, error) {
	r := kbin.Reader{Src: b}
	if v := r.Uvarint(); !r.Ok() || v != 1 {
		return nil, nil, fmt.Errorf("%w: transactions snapshot section version %d, want 1", ErrBadRecord, v)
	}
	n, err := readArrayLen(&r, 30)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: transactions snapshot: %v", ErrBadRecord, err)
	}
	t := NewTable()
	last := ""
	for i := range n {
		rec := new(StateRecord)
		if err := rec.readFields(&r); err != nil {
			return nil, nil, fmt.Errorf("%w: transactions snapshot entry %d: %v", ErrBadRecord, i, err)
		}
		if i > 0 && rec.TransactionalID <= last {
			return nil, nil, fmt.Errorf("%w: transactions snapshot: ids out of order", ErrBadRecord)
		}
		if rec.State == Dead {
			return nil, nil, fmt.Errorf("%w: transactions snapshot: a removed id", ErrBadRecord)
		}
		last = rec.TransactionalID
		t.ids[rec.TransactionalID] = rec
		t.epoch = max(t.epoch, rec.CoordinatorEpoch)
	}
	err = tagged.Each(&r, func(tag uint32, v []byte) error {
		if tag != 0 {
			return nil
		}
		if len(v) != 4 {
			return fmt.Errorf("coordinator epoch of %d bytes", len(v))
		}
		e := int32(binary.BigEndian.Uint32(v))
		if e < t.epoch {
			return fmt.Errorf("coordinator epoch %d below its records' %d", e, t.epoch)
		}
		t.epoch = e
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: transactions snapshot: %w", ErrBadRecord, err)
	}
	if !r.Ok() {
		return nil, nil, fmt.Errorf("%w: transactions snapshot: truncated", ErrBadRecord)
	}
	return t, r.Src, nil
}

// exhausted reports whether a producer epoch can no longer be bumped
// (Kafka's TransactionMetadata.isEpochExhausted: epoch ≥ 32766).
func exhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// clone returns a copy of r whose slices may be changed.
func (r *StateRecord) clone() *StateRecord {
	c := *r
	c.Topics = make([]Topic, len(r.Topics))
	for i, t := range r.Topics {
		t.Partitions = slices.Clone(t.Partitions)
		c.Topics[i] = t
	}
	c.Groups = slices.Clone(r.Groups)
	return &c
}

// Contains reports whether partition p of topic id is in r's transaction.
func (r *StateRecord) Contains(id [16]byte, p int32) bool {
	i, ok := slices.BinarySearchFunc(r.Topics, id, compareID)
	if !ok {
		return false
	}
	_, ok = slices.BinarySearch(r.Topics[i].Partitions, p)
	return ok
}

// HasGroup reports whether consumer group g is in r's transaction.
func (r *StateRecord) HasGroup(g string) bool {
	_, ok := slices.BinarySearch(r.Groups, g)
	return ok
}

func compareID(t Topic, id [16]byte) int { return bytes.Compare(t.TopicID[:], id[:]) }

// addTopics adds the partitions of add to r's, keeping the order, and
// reports whether any was new.
func (r *StateRecord) addTopics(add []Topic) bool {
	changed := false
	for _, a := range add {
		i, ok := slices.BinarySearchFunc(r.Topics, a.TopicID, compareID)
		if !ok {
			r.Topics = slices.Insert(r.Topics, i, Topic{TopicID: a.TopicID, Name: a.Name})
		}
		t := &r.Topics[i]
		for _, p := range a.Partitions {
			j, ok := slices.BinarySearch(t.Partitions, p)
			if !ok {
				t.Partitions = slices.Insert(t.Partitions, j, p)
				changed = true
			}
		}
	}
	return changed
}
