package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/internal/tagged"
	"github.com/diskless-sidecar/sidecar/txn"
)

// The topic lifecycle's part of the snapshot payload travels in its
// top-level tagged fields (docs/format/metadata-records.md §Snapshots),
// written only when not empty, so a shard that never deleted or disabled
// a topic writes the bytes it wrote before them:
//
//	tag 0 DeletedTopics  []uuid, ascending: topics whose partitions here
//	                     are deleted (record 101), not yet purged (112)
//	tag 1 Disablements   [](TopicId uuid, State int8, Epoch int32,
//	                     Policy int8, tagged fields), by TopicId: the
//	                     catalog's topics whose state is not ENABLED at
//	                     epoch 0 (record 111)
//	tag 2 GroupOffsets   the consumer groups' offsets table (records
//	                     107 … 110, 113), group.(*Offsets).AppendSnapshot's
//	                     section
//	tag 3 Transactions   the transactional ids' states (record 118),
//	                     txn.(*Table).AppendSnapshot's section
//	tag 4 ScramCredentials [](Name string, Mechanism int8, Iterations
//	                     int32, Salt, StoredKey, ServerKey bytes, tagged
//	                     fields), by (Name, Mechanism): record 116's
//	                     credentials (shard 0)
//	tag 5 Acls           [](record 117's fields, Removed 0), by
//	                     acl.Compare: the access control entries
//	                     (shard 0)
//	tag 6 PartitionTxns  the partitions' open and aborted transactions
//	                     (txndata.go)
const (
	snapshotTagDeletedTopics    = 0
	snapshotTagDisablements     = 1
	snapshotTagGroupOffsets     = 2
	snapshotTagTransactions     = 3
	snapshotTagScramCredentials = 4
	snapshotTagACLs             = 5
	snapshotTagPartitionTxns    = 6
	snapshotTagProducerTimes    = 7
)

// appendStateTags appends the payload's tagged-field section.
func (fz *frozenState) appendStateTags(dst []byte) []byte {
	var tags []tagged.Field
	if len(fz.deleted) > 0 {
		slices.SortFunc(fz.deleted, func(a, b diskless.TopicID) int { return bytes.Compare(a[:], b[:]) })
		b := kbin.AppendCompactArrayLen(nil, len(fz.deleted))
		for _, id := range fz.deleted {
			b = kbin.AppendUuid(b, id)
		}
		tags = append(tags, tagged.Field{Tag: snapshotTagDeletedTopics, Value: b})
	}
	var dis []byte
	n := 0
	for _, t := range fz.topics { // sorted by id in appendTo
		if t.disable == (diskless.Disablement{}) {
			continue
		}
		n++
		dis = kbin.AppendUuid(dis, t.id)
		dis = kbin.AppendInt8(dis, int8(t.disable.State))
		dis = kbin.AppendInt32(dis, t.disable.Epoch)
		dis = kbin.AppendInt8(dis, int8(t.disable.Policy))
		dis = tagged.AppendNone(dis)
	}
	if n > 0 {
		tags = append(tags, tagged.Field{Tag: snapshotTagDisablements, Value: append(kbin.AppendCompactArrayLen(nil, n), dis...)})
	}
	if fz.groups != nil {
		tags = append(tags, tagged.Field{Tag: snapshotTagGroupOffsets, Value: fz.groups})
	}
	if fz.txns != nil {
		tags = append(tags, tagged.Field{Tag: snapshotTagTransactions, Value: fz.txns})
	}
	if fz.scram != nil {
		tags = append(tags, tagged.Field{Tag: snapshotTagScramCredentials, Value: fz.scram})
	}
	if fz.acls != nil {
		tags = append(tags, tagged.Field{Tag: snapshotTagACLs, Value: fz.acls})
	}
	if fz.partTxns != nil {
		tags = append(tags, tagged.Field{Tag: snapshotTagPartitionTxns, Value: fz.partTxns})
	}
	if b := fz.appendProducerTimes(nil); b != nil {
		tags = append(tags, tagged.Field{Tag: snapshotTagProducerTimes, Value: b})
	}
	return tagged.Append(dst, tags...)
}

// readStateTags reads the payload's tagged-field section: the tags above,
// each at most once, in ascending order; unknown tags are skipped.
func (s *state) readStateTags(r *kbin.Reader) error {
	last := int64(-1)
	err := tagged.Each(r, func(tag uint32, body []byte) error {
		if int64(tag) <= last {
			return fmt.Errorf("snapshot tag %d out of order", tag)
		}
		last = int64(tag)
		br := &kbin.Reader{Src: body}
		var err error
		switch tag {
		case snapshotTagDeletedTopics:
			err = s.readDeletedTopics(br)
		case snapshotTagDisablements:
			err = s.readDisablements(br)
		case snapshotTagGroupOffsets:
			var rest []byte
			s.groups, rest, err = group.DecodeSnapshot(body)
			if err == nil {
				s.groups.SetProducerIDExpiration(s.expirationMs)
			}
			br.Src = rest
		case snapshotTagTransactions:
			var rest []byte
			s.txns, rest, err = txn.DecodeSnapshot(body)
			br.Src = rest
		case snapshotTagScramCredentials:
			err = s.readScramSnapshot(br)
		case snapshotTagACLs:
			err = s.readACLSnapshot(br)
		case snapshotTagPartitionTxns:
			err = s.readPartTxnsSnapshot(br)
		case snapshotTagProducerTimes:
			err = s.readProducerTimes(br)
		default:
			return nil
		}
		if err == nil && len(br.Src) != 0 {
			err = fmt.Errorf("%d trailing bytes", len(br.Src))
		}
		if err != nil {
			return fmt.Errorf("snapshot tag %d: %w", tag, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return records.OKOrTruncated(r)
}

func (s *state) readDeletedTopics(r *kbin.Reader) error {
	n, err := records.ReadArrayLen(r, 16)
	if err != nil {
		return err
	}
	var prev *diskless.TopicID
	for range n {
		id := diskless.TopicID(r.Uuid())
		if prev != nil && bytes.Compare(prev[:], id[:]) >= 0 {
			return errors.New("deleted topics out of order")
		}
		prev = &id
		parts := s.topicPartitions(id)
		if len(parts) == 0 {
			return fmt.Errorf("deleted topic %s has no partition here", id)
		}
		if s.topics[id] != nil {
			return fmt.Errorf("deleted topic %s is in the catalog", id)
		}
		for _, p := range parts {
			p.deleted = true
		}
		s.deletedTopics[id] = struct{}{}
	}
	return records.OKOrTruncated(r)
}

func (s *state) readDisablements(r *kbin.Reader) error {
	n, err := records.ReadArrayLen(r, 16+1+4+1+1)
	if err != nil {
		return err
	}
	var prev *diskless.TopicID
	for range n {
		id := diskless.TopicID(r.Uuid())
		d := diskless.Disablement{State: diskless.TopicState(r.Int8()), Epoch: r.Int32(), Policy: diskless.DisablePolicy(r.Int8())}
		kmsg.SkipTags(r)
		if !r.Ok() {
			return records.ErrTruncated
		}
		if prev != nil && bytes.Compare(prev[:], id[:]) >= 0 {
			return errors.New("disablements out of order")
		}
		prev = &id
		t := s.topics[id]
		switch {
		case t == nil:
			return fmt.Errorf("disablement of unknown topic %s", id)
		case d.State < diskless.TopicEnabled || d.State > diskless.TopicDisabled || d.Epoch < 1 ||
			(d.Policy != diskless.DisableRetain && d.Policy != diskless.DisableDelete) ||
			(d.State == diskless.TopicEnabled && d.Policy != diskless.DisableRetain):
			return fmt.Errorf("topic %q: disablement state %d epoch %d policy %d", t.name, d.State, d.Epoch, d.Policy)
		}
		t.disable = d
	}
	return records.OKOrTruncated(r)
}

// appendProducerTimes encodes the producers' timestamps that differ from
// their last log-append time (producerState.lastTimestamp: a CreateTime
// batch's maxTimestamp; the tagged field snapshotTagProducerTimes), nil
// when none does: a compact array of partitions (topic id, partition, a
// compact array of (producer id int64, timestamp int64, tags) by producer
// id ascending, tags) in the snapshot's partition order
// (docs/format/metadata-records.md §Snapshots). fz's producers are sorted
// by appendTo already.
func (fz *frozenState) appendProducerTimes(dst []byte) []byte {
	n := 0
	var body []byte
	for i := range fz.partitions {
		p := &fz.partitions[i]
		k := 0
		for _, fp := range p.producers {
			if fp.ps.lastTimestamp != fp.ps.lastWrite {
				k++
			}
		}
		if k == 0 {
			continue
		}
		n++
		body = kbin.AppendUuid(body, p.tp.TopicID)
		body = kbin.AppendInt32(body, p.tp.Partition)
		body = kbin.AppendCompactArrayLen(body, k)
		for _, fp := range p.producers {
			if fp.ps.lastTimestamp != fp.ps.lastWrite {
				body = kbin.AppendInt64(body, fp.id)
				body = kbin.AppendInt64(body, fp.ps.lastTimestamp)
				body = tagged.AppendNone(body)
			}
		}
		body = tagged.AppendNone(body)
	}
	if n == 0 {
		return nil
	}
	dst = kbin.AppendCompactArrayLen(dst, n)
	return append(dst, body...)
}

// readProducerTimes loads what appendProducerTimes wrote into the
// producer states, loaded already. It refuses an unknown partition or
// producer, and a partition or producer repeated.
func (s *state) readProducerTimes(r *kbin.Reader) error {
	n, err := records.ReadArrayLen(r, 16+4+1+1)
	if err != nil {
		return err
	}
	seen := make(map[diskless.TopicPartition]bool, n)
	for range n {
		tp := diskless.TopicPartition{TopicID: r.Uuid(), Partition: r.Int32()}
		p := s.partitions[tp]
		if p == nil || seen[tp] {
			return fmt.Errorf("producer timestamps of partition %s/%d unknown or repeated", tp.TopicID, tp.Partition)
		}
		seen[tp] = true
		k, err := records.ReadArrayLen(r, 8+8+1)
		if err != nil {
			return err
		}
		last := int64(-1)
		for range k {
			id, ts := r.Int64(), r.Int64()
			kmsg.SkipTags(r)
			ps := p.producers[id]
			if ps == nil || id <= last {
				return fmt.Errorf("timestamp of producer %d in %s/%d: unknown or out of order", id, tp.TopicID, tp.Partition)
			}
			last = id
			ps.lastTimestamp = ts
		}
		kmsg.SkipTags(r)
	}
	return records.OKOrTruncated(r)
}
