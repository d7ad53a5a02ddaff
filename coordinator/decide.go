package coordinator

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// errorResult is a batch's answer when it was not committed: Kafka's
// produce answer for an error carries −1 offsets and times.
func errorResult(err *kerr.Error) CommitBatchResult {
	return CommitBatchResult{Err: err, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
}

// commitFile decides req against the state at log-append time
// max(now, last commit's), applying each accepted batch before deciding
// the next (so a retry of a batch earlier in the same file is a
// duplicate). known reports whether a topic partition exists in the
// catalog. It returns the results in request order and record 102 holding
// the accepted batches, or nil when none was accepted (then nothing
// changed). req must have passed validateCommit.
func (s *state) commitFile(req *CommitFileRequest, now int64, known func(TopicID, int32) bool) ([]CommitBatchResult, *fileCommittedRecord) {
	t := max(now, s.lastAppendTime)
	results := make([]CommitBatchResult, len(req.Batches))
	fi := int32(-1)
	var (
		rec      *fileCommittedRecord
		topicIdx map[TopicID]int
		partIdx  map[TopicPartition]int
		accepted int
	)
	for i := range req.Batches {
		b := &req.Batches[i]
		tp := TopicPartition{b.TopicID, b.Partition}
		p := s.partitions[tp]
		if p == nil || !known(b.TopicID, b.Partition) {
			results[i] = errorResult(kerr.UnknownTopicOrPartition)
			continue
		}
		if err := checkCommitBatch(b, req.FileSize); err != nil {
			results[i] = errorResult(err)
			continue
		}
		if res, done := s.checkProducer(p, b, t); done {
			results[i] = res
			continue
		}
		if fi < 0 {
			fi = s.addFile(req.ObjectKey, req.FileSize, req.ObjectFormat, t, req.OwnerIDs)
			rec = &fileCommittedRecord{
				ObjectKey:        req.ObjectKey,
				ObjectFormat:     req.ObjectFormat,
				FileSize:         req.FileSize,
				UploaderBrokerID: req.UploaderBrokerID,
				OwnerIDs:         req.OwnerIDs,
			}
			topicIdx = make(map[TopicID]int)
			partIdx = make(map[TopicPartition]int)
		}
		cb := committedBatch{
			Magic:              b.Magic,
			ByteOffset:         b.ByteOffset,
			ByteSize:           b.ByteSize,
			AssignedBaseOffset: p.hwm,
			AssignedLastOffset: p.hwm + int64(b.LastOffsetDelta),
			LogAppendTimestamp: t,
			BatchMaxTimestamp:  b.BatchMaxTimestamp,
			TimestampType:      b.TimestampType,
			ProducerID:         b.ProducerID,
			ProducerEpoch:      b.ProducerEpoch,
			BaseSequence:       b.BaseSequence,
			LastSequence:       b.LastSequence,
		}
		s.appendBatch(p, fi, &cb)
		accepted++
		results[i] = CommitBatchResult{BaseOffset: cb.AssignedBaseOffset, LogAppendTime: t, LogStartOffset: p.logStart}

		ti, ok := topicIdx[b.TopicID]
		if !ok {
			ti = len(rec.Topics)
			topicIdx[b.TopicID] = ti
			rec.Topics = append(rec.Topics, fileTopic{TopicID: b.TopicID})
		}
		ft := &rec.Topics[ti]
		pi, ok := partIdx[tp]
		if !ok {
			pi = len(ft.Partitions)
			partIdx[tp] = pi
			ft.Partitions = append(ft.Partitions, filePartition{Partition: b.Partition})
		}
		ft.Partitions[pi].Batches = append(ft.Partitions[pi].Batches, cb)
	}
	if accepted == 0 {
		return results, nil
	}
	s.finishFile(t)
	return results, rec
}

// checkCommitBatch checks what the produce path should already have
// refused (SPEC §2), so that no input can break the index's invariants.
func checkCommitBatch(b *CommitBatch, fileSize int64) *kerr.Error {
	switch {
	case b.Magic != 2,
		b.LastOffsetDelta < 0,
		b.ByteOffset < 0, b.ByteSize < 1, int64(b.ByteOffset)+int64(b.ByteSize) > fileSize,
		b.TimestampType != batch.TimestampCreateTime && b.TimestampType != batch.TimestampLogAppendTime:
		return kerr.InvalidRecord
	case b.ProducerID >= 0 && (b.BaseSequence < 0 || b.LastSequence != batch.AddSequence(b.BaseSequence, b.LastOffsetDelta)):
		return kerr.InvalidRecord
	}
	return nil
}

// checkProducer applies SPEC §3 to an idempotent batch at log-append time
// t. done is true when the batch must not be appended: res is then a
// duplicate's original answer or an error.
func (s *state) checkProducer(p *partition, b *CommitBatch, t int64) (res CommitBatchResult, done bool) {
	if b.ProducerID < 0 {
		return res, false
	}
	ps := p.producers[b.ProducerID]
	if ps == nil || s.expired(ps, t) {
		// New, expired or removed producer: any first sequence.
		return res, false
	}
	switch {
	case b.ProducerEpoch < ps.epoch:
		return errorResult(kerr.InvalidProducerEpoch), true
	case b.ProducerEpoch > ps.epoch:
		if b.BaseSequence != 0 {
			return errorResult(kerr.OutOfOrderSequenceNumber), true
		}
		return res, false
	}
	if e := ps.find(b.BaseSequence, b.LastSequence); e != nil {
		return CommitBatchResult{
			BaseOffset:     e.baseOffset,
			LogAppendTime:  e.appendTime,
			LogStartOffset: p.logStart,
			Duplicate:      true,
		}, true
	}
	if b.BaseSequence != batch.AddSequence(ps.newest().lastSeq, 1) {
		return errorResult(kerr.OutOfOrderSequenceNumber), true
	}
	return res, false
}

// replayCommit answers a repeated CommitFile for a file already in the
// file table (fi) when the original answer is no longer cached: batches
// found at their byte offset get their assigned offsets and Duplicate;
// others (refused the first time, or since deleted) get
// KAFKA_STORAGE_ERROR, since their original answer is unknown.
func (s *state) replayCommit(req *CommitFileRequest, fi int32) []CommitBatchResult {
	f := &s.files[fi]
	results := make([]CommitBatchResult, len(req.Batches))
	for i := range req.Batches {
		b := &req.Batches[i]
		p := s.partitions[TopicPartition{b.TopicID, b.Partition}]
		if p == nil {
			results[i] = errorResult(kerr.KafkaStorageError)
			continue
		}
		e := p.findInFile(fi, b.ByteOffset)
		if e == nil {
			results[i] = errorResult(kerr.KafkaStorageError)
			continue
		}
		results[i] = CommitBatchResult{
			BaseOffset:     e.baseOffset,
			LogAppendTime:  f.appendTime,
			LogStartOffset: p.logStart,
			Duplicate:      true,
		}
	}
	return results
}

// findInFile returns the batch of file fi at byteOffset. File indexes are
// non-decreasing along a partition's index (files are numbered in commit
// order), so the file's batches are found by binary search.
func (p *partition) findInFile(fi, byteOffset int32) *batchEntry {
	lo, hi := 0, len(p.batches)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.batches[m].file < fi {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for i := lo; i < len(p.batches) && p.batches[i].file == fi; i++ {
		if p.batches[i].byteOffset == byteOffset {
			return &p.batches[i]
		}
	}
	return nil
}
