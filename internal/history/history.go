// Package history records what Kafka clients did against an endpoint —
// records sent, acknowledged at an offset or failed, records consumers
// read — and what a final read of every partition found, and checks that
// the endpoint kept its promises (DESIGN invariants 1, 2 and 4):
//
//   - Lost: every acknowledged record is in the final log.
//   - Moved: it is there at the offset it was acknowledged with.
//   - Duplicated: no record is in the final log more than once (values are
//     unique per history, so a second copy is a duplicate write — e.g. an
//     idempotent producer's retry stored again).
//   - Assigned twice: no offset of a partition was acknowledged, or read,
//     with two different records.
//   - Reordered: per producer and partition, the records in the final log
//     and the acknowledged offsets follow send order.
//   - Vanished: no consumer ever read a record that the final log does not
//     hold at that offset (a read of data that was then lost or replaced),
//     unless the offset is below the final log start offset (removed by
//     retention or DeleteRecords).
//   - Gap: the final log of each partition is dense: every offset from its
//     log start offset to its high watermark holds exactly one record.
//
// Transactions (SPEC §15) change two rules. A final read made with
// read_committed (FinalCommitted) is the committed view: markers and
// aborted records take offsets that the view does not show, so its offsets
// need only increase strictly from the log start offset (Gap otherwise). A
// record whose transaction committed (Commit) must be in the final log once
// even when its acknowledgement was never seen (Lost otherwise), and a
// record whose transaction aborted (Abort) must not be in a committed view:
//
//   - Aborted: a committed view holds a record of an aborted transaction.
//
// A History is fed while the test runs (safe for concurrent use) and
// checked once the final read is in. Records are told apart by their
// value, which the test makes unique; a value sent twice is a test bug and
// Send panics. The package knows no client library: tests adapt their
// client's callbacks to Send, Ack, Fail and Observe.
package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// Partition names one topic partition.
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) String() string { return fmt.Sprintf("%s/%d", p.Topic, p.Partition) }

// Entry is one record of a partition's log: its offset and value.
type Entry struct {
	Offset int64
	Value  string
}

// Kind names the rule a Violation breaks.
type Kind string

// The rules Check enforces (see the package comment).
const (
	Lost          Kind = "lost"
	Moved         Kind = "moved"
	Duplicated    Kind = "duplicated"
	AssignedTwice Kind = "assigned twice"
	Reordered     Kind = "reordered"
	Vanished      Kind = "vanished"
	Gap           Kind = "gap"
	Aborted       Kind = "aborted"
)

// Violation is one broken rule, with a message naming the records and
// offsets involved.
type Violation struct {
	Kind Kind
	Msg  string
}

func (v Violation) String() string { return string(v.Kind) + ": " + v.Msg }

// sent is one record as its producer sent it.
type sent struct {
	producer string
	seq      int64 // send order within the producer
	tp       Partition
	value    string
	acked    bool
	offset   int64 // when acked
	failed   bool
	err      string
	outcome  outcome // of its transaction, when it was in one
}

// outcome is how a record's transaction ended.
type outcome int8

const (
	noTxn outcome = iota
	committed
	aborted
)

// observation is one record a consumer read.
type observation struct {
	consumer string
	tp       Partition
	offset   int64
	value    string
}

// final is a partition's log as the final read found it.
type final struct {
	logStart  int64
	entries   []Entry // in offset order
	committed bool    // a read_committed view: offsets may skip
}

// History is what one test's clients did and saw. The zero value is not
// ready: use New.
type History struct {
	mu struct {
		sync.Mutex
		byValue map[string]*sent
		seqs    map[string]int64 // producer → next seq
		obs     []observation
		finals  map[Partition]*final
	}
}

// New returns an empty history.
func New() *History {
	h := &History{}
	h.mu.byValue = make(map[string]*sent)
	h.mu.seqs = make(map[string]int64)
	h.mu.finals = make(map[Partition]*final)
	return h
}

// Send records that producer sent value to tp; producers send in the order
// of their Send calls (call it before handing the record to the client).
// It panics if value was sent before: values identify records.
func (h *History) Send(producer string, tp Partition, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.mu.byValue[value]; ok {
		panic(fmt.Sprintf("history: value %q sent twice; values must be unique", value))
	}
	seq := h.mu.seqs[producer]
	h.mu.seqs[producer] = seq + 1
	h.mu.byValue[value] = &sent{producer: producer, seq: seq, tp: tp, value: value, offset: -1}
}

// Ack records that the record with value was acknowledged at offset. It
// panics for a value never sent, or acknowledged twice at different
// offsets.
func (h *History) Ack(value string, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.mustSent(value)
	if s.acked && s.offset != offset {
		panic(fmt.Sprintf("history: value %q acknowledged at %d and at %d", value, s.offset, offset))
	}
	s.acked, s.offset = true, offset
}

// Fail records that the record with value was answered with err (it may
// still have been stored: the client does not know).
func (h *History) Fail(value string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.mustSent(value)
	s.failed = true
	if err != nil {
		s.err = err.Error()
	}
}

func (h *History) mustSent(value string) *sent {
	s, ok := h.mu.byValue[value]
	if !ok {
		panic(fmt.Sprintf("history: value %q was never sent", value))
	}
	return s
}

// Observe records that consumer read value at offset of tp, at any time
// during the test.
func (h *History) Observe(consumer string, tp Partition, offset int64, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.obs = append(h.mu.obs, observation{consumer, tp, offset, value})
}

// Final records what the final read of tp found: its log start offset and
// every record from there to its high watermark (entries in any order;
// Check sorts them). Every partition a record was sent to must have one.
func (h *History) Final(tp Partition, logStart int64, entries []Entry) {
	h.final(tp, logStart, entries, false)
}

// FinalCommitted is Final for a read made with read_committed: every record
// from the log start offset to the last stable offset that a read_committed
// consumer returns, without the markers and the aborted records, whose
// offsets it skips (SPEC §15).
func (h *History) FinalCommitted(tp Partition, logStart int64, entries []Entry) {
	h.final(tp, logStart, entries, true)
}

func (h *History) final(tp Partition, logStart int64, entries []Entry, committed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	es := slices.Clone(entries)
	slices.SortStableFunc(es, func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	h.mu.finals[tp] = &final{logStart: logStart, entries: es, committed: committed}
}

// Commit records that the transaction holding the records with values
// committed: each must then be in the final log exactly once, acknowledged
// or not (one never acknowledged is not looked for once the final log start
// offset is past 0: retention may have removed it). It panics for a value never sent or already given an outcome.
func (h *History) Commit(values ...string) { h.end(committed, values) }

// Abort records that the transaction holding the records with values
// aborted: a committed view (FinalCommitted) must not hold them. It panics
// for a value never sent or already given an outcome.
func (h *History) Abort(values ...string) { h.end(aborted, values) }

func (h *History) end(o outcome, values []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range values {
		s := h.mustSent(v)
		if s.outcome != noTxn {
			panic(fmt.Sprintf("history: value %q's transaction ended twice", v))
		}
		s.outcome = o
	}
}

// Counts summarises a history: records sent, acknowledged, failed, and
// consumer reads.
type Counts struct {
	Sent, Acked, Failed, Observed int
}

// Counts returns the history's counts so far.
func (h *History) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := Counts{Sent: len(h.mu.byValue), Observed: len(h.mu.obs)}
	for _, s := range h.mu.byValue {
		if s.acked {
			c.Acked++
		}
		if s.failed {
			c.Failed++
		}
	}
	return c
}

// maxPerKind bounds the violations reported per kind, so that one broken
// run does not print a million lines.
const maxPerKind = 20

// Check verifies every rule of the package comment against the history
// and the final reads, and returns the violations found (nil when none),
// at most 20 per kind plus one line saying how many more there were. A
// partition that records were sent to without a Final is itself reported
// (as Lost).
func (h *History) Check() []Violation {
	h.mu.Lock()
	defer h.mu.Unlock()
	var vs violations

	// The final log: offsets dense (increasing, in a committed view), each
	// value once.
	where := make(map[string]Entry) // value → where the final log holds it
	whereTP := make(map[string]Partition)
	finalAt := make(map[Partition]map[int64]string)
	tps := slices.SortedFunc(maps.Keys(h.mu.finals), func(a, b Partition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, tp := range tps {
		f := h.mu.finals[tp]
		at := make(map[int64]string, len(f.entries))
		finalAt[tp] = at
		next := f.logStart
		for _, e := range f.entries {
			switch {
			case e.Offset < next && e.Offset >= f.logStart:
				vs.add(Gap, "%s: offset %d read twice in the final log (%q and %q)", tp, e.Offset, at[e.Offset], e.Value)
			case e.Offset < f.logStart:
				vs.add(Gap, "%s: offset %d below the log start offset %d in the final log", tp, e.Offset, f.logStart)
			case e.Offset > next && !f.committed:
				vs.add(Gap, "%s: offsets [%d, %d) missing from the final log", tp, next, e.Offset)
			}
			if e.Offset >= next {
				next = e.Offset + 1
			}
			if _, ok := at[e.Offset]; !ok {
				at[e.Offset] = e.Value
			}
			if prev, dup := where[e.Value]; dup {
				vs.add(Duplicated, "%q stored twice: %s@%d and %s@%d", e.Value, whereTP[e.Value], prev.Offset, tp, e.Offset)
				continue
			}
			where[e.Value], whereTP[e.Value] = e, tp
		}
	}

	// Acknowledged records: there, once, where they were acknowledged; no
	// offset acknowledged to two records.
	all := slices.SortedFunc(maps.Values(h.mu.byValue), func(a, b *sent) int {
		return cmp.Or(strings.Compare(a.producer, b.producer), cmp.Compare(a.seq, b.seq))
	})
	ackedAt := make(map[Partition]map[int64]string)
	missingFinal := make(map[Partition]bool)
	for _, s := range all {
		if _, ok := h.mu.finals[s.tp]; !ok {
			if !missingFinal[s.tp] {
				missingFinal[s.tp] = true
				vs.add(Lost, "%s: records were sent to it but it has no final read", s.tp)
			}
			continue
		}
		f := h.mu.finals[s.tp]
		e, ok := where[s.value]
		switch {
		case s.outcome == aborted:
			if ok && whereTP[s.value] == s.tp && f.committed {
				vs.add(Aborted, "%q of an aborted transaction is at %s@%d in the committed view", s.value, s.tp, e.Offset)
			}
			continue
		case s.outcome == committed && !s.acked && !ok && f.logStart == 0:
			vs.add(Lost, "%q of a committed transaction is not in the final log of %s", s.value, s.tp)
			continue
		}
		if !s.acked {
			continue
		}
		m := ackedAt[s.tp]
		if m == nil {
			m = make(map[int64]string)
			ackedAt[s.tp] = m
		}
		if other, ok := m[s.offset]; ok {
			vs.add(AssignedTwice, "%s@%d acknowledged to %q and to %q", s.tp, s.offset, other, s.value)
		} else {
			m[s.offset] = s.value
		}
		switch {
		case !ok && s.offset < f.logStart:
			// Removed with the log's start (retention, DeleteRecords).
		case !ok:
			vs.add(Lost, "%q acknowledged at %s@%d is not in the final log", s.value, s.tp, s.offset)
		case whereTP[s.value] != s.tp || e.Offset != s.offset:
			vs.add(Moved, "%q acknowledged at %s@%d is at %s@%d", s.value, s.tp, s.offset, whereTP[s.value], e.Offset)
		}
	}

	// Per producer and partition: acknowledged offsets and the final log
	// follow send order.
	type key struct {
		producer string
		tp       Partition
	}
	lastAcked := make(map[key]*sent)
	for _, s := range all { // in (producer, seq) order
		if !s.acked {
			continue
		}
		k := key{s.producer, s.tp}
		if p := lastAcked[k]; p != nil && s.offset <= p.offset {
			vs.add(Reordered, "producer %s: %q (sent after %q) acknowledged at %s@%d, not after %d",
				s.producer, s.value, p.value, s.tp, s.offset, p.offset)
		}
		lastAcked[k] = s
	}
	for _, tp := range tps {
		lastSeq := make(map[string]*sent)
		for _, e := range h.mu.finals[tp].entries {
			s, ok := h.mu.byValue[e.Value]
			if !ok || s.tp != tp {
				continue // another writer's record, or one the test did not send here
			}
			if p := lastSeq[s.producer]; p != nil && s.seq < p.seq {
				vs.add(Reordered, "producer %s: %s@%d holds %q, sent before %q which is at an earlier offset",
					s.producer, tp, e.Offset, s.value, p.value)
			}
			lastSeq[s.producer] = s
		}
	}

	// Consumer reads: the final log still holds what was read, where it was
	// read, unless the log start moved past it; no offset read with two
	// values.
	readAt := make(map[Partition]map[int64]string)
	for _, o := range h.mu.obs {
		m := readAt[o.tp]
		if m == nil {
			m = make(map[int64]string)
			readAt[o.tp] = m
		}
		if other, ok := m[o.offset]; ok && other != o.value {
			vs.add(AssignedTwice, "%s@%d read as %q and as %q", o.tp, o.offset, other, o.value)
		} else if !ok {
			m[o.offset] = o.value
		}
		f, ok := h.mu.finals[o.tp]
		if !ok {
			if !missingFinal[o.tp] {
				missingFinal[o.tp] = true
				vs.add(Lost, "%s: consumers read from it but it has no final read", o.tp)
			}
			continue
		}
		if o.offset < f.logStart {
			continue
		}
		if v, ok := finalAt[o.tp][o.offset]; !ok || v != o.value {
			got := "nothing"
			if ok {
				got = fmt.Sprintf("%q", v)
			}
			vs.add(Vanished, "consumer %s read %q at %s@%d; the final log holds %s there", o.consumer, o.value, o.tp, o.offset, got)
		}
	}
	return vs.list()
}

// violations collects violations, at most maxPerKind per kind.
type violations struct {
	items  []Violation
	counts map[Kind]int
}

func (v *violations) add(k Kind, format string, args ...any) {
	if v.counts == nil {
		v.counts = make(map[Kind]int)
	}
	v.counts[k]++
	if v.counts[k] <= maxPerKind {
		v.items = append(v.items, Violation{Kind: k, Msg: fmt.Sprintf(format, args...)})
	}
}

func (v *violations) list() []Violation {
	for _, k := range slices.Sorted(maps.Keys(v.counts)) {
		if n := v.counts[k]; n > maxPerKind {
			v.items = append(v.items, Violation{Kind: k, Msg: fmt.Sprintf("… and %d more", n-maxPerKind)})
		}
	}
	return v.items
}
