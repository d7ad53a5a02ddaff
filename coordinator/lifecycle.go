package coordinator

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// The topic lifecycle (docs/format/metadata-records.md, records 100, 101,
// 103, 104, 112): DeleteTopic, the purge of deleted topics, CreatePartitions
// and config changes. Every catalog change is a record 104 on shard 0, the
// commit point; the partitions' records go to their shards before it
// (creation) or after it (deletion), and what a crash leaves in between is
// found and finished by the purge pass.

// Bounds of the purge of a deleted topic: one record 103 removes at most
// purgeRunsPerRecord runs of a partition (index entries: the work a
// record's apply does), and one pass at most purgeRunsPerPass per shard,
// each record in a group of its own so that commits go on between them
// (BenchmarkPurgeTopic: a topic of a million runs is purged without a
// commit waiting longer than one step).
const (
	purgeRunsPerRecord = 10_000
	purgeRunsPerPass   = 100_000
)

// DeleteTopic deletes the topic with id (DeleteTopics, SPEC §6) and
// returns it as it was. Record 101 on shard 0 is the commit point: once it
// is durable the topic is gone from the catalog, so Metadata, produce and
// fetch no longer see it, and fetches waiting on it are woken (they answer
// at once). Then record 101 goes to every other shard holding its
// partitions, which marks them deleted; their batches are purged in the
// background (runPurge) and their files released for deletion, objects
// shared with other topics only once no owner has live batches in them.
// Every consumer group's offsets of the topic go too (record 113 on each
// shard holding any, SPEC §6). A topic of the same name created later
// gets a new id and none of the old one's offsets.
//
// Errors: kerr.UnknownTopicID when no topic has id; ErrClosed, ctx's
// error, a storage failure. A failure after the commit point is not
// returned: the purge pass finishes the deletion.
func (c *Coordinator) DeleteTopic(ctx context.Context, id diskless.TopicID) (diskless.Topic, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	t, ok := c.TopicByID(id)
	if !ok {
		return diskless.Topic{}, kerr.UnknownTopicID
	}
	resp := c.shards[0].do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		if st.topics[id] == nil {
			return nil, kerr.UnknownTopicID
		}
		return []records.Record{&records.TopicDeleted{TopicID: id}}, nil
	}})
	if resp.err != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: delete topic %q: %w", t.Name, resp.err)
	}
	c.notify() // long-polls on the topic end
	for s := range c.topicShards(t) {
		if s == 0 {
			continue // marked by the record above
		}
		if err := c.deleteTopicsAt(ctx, s, []diskless.TopicID{id}); err != nil {
			c.logger.Warn("coordinator: marking a deleted topic's partitions failed; the purge pass retries",
				"topic", t.Name, "shard", s, "err", err)
		}
	}
	if err := c.dropTopicOffsets(ctx, t.Name, id); err != nil {
		c.logger.Warn("coordinator: removing a deleted topic's consumer-group offsets failed; the purge pass retries",
			"topic", t.Name, "err", err)
	}
	c.kickLifecycle()
	return t, nil
}

// topicShards returns the shards holding partitions of t.
func (c *Coordinator) topicShards(t diskless.Topic) map[int32]struct{} {
	out := make(map[int32]struct{})
	for p := int32(0); p < t.Partitions && len(out) < int(c.cfg.NumShards); p++ {
		out[c.ShardFor(t.ID, p)] = struct{}{}
	}
	return out
}

// markDeleted writes record 101 for topic id on s, unless s holds no
// partition of it or has marked them already.
func (s *shard) markDeleted(ctx context.Context, id diskless.TopicID) error {
	resp := s.do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		if _, done := st.deletedTopics[id]; done || len(st.topicPartitions(id)) == 0 {
			return nil, nil
		}
		return []records.Record{&records.TopicDeleted{TopicID: id}}, nil
	}})
	return resp.err
}

// runPurge runs one pass of the deleted topics' purge (Config: every
// lifecycleInterval, and at once after DeleteTopic; tests call it
// directly). First it finds partitions whose topic is not in the catalog
// and that are not marked deleted — a DeleteTopic that failed after its
// commit point, or a CreateTopic that failed before its — and marks them
// (record 101), and removes consumer-group offsets of topics the catalog
// does not hold (record 113). Then, per shard, it moves the log start of deleted
// partitions forward (records 103, bounded as above) and removes the
// partitions of topics it emptied (record 112). The error joins the
// shards' failures; the next pass retries.
func (c *Coordinator) runPurge(ctx context.Context) error {
	c.jobs.purge.Lock()
	defer c.jobs.purge.Unlock()
	var errs []error
	if c.owns(c.shards[0]) {
		// The catalog's writer alone tells a creation in progress from
		// partitions left over (createMu).
		if err := c.markOrphans(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.purgeTopicOffsets(ctx); err != nil {
		errs = append(errs, err)
	}
	for _, s := range c.shards {
		if !c.owns(s) {
			continue // its owner's job
		}
		if err := s.purge(ctx); err != nil {
			errs = append(errs, fmt.Errorf("coordinator: purge on shard %d: %w", s.id, err))
			if errors.Is(err, diskless.ErrClosed) || ctx.Err() != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// markOrphans writes record 101 for the topics of partitions the catalog
// does not hold. createMu keeps topic creation (whose partitions precede
// its catalog record) out meanwhile.
func (c *Coordinator) markOrphans(ctx context.Context) error {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	cat := c.catalog.Load()
	var errs []error
	for _, s := range c.shards {
		s.mu.RLock()
		var orphans []diskless.TopicID
		if s.mu.failed == nil {
			seen := make(map[diskless.TopicID]bool)
			for tp, p := range s.mu.st.partitions {
				if p.deleted || seen[tp.TopicID] || cat.byID[tp.TopicID] != nil {
					continue
				}
				seen[tp.TopicID] = true
				orphans = append(orphans, tp.TopicID)
			}
		}
		s.mu.RUnlock()
		for _, id := range orphans {
			c.logger.Info("coordinator: deleting partitions of a topic the catalog does not hold", "shard", s.id, "topic_id", id.String())
			if err := c.deleteTopicsAt(ctx, s.id, []diskless.TopicID{id}); err != nil {
				errs = append(errs, fmt.Errorf("coordinator: shard %d: mark topic %s deleted: %w", s.id, id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// purge runs one pass of the purge on s: records 103, one per group, until
// purgeRunsPerPass runs went or nothing is left, then record 112 for
// each deleted topic whose partitions here are all empty.
func (s *shard) purge(ctx context.Context) error {
	for budget := purgeRunsPerPass; budget > 0; {
		var n int
		resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
			rec, k := st.nextPurge(min(budget, purgeRunsPerRecord))
			if rec == nil {
				return nil, nil
			}
			n = k
			return []records.Record{rec}, nil
		}})
		if resp.err != nil {
			return resp.err
		}
		if n == 0 {
			break
		}
		budget -= n
		s.c.stats.PurgedRuns.Add(int64(n))
	}
	resp := s.do(&request{ctx: ctx, deferred: true, build: func(st *state) ([]records.Record, error) {
		var recs []records.Record
		for _, id := range sortedIDs(st.deletedTopics) {
			empty := true
			for _, p := range st.topicPartitions(id) {
				if len(p.segs) > 0 || p.runs.len() > 0 || p.logStart != p.hwm {
					empty = false
					break
				}
			}
			if empty {
				recs = append(recs, &records.TopicPurged{TopicID: id})
			}
		}
		return recs, nil
	}})
	return resp.err
}

// nextPurge returns the record 103 that removes the next at most max
// runs of a deleted partition (the first, in topic id and partition
// order, that holds any), and how many it removes; nil when none is left.
func (st *state) nextPurge(max int) (*records.RecordsDeleted, int) {
	for _, id := range sortedIDs(st.deletedTopics) {
		parts := st.topicPartitions(id)
		slices.SortFunc(parts, func(a, b *partition) int { return diskless.ComparePartitions(a.tp, b.tp) })
		for _, p := range parts {
			n := len(p.segs) + p.runs.len()
			if n == 0 && p.logStart == p.hwm {
				continue
			}
			k, start := n, p.hwm
			if n > max {
				k, start = max, st.entryCoordinate(p, max).BaseOffset
			}
			return &records.RecordsDeleted{TopicID: id, Partition: p.tp.Partition, NewLogStartOffset: start}, k
		}
	}
	return nil, 0
}

func sortedIDs(set map[diskless.TopicID]struct{}) []diskless.TopicID {
	ids := slices.Collect(maps.Keys(set))
	slices.SortFunc(ids, func(a, b diskless.TopicID) int {
		return diskless.ComparePartitions(diskless.TopicPartition{TopicID: a}, diskless.TopicPartition{TopicID: b})
	})
	return ids
}

// CreatePartitions grows the topic with id to count partitions
// (CreatePartitions, SPEC §6) and returns it. The new partitions' records
// 100 go to their shards first, then record 104 with the new count to
// shard 0, the commit point (docs/format/metadata-records.md §104): a
// partition left by an attempt that failed in between is used again.
// With validateOnly nothing is written. Errors: kerr.UnknownTopicOrPartition;
// kerr.InvalidPartitions (wrapped, with Kafka's message) for a count that
// is not an increase or above MaxPartitionsPerTopic; ErrClosed, ctx's
// error, a storage failure.
func (c *Coordinator) CreatePartitions(ctx context.Context, id diskless.TopicID, count int32, validateOnly bool) (diskless.Topic, error) {
	c.createMu.Lock()
	defer c.createMu.Unlock()
	t, ok := c.TopicByID(id)
	switch {
	case !ok:
		return diskless.Topic{}, kerr.UnknownTopicOrPartition
	case count == t.Partitions:
		return t, kafkaMessage(kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partition(s).", t.Partitions))
	case count < t.Partitions:
		return t, kafkaMessage(kerr.InvalidPartitions, fmt.Sprintf("The topic %s currently has %d partition(s); %d would not be an increase.", t.Name, t.Partitions, count))
	case count > MaxPartitionsPerTopic:
		return t, fmt.Errorf("%w: %d partitions, at most %d are allowed", kerr.InvalidPartitions, count, MaxPartitionsPerTopic)
	}
	if validateOnly {
		t.Partitions = count
		return t, nil
	}
	byShard := make(map[int32][]int32)
	for p := t.Partitions; p < count; p++ {
		s := c.ShardFor(id, p)
		byShard[s] = append(byShard[s], p)
	}
	var firstErr error
	for _, s := range slices.Sorted(maps.Keys(byShard)) {
		err := c.createPartitionsAt(ctx, s, []diskless.TopicPartitions{{ID: id, Name: t.Name, Partitions: byShard[s]}})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: create partitions of %q: %w", t.Name, firstErr)
	}
	resp := c.shards[0].do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		te := st.topics[id]
		if te == nil {
			return nil, kerr.UnknownTopicOrPartition
		}
		if te.partitions >= count {
			return nil, kafkaMessage(kerr.InvalidPartitions, fmt.Sprintf("Topic already has %d partition(s).", te.partitions))
		}
		return []records.Record{&records.TopicConfig{TopicID: id, TopicName: te.name, NumPartitions: count, Configs: te.configs}}, nil
	}})
	if resp.err != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: create partitions of %q: %w", t.Name, resp.err)
	}
	t, _ = c.TopicByID(id)
	return t, nil
}

// ConfigChange is diskless.ConfigChange, the argument of AlterTopicConfigs.
type ConfigChange = diskless.ConfigChange

// ErrDisablementInProgress is returned (wrapped, with the topic and epoch)
// by AlterTopicConfigs for a change of diskless.enable or
// diskless.disable.policy while the topic is DISABLING (SPEC §10):
// REASSIGNMENT_IN_PROGRESS (60), Kafka's code for an operation on the
// topic that must finish first (KIP-950 proposed a code of its own, which
// no client knows).
var ErrDisablementInProgress = kerr.ReassignmentInProgress

// AlterTopicConfigs changes the configs of the topic with id and returns
// the topic after the change (as it would be, with ValidateOnly). The
// whole new set of configs is one record 104 on shard 0; retention.*,
// max.message.bytes and message.timestamp.* take effect for the next
// produce and retention pass. Setting diskless.enable=false on an ENABLED
// topic also moves it to DISABLING with a new epoch (record 111, in the
// same group) and starts the disablement (SPEC §10); setting it true on a
// DISABLED topic moves it to ENABLED with a new epoch. A change that
// changes nothing writes nothing. Errors: kerr.UnknownTopicOrPartition;
// a *topicconfig.Error (INVALID_CONFIG naming the key; INVALID_REQUEST
// when its Request is set); ErrDisablementInProgress (wrapped); Apply's
// error; ErrClosed, ctx's error, a storage failure.
func (c *Coordinator) AlterTopicConfigs(ctx context.Context, id diskless.TopicID, ch ConfigChange) (diskless.Topic, error) {
	if ch.ValidateOnly {
		s := c.shards[0]
		s.mu.RLock()
		defer s.mu.RUnlock()
		t, _, err := s.mu.st.configChange(id, ch)
		return t, err
	}
	var (
		out      diskless.Topic
		disabled bool
	)
	resp := c.shards[0].do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		t, recs, err := st.configChange(id, ch)
		out = t
		for _, r := range recs {
			if d, ok := r.(*records.TopicDisablement); ok && diskless.TopicState(d.State) == diskless.TopicDisabling {
				disabled = true
			}
		}
		return recs, err
	}})
	if resp.err != nil {
		return diskless.Topic{}, resp.err
	}
	if disabled {
		c.logger.Info("coordinator: disabling diskless on a topic", "topic", out.Name,
			"epoch", out.Disablement.Epoch, "policy", out.Disablement.Policy.String())
		c.notify() // long-polls on the topic end
		c.kickLifecycle()
	}
	if t, ok := c.TopicByID(id); ok {
		out = t
	}
	return out, nil
}

// configChange decides a config change against shard 0's state: the topic
// as it would be after it and the records that make it so (none when
// nothing changes).
func (st *state) configChange(id diskless.TopicID, ch ConfigChange) (diskless.Topic, []records.Record, error) {
	te := st.topics[id]
	if te == nil {
		return diskless.Topic{}, nil, kerr.UnknownTopicOrPartition
	}
	cur := make(map[string]string, len(te.configs))
	for _, e := range te.configs {
		cur[e.Name] = e.Value
	}
	next, err := ch.Apply(maps.Clone(cur))
	if err != nil {
		return diskless.Topic{}, nil, err
	}
	cfg, err := topicconfig.Parse(next)
	if err != nil {
		return diskless.Topic{}, nil, err
	}
	d := te.disable
	if d.State == diskless.TopicDisabling {
		for _, n := range ch.Names {
			if n == topicconfig.DisklessEnable || n == topicconfig.DisklessDisablePolicy {
				return diskless.Topic{}, nil, fmt.Errorf("%w: diskless disablement of topic %s is in progress (epoch %d); retry once it is DISABLED",
					ErrDisablementInProgress, te.name, d.Epoch)
			}
		}
	}
	var recs []records.Record
	if !maps.Equal(cur, next) {
		rec := &records.TopicConfig{TopicID: id, TopicName: te.name, NumPartitions: te.partitions}
		for _, n := range slices.Sorted(maps.Keys(next)) {
			rec.Configs = append(rec.Configs, records.TopicConfigEntry{Name: n, Value: next[n]})
		}
		recs = append(recs, rec)
	}
	switch {
	case d.State == diskless.TopicEnabled && !cfg.DisklessEnabled:
		d = diskless.Disablement{State: diskless.TopicDisabling, Epoch: d.Epoch + 1, Policy: diskless.DisableRetain}
		if cfg.DisableDelete {
			d.Policy = diskless.DisableDelete
		}
	case d.State == diskless.TopicDisabled && cfg.DisklessEnabled:
		d = diskless.Disablement{State: diskless.TopicEnabled, Epoch: d.Epoch + 1}
	}
	if d != te.disable {
		recs = append(recs, &records.TopicDisablement{TopicID: id, State: int8(d.State), Epoch: d.Epoch, Policy: int8(d.Policy)})
	}
	return diskless.Topic{ID: id, Name: te.name, Partitions: te.partitions, Config: cfg, Disablement: d}, recs, nil
}

// TopicObjectKeys returns the object keys of the files holding batches of
// the topic with id (for dropping its cached blocks at its disablement),
// sorted. It scans the topic's batch indexes under each shard's read lock,
// one shard at a time.
func (c *Coordinator) TopicObjectKeys(id diskless.TopicID) []string {
	t, ok := c.TopicByID(id)
	if !ok {
		return nil
	}
	keys := make(map[string]struct{})
	for s := range c.topicShards(t) {
		sh := c.shards[s]
		sh.mu.RLock()
		if sh.mu.failed == nil {
			st := sh.mu.st
			for _, p := range st.topicPartitions(id) {
				for i := range p.segs {
					keys[st.files[p.segs[i].file].key] = struct{}{}
				}
				x := &p.runs
				last := int32(-1)
				for i, n := 0, x.len(); i < n; {
					run := x.slice(i, n)
					for j := range run {
						if f := run[j].file; f != last {
							keys[st.files[f].key] = struct{}{}
							last = f
						}
					}
					i += len(run)
				}
			}
		}
		sh.mu.RUnlock()
	}
	return slices.Sorted(maps.Keys(keys))
}

// PartitionSizes returns the bytes of record batches each partition of the
// topic with id holds (DescribeLogDirs), indexed by partition; nil for an
// unknown topic. A commit being written may already count.
func (c *Coordinator) PartitionSizes(id diskless.TopicID) []int64 {
	t, ok := c.TopicByID(id)
	if !ok {
		return nil
	}
	out := make([]int64, t.Partitions)
	for p := range t.Partitions {
		s := c.shards[c.ShardFor(id, p)]
		s.mu.RLock()
		if s.mu.failed == nil {
			if part := s.mu.st.partitions[diskless.TopicPartition{TopicID: id, Partition: p}]; part != nil {
				out[p] = part.bytes
			}
		}
		s.mu.RUnlock()
	}
	return out
}

// kafkaMessage wraps code with the message Kafka answers with it (which
// ends with a full stop, unlike Go's error strings).
func kafkaMessage(code *kerr.Error, msg string) error { return fmt.Errorf("%w: %s", code, msg) }
