package coordinator

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Snapshot data layout (docs/format/metadata-records.md §Snapshots): the
// shard state in the primitives of the record encoding, maps in sorted
// order so that equal states encode to equal bytes. Derived fields (file
// live counts, prefix max timestamps, the published view) are recomputed
// on load, not stored.

// ErrBadSnapshot is returned (wrapped) for snapshot data that does not
// decode to a consistent state.
var ErrBadSnapshot = errors.New("coordinator: malformed snapshot")

// appendSnapshot appends the encoding of s to dst.
func (s *state) appendSnapshot(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, s.shard)
	dst = kbin.AppendInt64(dst, s.nextProducerID)
	dst = kbin.AppendInt64(dst, s.lastAppendTime)
	dst = kbin.AppendInt64(dst, s.nextSweep)

	dst = kbin.AppendCompactArrayLen(dst, len(s.files))
	for i := range s.files {
		f := &s.files[i]
		dst = kbin.AppendCompactString(dst, f.key)
		dst = kbin.AppendInt64(dst, f.size)
		dst = kbin.AppendInt64(dst, f.appendTime)
		dst = kbin.AppendInt8(dst, f.format)
	}

	ids := slices.SortedFunc(maps.Keys(s.topics), func(a, b TopicID) int { return bytes.Compare(a[:], b[:]) })
	dst = kbin.AppendCompactArrayLen(dst, len(ids))
	for _, id := range ids {
		t := s.topics[id]
		rec := topicConfigRecord{TopicID: t.id, TopicName: t.name, NumPartitions: t.partitions, Configs: t.configs}
		dst = rec.appendTo(dst)
	}

	tps := slices.SortedFunc(maps.Keys(s.partitions), compareTP)
	dst = kbin.AppendCompactArrayLen(dst, len(tps))
	for _, tp := range tps {
		p := s.partitions[tp]
		dst = kbin.AppendUuid(dst, tp.TopicID)
		dst = kbin.AppendInt32(dst, tp.Partition)
		dst = kbin.AppendCompactString(dst, p.topicName)
		dst = kbin.AppendInt64(dst, p.logStart)
		dst = kbin.AppendInt64(dst, p.hwm)
		dst = kbin.AppendCompactArrayLen(dst, len(p.batches))
		for i := range p.batches {
			e := &p.batches[i]
			dst = kbin.AppendInt64(dst, e.baseOffset)
			dst = kbin.AppendInt32(dst, e.lastOffsetDelta)
			dst = kbin.AppendInt32(dst, e.file)
			dst = kbin.AppendInt32(dst, e.byteOffset)
			dst = kbin.AppendInt32(dst, e.byteSize)
			dst = kbin.AppendInt64(dst, e.maxTimestamp)
			dst = kbin.AppendInt8(dst, e.tsType)
		}
		pids := slices.Sorted(maps.Keys(p.producers))
		dst = kbin.AppendCompactArrayLen(dst, len(pids))
		for _, id := range pids {
			ps := p.producers[id]
			dst = kbin.AppendInt64(dst, id)
			dst = kbin.AppendInt16(dst, ps.epoch)
			dst = kbin.AppendInt64(dst, ps.lastWrite)
			dst = kbin.AppendInt64(dst, ps.lastOffset)
			dst = kbin.AppendCompactArrayLen(dst, int(ps.n))
			for i := range ps.n {
				e := &ps.seqs[(int(ps.head)+int(i))%producerWindow]
				dst = kbin.AppendInt32(dst, e.baseSeq)
				dst = kbin.AppendInt32(dst, e.lastSeq)
				dst = kbin.AppendInt64(dst, e.baseOffset)
				dst = kbin.AppendInt64(dst, e.appendTime)
			}
		}
	}
	return appendTags(dst)
}

func compareTP(a, b TopicPartition) int {
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// decodeSnapshot loads b into s, which must be empty. It checks the
// invariants apply maintains; errors wrap ErrBadSnapshot.
func (s *state) decodeSnapshot(b []byte) error {
	if err := s.readSnapshot(&kbin.Reader{Src: b}); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return nil
}

func (s *state) readSnapshot(r *kbin.Reader) error {
	if shard := r.Int32(); shard != s.shard {
		return fmt.Errorf("snapshot of shard %d", shard)
	}
	s.nextProducerID = r.Int64()
	s.lastAppendTime = r.Int64()
	s.nextSweep = r.Int64()
	if s.nextProducerID < 0 {
		return fmt.Errorf("next producer id %d", s.nextProducerID)
	}

	n, err := readArrayLen(r, 1+8+8+1)
	if err != nil {
		return err
	}
	if n > math.MaxInt32 {
		return errors.New("file table too large")
	}
	s.files = make([]fileEntry, n)
	for i := range s.files {
		f := &s.files[i]
		if f.key, err = readString(r); err != nil {
			return err
		}
		f.size = r.Int64()
		f.appendTime = r.Int64()
		f.format = r.Int8()
		if _, dup := s.fileByKey[f.key]; dup || f.key == "" {
			return fmt.Errorf("file key %q empty or repeated", f.key)
		}
		s.fileByKey[f.key] = int32(i)
	}

	if n, err = readArrayLen(r, 16+1+4+1+1); err != nil {
		return err
	}
	for range n {
		var rec topicConfigRecord
		if err := rec.readFrom(r); err != nil {
			return err
		}
		if err := s.applyTopicConfig(&rec); err != nil {
			return err
		}
	}

	if n, err = readArrayLen(r, 16+4+1+8+8+1+1); err != nil {
		return err
	}
	var prev *TopicPartition
	for range n {
		tp := TopicPartition{TopicID: r.Uuid(), Partition: r.Int32()}
		if prev != nil && compareTP(*prev, tp) >= 0 {
			return errors.New("partitions out of order")
		}
		prev = &tp
		p := &partition{tp: tp}
		if p.topicName, err = readString(r); err != nil {
			return err
		}
		p.logStart, p.hwm = r.Int64(), r.Int64()
		if err := s.readBatches(r, p); err != nil {
			return fmt.Errorf("partition %s/%d: %w", tp.TopicID, tp.Partition, err)
		}
		if err := readProducers(r, p); err != nil {
			return fmt.Errorf("partition %s/%d: %w", tp.TopicID, tp.Partition, err)
		}
		s.partitions[tp] = p
	}
	skipTags(r)
	if !r.Ok() {
		return errTruncated
	}
	if len(r.Src) != 0 {
		return fmt.Errorf("%d trailing bytes", len(r.Src))
	}
	return nil
}

func (s *state) readBatches(r *kbin.Reader, p *partition) error {
	n, err := readArrayLen(r, 8+4+4+4+4+8+1)
	if err != nil {
		return err
	}
	if p.logStart < 0 || p.hwm < p.logStart {
		return fmt.Errorf("log start %d, high watermark %d", p.logStart, p.hwm)
	}
	p.batches = make([]batchEntry, n)
	next := int64(-1)
	for i := range p.batches {
		e := &p.batches[i]
		e.baseOffset = r.Int64()
		e.lastOffsetDelta = r.Int32()
		e.file = r.Int32()
		e.byteOffset = r.Int32()
		e.byteSize = r.Int32()
		e.maxTimestamp = r.Int64()
		e.tsType = r.Int8()
		if !r.Ok() {
			return errTruncated
		}
		switch {
		case e.file < 0 || int(e.file) >= len(s.files):
			return fmt.Errorf("batch at %d in file %d of %d", e.baseOffset, e.file, len(s.files))
		case i > 0 && e.file < p.batches[i-1].file:
			return fmt.Errorf("batch at %d: file indexes go backwards", e.baseOffset)
		case e.lastOffsetDelta < 0 || e.byteOffset < 0 || e.byteSize < 1 || e.baseOffset < 0:
			return fmt.Errorf("batch at %d malformed", e.baseOffset)
		case e.tsType != batch.TimestampCreateTime && e.tsType != batch.TimestampLogAppendTime:
			return fmt.Errorf("batch at %d: timestamp type %d", e.baseOffset, e.tsType)
		case i == 0 && (e.baseOffset > p.logStart || e.lastOffset() < p.logStart):
			return fmt.Errorf("first batch [%d, %d] does not hold log start %d", e.baseOffset, e.lastOffset(), p.logStart)
		case i > 0 && e.baseOffset != next:
			return fmt.Errorf("batch at %d, expected %d", e.baseOffset, next)
		case e.baseOffset > math.MaxInt64-int64(e.lastOffsetDelta)-1:
			return fmt.Errorf("batch at %d overflows", e.baseOffset)
		}
		next = e.lastOffset() + 1
		f := &s.files[e.file]
		f.live++
		e.prefixMaxTs = effectiveMaxTs(e.tsType, e.maxTimestamp, f.appendTime)
		if i > 0 {
			e.prefixMaxTs = max(e.prefixMaxTs, p.batches[i-1].prefixMaxTs)
		}
	}
	if (n == 0 && p.hwm != p.logStart) || (n > 0 && next != p.hwm) {
		return fmt.Errorf("batches end at %d, high watermark %d", next, p.hwm)
	}
	return nil
}

func readProducers(r *kbin.Reader, p *partition) error {
	n, err := readArrayLen(r, 8+2+8+8+1)
	if err != nil {
		return err
	}
	if n > 0 {
		p.producers = make(map[int64]*producerState, n)
	}
	for range n {
		id := r.Int64()
		ps := &producerState{epoch: r.Int16(), lastWrite: r.Int64(), lastOffset: r.Int64()}
		k, err := readArrayLen(r, 4+4+8+8)
		if err != nil {
			return err
		}
		if id < 0 || k < 1 || k > producerWindow {
			return fmt.Errorf("producer %d with %d batches", id, k)
		}
		if _, dup := p.producers[id]; dup {
			return fmt.Errorf("producer %d twice", id)
		}
		for range k {
			ps.push(seqEntry{baseSeq: r.Int32(), lastSeq: r.Int32(), baseOffset: r.Int64(), appendTime: r.Int64()})
		}
		p.producers[id] = ps
	}
	return okOrTruncated(r)
}
