package coordinator

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/tagged"
)

// Transactions in partitions (DESIGN §Transactions, SPEC §15). Record 102
// says of each batch whether it is a transactional producer's data or a
// COMMIT or ABORT marker (CommittedBatch.Txn), so a partition's
// transactions are a pure function of its batches, rebuilt by replay like
// its index: the open transactions (producer id → offset of its first
// batch since its last marker), from which the last stable offset follows,
// and the aborted transactions (producer id, first offset, marker offset)
// in marker order, which read_committed fetches list. Both are kept in the
// snapshot (tag snapshotTagPartitionTxns) and bounded by the log start
// offset: an aborted transaction whose marker is below it is dropped.

// partTxns is one partition's transactions; nil while it has none.
type partTxns struct {
	// open maps a producer id to the offset of the first batch of its open
	// transaction in the partition.
	open map[int64]int64
	// aborted are the aborted transactions whose markers are at or past
	// the log start offset, by marker offset (LastOffset).
	aborted []diskless.AbortedTxn
	// ended maps a producer id to what its markers here left: the guard
	// of those that carried a token (CommitBatch.TxnSeq > 0) — a
	// transactional batch of the producer whose token is not above it is
	// refused (txnEnded; DESIGN §Transactions, the hazard) — and the
	// coordinator epoch of the last one — a marker of a lower epoch is
	// refused (coordinatorFenced). An entry exists once a marker with a
	// token or a coordinator epoch ≥ 0 was taken.
	ended map[int64]endedTxn
}

// endedTxn is what one producer's markers left in one partition: the
// largest token of its markers there (0: none carried one), the
// coordinator epoch of the last one (−1: none carried one) and its
// log-append time (ms), which expires the entry as producer state
// expires.
type endedTxn struct {
	seq        int64
	at         int64
	coordEpoch int32
}

// coordinatorFenced reports whether b, a marker to be decided at
// log-append time t, comes from a deposed transaction coordinator: its
// coordinator epoch is below the one its producer's last marker in p
// carried, and that entry has not expired (producer.id.expiration.ms).
// Kafka's partition leader refuses such a marker with
// TRANSACTION_COORDINATOR_FENCED (SPEC §15).
func (s *state) coordinatorFenced(p *partition, b *diskless.CommitBatch, t int64) bool {
	if b.Txn < diskless.TxnCommit || p.txns == nil {
		return false
	}
	e, ok := p.txns.ended[b.ProducerID]
	return ok && t-e.at < s.expirationMs && b.CoordinatorEpoch < e.coordEpoch
}

// markerEpochStale reports whether b, a marker to be decided at
// log-append time t, is of an older producer epoch than its producer's
// state in p, not expired at t: Kafka's partition leader refuses such a
// marker when it appends it (INVALID_PRODUCER_EPOCH, SPEC §15), whatever
// the check WriteTxnMarkers made before — a batch or marker of a newer
// epoch may have been committed since.
func (s *state) markerEpochStale(p *partition, b *diskless.CommitBatch, t int64) bool {
	if b.Txn < diskless.TxnCommit {
		return false
	}
	ps := p.producers[b.ProducerID]
	return ps != nil && !s.expired(ps, t) && b.ProducerEpoch < ps.epoch
}

// coordinatorEpoch returns the coordinator epoch of producer pid's last
// marker in p, −1 when none is kept (DescribeProducers' CoordinatorEpoch).
func (p *partition) coordinatorEpoch(pid int64) int32 {
	if p.txns == nil {
		return -1
	}
	if e, ok := p.txns.ended[pid]; ok {
		return e.coordEpoch
	}
	return -1
}

// txnEnded reports whether the transactional batch b, to be decided at
// log-append time t, belongs to a transaction whose marker p already
// holds: b's token is not above its producer's last marker's here. Such a
// batch was checked while its transaction was open and reaches the shard
// after the transaction ended; committed, it would open a transaction no
// marker ends. A batch without a token (0), and an entry older than the
// producer-state expiration, pass.
func (s *state) txnEnded(p *partition, b *diskless.CommitBatch, t int64) bool {
	return b.Txn == diskless.TxnData && p.reached(b.ProducerID, b.TxnSeq, t, s.expirationMs)
}

// reached reports whether producer pid's transaction guard in p, not
// expired at t (producer.id.expiration.ms expirationMs after its last
// marker), has reached token seq: a marker of pid's with a token of seq
// or more is here. A token below 1 (none) is never reached.
func (p *partition) reached(pid, seq, t, expirationMs int64) bool {
	if seq <= 0 || p.txns == nil {
		return false
	}
	e, ok := p.txns.ended[pid]
	return ok && t-e.at < expirationMs && seq <= e.seq
}

// trackTxn updates p's transactions with b, just indexed at its assigned
// offsets: a transactional batch opens its producer's transaction if none
// is open; a marker closes it, an ABORT adding it to the aborted ones. A
// marker for a producer with no open transaction here (a partition added
// but not written to, or a marker written twice) changes nothing, nor does
// one whose token the producer's guard has reached (p.reached at the
// marker's log-append time, expirationMs being producer.id.expiration.ms):
// the same transaction's marker again, from a coordinator that lost the
// id's shard with its completion in flight or from a retried commit, which
// may come after the producer's next transaction opened here and must not
// end it (DESIGN §Transactions, the hazard). Every marker records its
// coordinator epoch as the producer's (a marker of a lower one was
// refused before it was committed: coordinatorFenced) and its log-append
// time as the entry's, from which the entry expires.
func (p *partition) trackTxn(b *records.CommittedBatch, expirationMs int64) {
	switch b.Txn {
	case diskless.TxnData:
		if p.txns == nil {
			p.txns = &partTxns{}
		}
		if p.txns.open == nil {
			p.txns.open = make(map[int64]int64)
		}
		if _, ok := p.txns.open[b.ProducerID]; !ok {
			p.txns.open[b.ProducerID] = b.AssignedBaseOffset
		}
	case diskless.TxnCommit, diskless.TxnAbort:
		reached := p.reached(b.ProducerID, b.TxnSeq, b.LogAppendTimestamp, expirationMs)
		if b.TxnSeq > 0 || b.CoordinatorEpoch >= 0 {
			// The guard: the producer's batches of this transaction or an
			// earlier one are refused here from now on; its markers of a
			// lower coordinator epoch too.
			if p.txns == nil {
				p.txns = &partTxns{}
			}
			if p.txns.ended == nil {
				p.txns.ended = make(map[int64]endedTxn)
			}
			e, ok := p.txns.ended[b.ProducerID]
			if !ok || b.LogAppendTimestamp-e.at >= expirationMs {
				e = endedTxn{coordEpoch: -1}
			}
			if reached {
				// The same transaction's marker again: its epoch counts,
				// and its time, as Kafka's marker append refreshes its
				// producer entry's (the producer state's lastWrite takes
				// it too: recordProducerMarker), so the entry expires
				// producer.id.expiration.ms after this marker.
				e.coordEpoch = max(e.coordEpoch, b.CoordinatorEpoch)
				e.at = b.LogAppendTimestamp
				p.txns.ended[b.ProducerID] = e
				return
			}
			p.txns.ended[b.ProducerID] = endedTxn{seq: max(e.seq, b.TxnSeq), at: b.LogAppendTimestamp, coordEpoch: max(e.coordEpoch, b.CoordinatorEpoch)}
		}
		if reached || p.txns == nil {
			return
		}
		first, ok := p.txns.open[b.ProducerID]
		if !ok {
			return
		}
		delete(p.txns.open, b.ProducerID)
		if b.Txn == diskless.TxnAbort {
			p.txns.aborted = append(p.txns.aborted, diskless.AbortedTxn{ProducerID: b.ProducerID, FirstOffset: first, LastOffset: b.AssignedBaseOffset})
		}
		p.txns.dropIfEmpty(p)
	}
}

// dropIfEmpty forgets t when it holds nothing.
func (t *partTxns) dropIfEmpty(p *partition) {
	if len(t.open) == 0 && len(t.aborted) == 0 && len(t.ended) == 0 {
		p.txns = nil
	}
}

// sweepEnded drops p's transaction guards older than expirationMs at
// now, as producer state expires (decisions treat them as absent already:
// txnEnded).
func (p *partition) sweepEnded(now, expirationMs int64) {
	if p.txns == nil || len(p.txns.ended) == 0 {
		return
	}
	for id, e := range p.txns.ended {
		if now-e.at >= expirationMs {
			delete(p.txns.ended, id)
		}
	}
	p.txns.dropIfEmpty(p)
}

// lso is p's last stable offset: the first offset of its earliest open
// transaction, not below the log start offset, else the high watermark.
func (p *partition) lso() int64 {
	if p.txns == nil || len(p.txns.open) == 0 {
		return p.hwm
	}
	lso := p.hwm
	for _, first := range p.txns.open {
		lso = min(lso, first)
	}
	return max(lso, p.logStart)
}

// trimTxns drops the aborted transactions whose marker is below the log
// start offset: no fetch can meet their records any more.
func (p *partition) trimTxns() {
	if p.txns == nil {
		return
	}
	a := p.txns.aborted
	i := sort.Search(len(a), func(i int) bool { return a[i].LastOffset >= p.logStart })
	if i > 0 {
		p.txns.aborted = slices.Clone(a[i:])
	}
	p.txns.dropIfEmpty(p)
}

// visAborted returns the aborted transactions a read_committed fetch from
// offset that serves offsets below upTo must list: those whose marker is
// at or past offset and below the published high watermark (durable) and
// whose first offset is below upTo. Under the shard's read lock.
func (p *partition) visAborted(offset, upTo int64) []diskless.AbortedTxn {
	if p.txns == nil {
		return nil
	}
	a := p.txns.aborted
	var out []diskless.AbortedTxn
	for i := sort.Search(len(a), func(i int) bool { return a[i].LastOffset >= offset }); i < len(a); i++ {
		if a[i].LastOffset >= p.visHWM {
			break
		}
		if a[i].FirstOffset < upTo {
			out = append(out, a[i])
		}
	}
	return out
}

// appendPartTxnsSnapshot encodes the transactions of s's partitions (the
// snapshot's tagged field snapshotTagPartitionTxns), nil when no partition
// has any: docs/format/metadata-records.md §Snapshots.
func (s *state) appendPartTxnsSnapshot(dst []byte) []byte {
	var parts []*partition
	for _, p := range s.partitions {
		if p.txns != nil {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	slices.SortFunc(parts, func(a, b *partition) int { return diskless.ComparePartitions(a.tp, b.tp) })
	dst = kbin.AppendUvarint(dst, 1) // section version
	dst = kbin.AppendCompactArrayLen(dst, len(parts))
	for _, p := range parts {
		dst = kbin.AppendUuid(dst, p.tp.TopicID)
		dst = kbin.AppendInt32(dst, p.tp.Partition)
		ids := slices.Sorted(maps.Keys(p.txns.open))
		dst = kbin.AppendCompactArrayLen(dst, len(ids))
		for _, id := range ids {
			dst = kbin.AppendInt64(dst, id)
			dst = kbin.AppendInt64(dst, p.txns.open[id])
			dst = tagged.AppendNone(dst)
		}
		dst = kbin.AppendCompactArrayLen(dst, len(p.txns.aborted))
		for _, a := range p.txns.aborted {
			dst = kbin.AppendInt64(dst, a.ProducerID)
			dst = kbin.AppendInt64(dst, a.FirstOffset)
			dst = kbin.AppendInt64(dst, a.LastOffset)
			dst = tagged.AppendNone(dst)
		}
		dst = appendEndedTag(dst, p.txns.ended)
	}
	return tagged.AppendNone(dst)
}

// readPartTxnsSnapshot loads the snapshot's partition transactions into
// s's partitions, loaded already. It refuses a section of another version,
// an unknown partition, partitions or producers out of order or repeated,
// an open transaction's first offset outside [0, high watermark), a
// marker offset outside [log start, high watermark), aborted
// transactions out of marker order or with a first offset past their
// marker.
func (s *state) readPartTxnsSnapshot(r *kbin.Reader) error {
	if v := r.Uvarint(); v != 1 {
		return fmt.Errorf("partition transactions section version %d", v)
	}
	n, err := records.ReadArrayLen(r, 16+4+1+1+1)
	if err != nil {
		return err
	}
	var prev *partition
	for range n {
		tp := diskless.TopicPartition{TopicID: r.Uuid(), Partition: r.Int32()}
		p := s.partitions[tp]
		if p == nil {
			return fmt.Errorf("transactions of unknown partition %s/%d", tp.TopicID, tp.Partition)
		}
		if prev != nil && diskless.ComparePartitions(prev.tp, tp) >= 0 {
			return errors.New("partition transactions out of order")
		}
		prev = p
		t := &partTxns{}
		no, err := records.ReadArrayLen(r, 8+8+1)
		if err != nil {
			return err
		}
		last := int64(-1)
		for range no {
			id, first := r.Int64(), r.Int64()
			kmsg.SkipTags(r)
			// An open transaction's first offset may be below the log
			// start: DeleteRecords and retention may pass it, as in
			// Kafka (the LSO is then the log start offset).
			if id <= last || first < 0 || first >= p.hwm {
				return fmt.Errorf("open transaction of producer %d at %d out of order or range", id, first)
			}
			last = id
			if t.open == nil {
				t.open = make(map[int64]int64, no)
			}
			t.open[id] = first
		}
		na, err := records.ReadArrayLen(r, 8+8+8+1)
		if err != nil {
			return err
		}
		for range na {
			a := diskless.AbortedTxn{ProducerID: r.Int64(), FirstOffset: r.Int64(), LastOffset: r.Int64()}
			kmsg.SkipTags(r)
			if a.FirstOffset > a.LastOffset || a.LastOffset < p.logStart || a.LastOffset >= p.hwm ||
				len(t.aborted) > 0 && cmp.Compare(t.aborted[len(t.aborted)-1].LastOffset, a.LastOffset) >= 0 {
				return fmt.Errorf("aborted transaction %+v out of order or range", a)
			}
			t.aborted = append(t.aborted, a)
		}
		if err := readEndedTag(r, t); err != nil {
			return err
		}
		if !r.Ok() {
			return records.ErrTruncated
		}
		if len(t.open) == 0 && len(t.aborted) == 0 && len(t.ended) == 0 {
			return errors.New("empty partition transactions")
		}
		p.txns = t
	}
	kmsg.SkipTags(r)
	return records.OKOrTruncated(r)
}

// appendEndedTag appends a partition's tagged fields in the snapshot's
// partition transactions: tag 0, written when ended holds any, the
// transaction guards — a compact array of (producer id int64, token
// int64, log-append time int64, tags: tag 0 the coordinator epoch int32,
// written when not −1) by producer id ascending.
func appendEndedTag(dst []byte, ended map[int64]endedTxn) []byte {
	if len(ended) == 0 {
		return tagged.AppendNone(dst)
	}
	ids := slices.Sorted(maps.Keys(ended))
	var f []byte
	f = kbin.AppendCompactArrayLen(f, len(ids))
	for _, id := range ids {
		f = kbin.AppendInt64(f, id)
		f = kbin.AppendInt64(f, ended[id].seq)
		f = kbin.AppendInt64(f, ended[id].at)
		if ce := ended[id].coordEpoch; ce != -1 {
			f = kbin.AppendInt32(tagged.AppendOne(f, 0, 4), ce)
		} else {
			f = tagged.AppendNone(f)
		}
	}
	return append(tagged.AppendOne(dst, 0, len(f)), f...)
}

// readEndedTag reads what appendEndedTag wrote into t, skipping unknown
// tags; a snapshot written before the guard has none, a guard written
// before the coordinator epoch reads as −1. It refuses guards out of
// order or repeated, a negative token, a guard with neither a token nor a
// coordinator epoch, a coordinator epoch not of 4 bytes and bytes left in
// the field.
func readEndedTag(r *kbin.Reader, t *partTxns) error {
	return tagged.Each(r, func(tag uint32, v []byte) error {
		if tag != 0 {
			return nil
		}
		f := &kbin.Reader{Src: v}
		ne, err := records.ReadArrayLen(f, 8+8+8+1)
		if err != nil {
			return err
		}
		last := int64(-1)
		for range ne {
			id, seq, at := f.Int64(), f.Int64(), f.Int64()
			ce := int32(-1)
			err := tagged.Each(f, func(tag uint32, v []byte) error {
				if tag != 0 {
					return nil
				}
				if len(v) != 4 {
					return fmt.Errorf("coordinator epoch of %d bytes", len(v))
				}
				ce = int32(binary.BigEndian.Uint32(v))
				return nil
			})
			if err != nil {
				return err
			}
			if !f.Ok() {
				return records.ErrTruncated
			}
			if id <= last || seq < 0 || seq == 0 && ce == -1 {
				return fmt.Errorf("transaction guard of producer %d (token %d, coordinator epoch %d) out of order or range", id, seq, ce)
			}
			last = id
			if t.ended == nil {
				t.ended = make(map[int64]endedTxn, ne)
			}
			t.ended[id] = endedTxn{seq: seq, at: at, coordEpoch: ce}
		}
		if len(f.Src) != 0 {
			return fmt.Errorf("%d bytes left in the transaction guards", len(f.Src))
		}
		return nil
	})
}
