package kafkalog

import (
	"fmt"

	"github.com/diskless-sidecar/sidecar/metalog"
)

// The validity rule (docs/format/metadata-records.md §The Kafka backend;
// DESIGN §Fencing). Every reader of a shard's partition — a writer's
// replay, its check of its own appends, a later owner, a read replica —
// runs the partition's records through a scanState in offset order, and
// what it delivers is a function of the records up to that offset alone:
//
//   - A claim is effective when its epoch field names the current epoch
//     (−1 while no claim was effective yet): a writer names the epoch it
//     read in force, so a claim is a compare-and-set that fails when
//     another claim landed between the writer's read and its own, and a
//     claim that lands late (its produce failed and was retried, or a
//     dead process's) never takes effect. The current epoch then becomes
//     the claim's own offset, and a group left incomplete by the epoch
//     before is dropped (a torn group: its Append never returned nil).
//   - A metadata record or snapshot pointer counts only when its epoch is
//     the current one; any other (a fenced writer's, written after the
//     claim that fenced it) is skipped.
//   - The counted records form groups: parts in order, indexes dense from
//     the next index, the group's last Kafka record flagged. A group is
//     delivered when its last record is read. A pointer counts only
//     between groups, at the next index. Anything else (a duplicate, a
//     part missing, a late record of an Append that failed) breaks the
//     epoch's run: nothing more of that epoch counts until the next
//     effective claim. A correct writer never appends after a failed
//     Append without claiming again, so what a break skips was never
//     acknowledged.

// scanState is the rule's state at one offset: everything a scan that
// starts there needs to know of what came before.
type scanState struct {
	// epoch is the current epoch: the offset of the latest effective
	// claim, or −1 (noEpoch) before the first one (nothing counts yet).
	epoch int64
	// owner is the writer id of the claim that began epoch (ownerKnown:
	// there is one, and the scan read it or a pointer of its epoch).
	owner      [writerIDSize]byte
	ownerKnown bool
	// next is the index the next delivered record has.
	next int64
	// broken: the epoch's run broke; nothing of epoch counts any more.
	broken bool
}

// pendingRecord is a complete metadata record of the pending group.
type pendingRecord struct {
	index  int64
	body   []byte
	offset int64 // of its last part
}

// scanner applies the validity rule to records fed in offset order
// (add); the callbacks, all optional, learn what it decides.
type scanner struct {
	st scanState
	// needPointer: the scan starts at a log start offset above 0, where
	// the first record must be the snapshot pointer the log was truncated
	// before: its key gives the state there.
	needPointer bool
	// began is the index of the first record the scan can deliver: where
	// its state is known from.
	began int64
	// pending holds the records of the group being read, part the parts
	// of its record being read.
	pending   []pendingRecord
	part      []byte
	partIndex int64 // −1: no record in parts
	partNext  uint32
	partOf    uint32
	// firstOffset is the offset of the pending group's first Kafka record.
	firstOffset int64

	// group is called with each delivered group: its records (bodies
	// valid during the call) and the offsets of its first and last Kafka
	// records.
	group func(recs []pendingRecord, first, last int64) error
	// pointerSeen is called with each counted snapshot pointer.
	pointerSeen func(p pointer)
	// claimSeen is called with each claim, effective or not.
	claimSeen func(offset int64, c claimValue, effective bool)
	// dropped is called when a torn group or a broken run's records are
	// dropped, naming why.
	dropped func(offset int64, why string)

	// where names the partition in errors.
	where string
}

// newScanner returns a scanner that starts in state st.
func newScanner(st scanState, where string) *scanner {
	return &scanner{st: st, partIndex: -1, where: where, began: st.next}
}

// fromLogStart returns a scanner starting at the partition's log start
// offset logStart.
func fromLogStart(logStart int64, where string) *scanner {
	s := newScanner(scanState{epoch: -1}, where)
	s.needPointer = logStart > 0
	return s
}

// fromPointer returns a scanner starting at p's offset, knowing the state
// there: p counted, so its epoch was current (its writer the epoch's
// owner), no group was pending, and the next index was p's.
func fromPointer(p pointer, where string) *scanner {
	return newScanner(pointerState(p), where)
}

func pointerState(p pointer) scanState {
	return scanState{epoch: p.epoch, owner: p.writer, ownerKnown: true, next: p.index}
}

func (s *scanner) corrupt(offset int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s, offset %d: %s", metalog.ErrCorrupt, s.where, offset, fmt.Sprintf(format, args...))
}

// add applies the rule to the Kafka record at offset. Errors: ErrCorrupt
// for a record no writer of this format writes (a foreign or undecodable
// key, a counted pointer or any claim whose value does not decode, a
// truncated log that does not start with a pointer); the callbacks'.
func (s *scanner) add(offset int64, key, value []byte) error {
	k, err := decodeKey(key)
	if err != nil {
		return s.corrupt(offset, "%v", err)
	}
	if s.needPointer {
		if k.kind != kindSnapshot {
			return s.corrupt(offset, "the log was truncated, and its first record is not a snapshot pointer (kind %d)", k.kind)
		}
		// Only a counted pointer is ever truncated before (TruncateBefore),
		// so its epoch was current and its index next there.
		p, err := decodePointer(k, offset, value)
		if err != nil {
			return s.corrupt(offset, "%v", err)
		}
		s.st = pointerState(p)
		s.needPointer, s.began = false, k.index
	}
	if k.kind == kindClaim {
		c, err := decodeClaim(value)
		if err != nil {
			return s.corrupt(offset, "%v", err)
		}
		effective := k.epoch == s.st.epoch
		if effective {
			if s.hasPending() {
				s.drop(offset, fmt.Sprintf("the group from offset %d never ended: its Append failed (dropped at the claim at offset %d)", s.firstOffset, offset))
			}
			s.st = scanState{epoch: offset, owner: c.writer, ownerKnown: true, next: s.st.next}
		}
		if s.claimSeen != nil {
			s.claimSeen(offset, c, effective)
		}
		return nil
	}
	if k.epoch != s.st.epoch || s.st.broken {
		return nil // a fenced writer's, or after a break
	}
	if k.kind == kindSnapshot {
		if s.hasPending() || k.index != s.st.next {
			s.brk(offset, fmt.Sprintf("snapshot pointer at record %d, the next record is %d", k.index, s.st.next))
			return nil
		}
		p, err := decodePointer(k, offset, value)
		if err != nil {
			return s.corrupt(offset, "%v", err)
		}
		if s.pointerSeen != nil {
			s.pointerSeen(p)
		}
		return nil
	}
	// A part of a metadata record.
	want := s.st.next + int64(len(s.pending))
	switch {
	case s.partIndex >= 0 && (k.index != s.partIndex || k.part != s.partNext || k.parts != s.partOf):
		s.brk(offset, fmt.Sprintf("part %d of %d of record %d, expected part %d of %d of record %d", k.part, k.parts, k.index, s.partNext, s.partOf, s.partIndex))
		return nil
	case s.partIndex < 0 && (k.index != want || k.part != 0):
		s.brk(offset, fmt.Sprintf("part %d of record %d, expected record %d", k.part, k.index, want))
		return nil
	case k.flags&flagGroupEnd != 0 && k.part != k.parts-1:
		s.brk(offset, fmt.Sprintf("the group ends at part %d of %d of record %d", k.part, k.parts, k.index))
		return nil
	}
	if !s.hasPending() {
		s.firstOffset = offset
	}
	body := value
	if k.parts > 1 {
		if k.part == 0 {
			s.part, s.partIndex, s.partOf = s.part[:0], k.index, k.parts
		}
		s.part = append(s.part, value...)
		s.partNext = k.part + 1
		if s.partNext < k.parts {
			return nil
		}
		body = s.part
		s.part, s.partIndex = nil, -1 // the body keeps the buffer
	}
	if len(body) == 0 || len(body) > metalog.MaxRecordBytes {
		s.brk(offset, fmt.Sprintf("record %d of %d bytes", k.index, len(body)))
		return nil
	}
	s.pending = append(s.pending, pendingRecord{index: k.index, body: body, offset: offset})
	if k.flags&flagGroupEnd == 0 {
		return nil
	}
	recs := s.pending
	s.pending = s.pending[:0]
	s.st.next += int64(len(recs))
	if s.group != nil {
		return s.group(recs, s.firstOffset, offset)
	}
	return nil
}

func (s *scanner) hasPending() bool { return len(s.pending) > 0 || s.partIndex >= 0 }

// brk breaks the current epoch's run at offset.
func (s *scanner) brk(offset int64, why string) {
	if s.hasPending() {
		why = fmt.Sprintf("%s; the group from offset %d is dropped", why, s.firstOffset)
	}
	s.drop(offset, "nothing more of epoch "+fmt.Sprint(s.st.epoch)+" counts: "+why)
	s.st.broken = true
}

func (s *scanner) drop(offset int64, why string) {
	s.pending, s.part, s.partIndex = s.pending[:0], nil, -1
	if s.dropped != nil {
		s.dropped(offset, why)
	}
}

// clean reports whether the scan stands between groups of a run that has
// not broken: where a writer continues.
func (s *scanner) clean() bool { return !s.hasPending() && !s.st.broken && !s.needPointer }
