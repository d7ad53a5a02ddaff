package coordinator

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// errorResult is a batch's answer when it was not committed: Kafka's
// produce answer for an error carries −1 offsets and times.
func errorResult(err *kerr.Error) diskless.CommitBatchResult {
	return diskless.CommitBatchResult{Err: err, BaseOffset: -1, LogAppendTime: -1, LogStartOffset: -1}
}

// commitFile decides req against the state at log-append time
// max(now, last commit's), applying each accepted batch before deciding
// the next (so a retry of a batch earlier in the same file is a
// duplicate). known reports whether a topic partition exists in the
// catalog. It returns the results in request order and record 102 holding
// the accepted batches, or nil when none was accepted (then nothing
// changed), and the partitions the record commits to (valid until the
// next call). req must have passed validateCommit.
//
// Per batch it does one producer lookup and allocates nothing (but a new
// producer's state): partitions are found through the topic's partition
// list (looked up once per run of one topic's batches), the catalog is
// asked once per partition per file, and the record takes at most five
// allocations whatever the number of partitions (buildRecord).
// BenchmarkCommit (bench/) and BenchmarkCommitFile measure it.
func (s *state) commitFile(req *diskless.CommitFileRequest, now int64, known func(diskless.TopicID, int32) *kerr.Error) ([]diskless.CommitBatchResult, *records.FileCommitted, []*partition) {
	t := max(now, s.lastAppendTime)
	results := make([]diskless.CommitBatchResult, len(req.Batches))
	sc := s.scratch.start(len(req.Batches))
	fi := int32(-1)
	var (
		acc       []records.CommittedBatch // accepted, in request order
		topic     diskless.TopicID
		topicOK   bool
		topicPart []*partition
	)
	for i := range req.Batches {
		b := &req.Batches[i]
		sc.slots[i] = -1
		if !topicOK || b.TopicID != topic {
			topic, topicOK, topicPart = b.TopicID, true, s.topicParts[b.TopicID]
		}
		var p *partition
		if uint32(b.Partition) < uint32(len(topicPart)) {
			p = topicPart[b.Partition]
		} else if b.Partition >= MaxPartitionsPerTopic {
			p = s.partitions[diskless.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}]
		}
		if p == nil {
			results[i] = errorResult(kerr.UnknownTopicOrPartition)
			continue
		}
		if p.fileGen != sc.gen {
			p.fileGen, p.fileSlot, p.fileErr = sc.gen, -1, kerr.UnknownTopicOrPartition
			if !p.deleted {
				p.fileErr = known(b.TopicID, b.Partition)
			}
		}
		if p.fileErr != nil && !closesTxnWhileDisabling(p, b) {
			results[i] = errorResult(p.fileErr)
			continue
		}
		if err := checkCommitBatch(b, req.FileSize); err != nil {
			results[i] = errorResult(err)
			continue
		}
		if s.txnEnded(p, b, t) {
			// Its transaction's marker is here already (DESIGN
			// §Transactions, the hazard): the producer's batch of an
			// ended transaction, SPEC §15's INVALID_TXN_STATE.
			results[i] = errorResult(kerr.InvalidTxnState)
			continue
		}
		if s.markerEpochStale(p, b, t) {
			// A marker of an older producer epoch than the producer's
			// state here: Kafka's leader refuses it at its append
			// (SPEC §15, WriteTxnMarkers' epochs), checked before the
			// coordinator epoch as Kafka does.
			results[i] = errorResult(kerr.InvalidProducerEpoch)
			continue
		}
		if s.coordinatorFenced(p, b, t) {
			// A marker of a deposed transaction coordinator: a later
			// one's marker for the producer is here (DESIGN
			// §Transactions, the coordinator epoch; SPEC §15).
			results[i] = errorResult(kerr.TransactionCoordinatorFenced)
			continue
		}
		ps, res, done := s.checkProducer(p, b, t)
		if done {
			results[i] = res
			continue
		}
		if fi < 0 {
			fi = s.addFile(req.ObjectKey, req.FileSize, req.ObjectFormat, t, req.OwnerIDs)
			acc = make([]records.CommittedBatch, 0, len(req.Batches)-i)
		}
		acc = append(acc, acceptedBatch(b, p.hwm, t))
		cb := &acc[len(acc)-1]
		s.indexBatch(p, fi, cb)
		s.recordProducer(p, ps, cb)
		p.trackTxn(cb, s.expirationMs)
		results[i] = diskless.CommitBatchResult{BaseOffset: cb.AssignedBaseOffset, LogAppendTime: t, LogStartOffset: p.logStart}
		if p.fileSlot < 0 {
			p.fileSlot = int32(len(sc.parts))
			sc.parts = append(sc.parts, p)
			sc.counts = append(sc.counts, 0)
		}
		sc.slots[i] = p.fileSlot
		sc.counts[p.fileSlot]++
	}
	if len(acc) == 0 {
		return results, nil, nil
	}
	s.finishFile(t)
	return results, sc.buildRecord(req, acc), sc.parts
}

// closesTxnWhileDisabling reports whether b, refused by the catalog with
// p's topic DISABLING, is still taken: a marker ending a transaction its
// producer has open in p. A topic being disabled takes its open
// transactions' markers, and becomes DISABLED only once none is open
// (SPEC §10), so that a read_committed reader never sees its last stable
// offset held for ever; every other batch is refused.
func closesTxnWhileDisabling(p *partition, b *diskless.CommitBatch) bool {
	if p.fileErr != diskless.ErrDisabling || b.Txn < diskless.TxnCommit || p.txns == nil {
		return false
	}
	_, open := p.txns.open[b.ProducerID]
	return open
}

// acceptedBatch is record 102's entry for b, accepted at offset base and
// log-append time t.
func acceptedBatch(b *diskless.CommitBatch, base, t int64) records.CommittedBatch {
	return records.CommittedBatch{
		Magic:              b.Magic,
		ByteOffset:         b.ByteOffset,
		ByteSize:           b.ByteSize,
		AssignedBaseOffset: base,
		AssignedLastOffset: base + int64(b.LastOffsetDelta),
		LogAppendTimestamp: t,
		BatchMaxTimestamp:  b.BatchMaxTimestamp,
		TimestampType:      b.TimestampType,
		ProducerID:         b.ProducerID,
		ProducerEpoch:      b.ProducerEpoch,
		BaseSequence:       b.BaseSequence,
		LastSequence:       b.LastSequence,
		Txn:                b.Txn,
		TxnSeq:             b.TxnSeq,
		CoordinatorEpoch:   b.CoordinatorEpoch,
	}
}

// commitScratch is commitFile's working memory, reused from file to file.
// Not state.
type commitScratch struct {
	// gen numbers the file being decided (partition.fileGen).
	gen uint64
	// slots holds, per request batch, its partition's slot if the batch
	// was accepted, else −1.
	slots []int32
	// parts and counts hold, per slot, the partitions with accepted
	// batches in the order of their first one, and how many each has.
	parts  []*partition
	counts []int32
	// buildRecord's: per slot, the topic's number and the next batch's
	// index; per topic, where its partitions start; per partition
	// position in the record, its slot.
	topic      []int32
	next       []int32
	topicStart []int32
	byPos      []int32
	topicIdx   map[diskless.TopicID]int32
}

// start readies sc for a file of n batches.
func (sc *commitScratch) start(n int) *commitScratch {
	sc.gen++
	clear(sc.parts) // keep no partition of an earlier file reachable
	sc.slots = resize(sc.slots, n)
	sc.parts, sc.counts = sc.parts[:0], sc.counts[:0]
	return sc
}

// resize returns s with length n, reusing its array when large enough;
// the contents are unspecified.
func resize(s []int32, n int) []int32 { return slices.Grow(s[:0], n)[:n] }

// buildRecord lays out record 102 for acc, the batches commitFile
// accepted in request order: topics in the order of their first accepted
// batch, partitions within a topic likewise, and each partition's batches
// in request order — the layout of a record built batch by batch, so the
// encoding is the same. Topics, partitions and batches take one array
// each, sub-sliced per topic and per partition; the batches' array is acc
// itself when the request is already in that order (as a WAL object is:
// grouped by topic and partition), else a copy.
func (sc *commitScratch) buildRecord(req *diskless.CommitFileRequest, acc []records.CommittedBatch) *records.FileCommitted {
	nparts := len(sc.parts)
	// Number the topics by first appearance and count their partitions.
	if sc.topicIdx == nil {
		sc.topicIdx = make(map[diskless.TopicID]int32)
	}
	clear(sc.topicIdx)
	sc.topic, sc.topicStart = sc.topic[:0], sc.topicStart[:0]
	var ti int32
	for slot, p := range sc.parts {
		if slot == 0 || p.tp.TopicID != sc.parts[slot-1].tp.TopicID {
			var ok bool
			if ti, ok = sc.topicIdx[p.tp.TopicID]; !ok {
				ti = int32(len(sc.topicStart))
				sc.topicIdx[p.tp.TopicID] = ti
				sc.topicStart = append(sc.topicStart, 0)
			}
		}
		sc.topic = append(sc.topic, ti)
		sc.topicStart[ti]++
	}
	rec := &records.FileCommitted{
		ObjectKey:        req.ObjectKey,
		ObjectFormat:     req.ObjectFormat,
		FileSize:         req.FileSize,
		UploaderBrokerID: req.UploaderBrokerID,
		OwnerIDs:         req.OwnerIDs,
		Topics:           make([]records.FileTopic, len(sc.topicStart)),
	}
	fps := make([]records.FilePartition, nparts)
	// Topic i's partitions start at topicStart[i].
	at := int32(0)
	for i, n := range sc.topicStart {
		rec.Topics[i].Partitions = fps[at : at+n : at+n]
		sc.topicStart[i], at = at, at+n
	}
	// Each slot's partition goes after the earlier ones of its topic.
	sc.byPos = resize(sc.byPos, nparts)
	for slot, p := range sc.parts {
		ti := sc.topic[slot]
		pos := sc.topicStart[ti]
		sc.topicStart[ti]++
		rec.Topics[ti].TopicID = p.tp.TopicID
		fps[pos].Partition = p.tp.Partition
		sc.byPos[pos] = int32(slot)
	}
	// acc is in the record's order when the partitions are (byPos is the
	// identity) and each partition's batches are contiguous (slots, first
	// numbered in order of appearance, never go down).
	inOrder := true
	for pos, slot := range sc.byPos {
		if int(slot) != pos {
			inOrder = false
			break
		}
	}
	last := int32(0)
	for _, slot := range sc.slots {
		if !inOrder {
			break
		}
		inOrder = slot < 0 || slot >= last
		last = max(last, slot)
	}
	cbs := acc[:len(acc):len(acc)]
	if !inOrder {
		cbs = make([]records.CommittedBatch, len(acc))
	}
	// Each partition's batches go after those of the partitions before it.
	sc.next = resize(sc.next, nparts)
	start := int32(0)
	for pos, slot := range sc.byPos {
		n := sc.counts[slot]
		fps[pos].Batches = cbs[start : start+n : start+n]
		sc.next[slot] = start
		start += n
	}
	if !inOrder {
		k := 0
		for _, slot := range sc.slots {
			if slot >= 0 {
				cbs[sc.next[slot]] = acc[k]
				sc.next[slot]++
				k++
			}
		}
	}
	return rec
}

// checkCommitBatch checks what the produce path should already have
// refused (SPEC §2), so that no input can break the index's invariants.
func checkCommitBatch(b *diskless.CommitBatch, fileSize int64) *kerr.Error {
	switch {
	case b.Magic != 2,
		b.LastOffsetDelta < 0,
		b.ByteOffset < 0, b.ByteSize < 1, int64(b.ByteOffset)+int64(b.ByteSize) > fileSize,
		b.TimestampType != batch.TimestampCreateTime && b.TimestampType != batch.TimestampLogAppendTime:
		return kerr.InvalidRecord
	case b.Txn < diskless.TxnNone || b.Txn > diskless.TxnAbort || b.Txn != diskless.TxnNone && b.ProducerID < 0:
		return kerr.InvalidRecord
	case b.Txn >= diskless.TxnCommit:
		// A marker: baseSequence −1, no sequence to check (SPEC §15).
		if b.LastOffsetDelta != 0 {
			return kerr.InvalidRecord
		}
	case b.ProducerID >= 0 && (b.BaseSequence < 0 || b.LastSequence != batch.AddSequence(b.BaseSequence, b.LastOffsetDelta)):
		return kerr.InvalidRecord
	}
	return nil
}

// checkProducer applies SPEC §3 to an idempotent batch at log-append time
// t. done is true when the batch must not be appended: res is then a
// duplicate's original answer or an error. ps is the batch's producer
// state (nil if none, or no producer id), for recordProducer.
func (s *state) checkProducer(p *partition, b *diskless.CommitBatch, t int64) (ps *producerState, res diskless.CommitBatchResult, done bool) {
	if b.ProducerID < 0 {
		return nil, res, false
	}
	ps = p.producers[b.ProducerID]
	if b.Txn >= diskless.TxnCommit {
		// A marker: the transaction coordinator writes markers once a
		// transaction's outcome is durable, and they carry no sequence
		// (SPEC §15).
		return ps, res, false
	}
	if ps == nil || s.expired(ps, t) {
		// New, expired or removed producer: any first sequence.
		return ps, res, false
	}
	switch {
	case b.ProducerEpoch < ps.epoch:
		return ps, errorResult(kerr.InvalidProducerEpoch), true
	case b.ProducerEpoch > ps.epoch:
		if b.BaseSequence != 0 {
			return ps, errorResult(kerr.OutOfOrderSequenceNumber), true
		}
		return ps, res, false
	}
	if e := ps.find(b.BaseSequence, b.LastSequence); e != nil {
		return ps, diskless.CommitBatchResult{
			BaseOffset:     e.baseOffset,
			LogAppendTime:  e.appendTime,
			LogStartOffset: p.logStart,
			Duplicate:      true,
		}, true
	}
	if b.BaseSequence != batch.AddSequence(ps.lastSeq(), 1) {
		return ps, errorResult(kerr.OutOfOrderSequenceNumber), true
	}
	return ps, res, false
}

// replayCommit answers a repeated CommitFile for a file still in the
// file table (slot fi) when the original answer is no longer cached:
// batches found in the file's runs get their assigned offsets and
// Duplicate; others (refused the first time, or since deleted) get
// KAFKA_STORAGE_ERROR, since their original answer is unknown. The index
// keeps runs, not batches: a batch's offset is its run's base offset plus
// the records of the request's batches of the partition that precede it
// in the run, which must tile the run's bytes up to it (a repeat carries
// the same batches as the original). A key the shard has forgotten is not
// in the file table: see forgetClosedFilesAfterMs for why no repeat comes
// that late.
func (s *state) replayCommit(req *diskless.CommitFileRequest, fi int32) []diskless.CommitBatchResult {
	f := &s.files[fi]
	results := make([]diskless.CommitBatchResult, len(req.Batches))
	// The request's batches by partition, in byte order.
	byPart := make(map[diskless.TopicPartition][]int)
	for i := range req.Batches {
		b := &req.Batches[i]
		tp := diskless.TopicPartition{TopicID: b.TopicID, Partition: b.Partition}
		byPart[tp] = append(byPart[tp], i)
	}
	for tp, idx := range byPart {
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Compare(req.Batches[a].ByteOffset, req.Batches[b].ByteOffset)
		})
		p := s.partitions[tp]
		for k, i := range idx {
			b := &req.Batches[i]
			results[i] = errorResult(kerr.KafkaStorageError)
			if p == nil {
				continue
			}
			e := s.findInFile(p, fi, b.ByteOffset)
			if e == nil {
				continue
			}
			// Walk back over the request's batches that tile the run up
			// to b, counting their offsets.
			pos, base := int64(b.ByteOffset), e.baseOffset
			for j := k - 1; j >= 0 && pos > int64(e.byteOffset); j-- {
				prev := &req.Batches[idx[j]]
				if int64(prev.ByteOffset)+int64(prev.ByteSize) != pos {
					break
				}
				pos = int64(prev.ByteOffset)
				base += int64(prev.LastOffsetDelta) + 1
			}
			if pos != int64(e.byteOffset) || base+int64(b.LastOffsetDelta) > e.lastOffset() {
				continue
			}
			results[i] = diskless.CommitBatchResult{
				BaseOffset:     base,
				LogAppendTime:  f.appendTime,
				LogStartOffset: p.logStart,
				Duplicate:      true,
			}
		}
	}
	return results
}

// findInFile returns p's run of the file in slot fi whose bytes hold
// byteOffset. Commit numbers (fileEntry.seq) never decrease along a
// partition's index — slot numbers do not follow commit order once slots
// are reused — and a file's runs in a partition are contiguous, so they
// are found by binary search.
func (s *state) findInFile(p *partition, fi, byteOffset int32) *runEntry {
	x := &p.runs
	n := x.len()
	seq := s.files[fi].seq
	for i := x.search(n, func(e *runEntry) bool { return s.files[e.file].seq >= seq }); i < n; i++ {
		e := x.at(i)
		if e.file != fi {
			break
		}
		if e.byteOffset <= byteOffset && int64(byteOffset) < int64(e.byteOffset)+int64(e.byteSize) {
			return e
		}
	}
	return nil
}
