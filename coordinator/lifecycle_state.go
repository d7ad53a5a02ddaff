package coordinator

import (
	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// The topic lifecycle's records as the state applies them
// (docs/format/metadata-records.md, records 101, 104, 111, 112): a topic's
// deletion is a soft delete — record 101 marks the partitions, records
// 103 empty them in bounded steps, record 112 removes them — and its
// diskless state moves ENABLED → DISABLING → DISABLED → ENABLED.

// applyTopicDeleted applies record 101: the topic leaves the catalog (on
// shard 0) and this shard's partitions of it are marked deleted. Their
// batches stay until the purge (O(partitions), not O(batches)). A topic
// the shard holds nothing of, or marked already, changes nothing.
func (s *state) applyTopicDeleted(r *records.TopicDeleted) {
	if t, ok := s.topics[r.TopicID]; ok {
		delete(s.topicNames, t.name)
		delete(s.topics, r.TopicID)
	}
	if _, done := s.deletedTopics[r.TopicID]; done {
		return
	}
	marked := false
	for _, p := range s.topicPartitions(r.TopicID) {
		p.deleted = true
		marked = true
	}
	if marked {
		s.deletedTopics[r.TopicID] = struct{}{}
	}
}

// topicPartitions returns this shard's partitions of topic id, in
// partition order.
func (s *state) topicPartitions(id diskless.TopicID) []*partition {
	var out []*partition
	for _, p := range s.topicParts[id] {
		if p != nil {
			out = append(out, p)
		}
	}
	for tp, p := range s.partitions {
		// Partitions numbered past MaxPartitionsPerTopic are not in
		// topicParts (only a log from elsewhere holds any).
		if tp.TopicID == id && tp.Partition >= MaxPartitionsPerTopic {
			out = append(out, p)
		}
	}
	return out
}

// applyTopicPurged applies record 112: the shard's deleted partitions of
// the topic, all empty, leave the state.
func (s *state) applyTopicPurged(r *records.TopicPurged) error {
	if _, ok := s.deletedTopics[r.TopicID]; !ok {
		return inconsistent("purge of topic %s, which has no deleted partition here", r.TopicID)
	}
	parts := s.topicPartitions(r.TopicID)
	for _, p := range parts {
		if len(p.segs) > 0 || p.runs.len() > 0 || p.logStart != p.hwm {
			return inconsistent("purge of topic %s: partition %d still holds [%d, %d)", r.TopicID, p.tp.Partition, p.logStart, p.hwm)
		}
	}
	for _, p := range parts {
		delete(s.partitions, p.tp)
	}
	delete(s.topicParts, r.TopicID)
	delete(s.deletedTopics, r.TopicID)
	return nil
}

// applyTopicDisablement applies record 111 (SPEC §10): the moves
// ENABLED → DISABLING and DISABLED → ENABLED take the next epoch,
// DISABLING → DISABLED keeps it.
func (s *state) applyTopicDisablement(r *records.TopicDisablement) error {
	t := s.topics[r.TopicID]
	if t == nil {
		return inconsistent("disablement state of unknown topic %s", r.TopicID)
	}
	next := diskless.Disablement{State: diskless.TopicState(r.State), Epoch: r.Epoch, Policy: diskless.DisablePolicy(r.Policy)}
	if !validDisablementMove(t.disable, next) {
		return inconsistent("topic %q: disablement state %s epoch %d policy %d does not follow %s epoch %d",
			t.name, next.State, next.Epoch, next.Policy, t.disable.State, t.disable.Epoch)
	}
	nt := *t // entries are immutable once published
	nt.disable = next
	s.topics[r.TopicID] = &nt
	return nil
}

// validDisablementMove reports whether next may follow cur (record 111).
func validDisablementMove(cur, next diskless.Disablement) bool {
	if next.Policy != diskless.DisableRetain && next.Policy != diskless.DisableDelete {
		return false
	}
	switch {
	case cur.State == diskless.TopicEnabled && next.State == diskless.TopicDisabling:
		return next.Epoch == cur.Epoch+1
	case cur.State == diskless.TopicDisabling && next.State == diskless.TopicDisabled:
		return next.Epoch == cur.Epoch && next.Policy == cur.Policy
	case cur.State == diskless.TopicDisabled && next.State == diskless.TopicEnabled:
		return next.Epoch == cur.Epoch+1 && next.Policy == diskless.DisableRetain
	}
	return false
}
