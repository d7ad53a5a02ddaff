package coordinator

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// catalog is an immutable snapshot of the topic catalog, replaced whole
// when shard 0 commits a catalog change.
type catalog struct {
	byID   map[diskless.TopicID]*diskless.Topic
	byName map[string]*diskless.Topic
	sorted []*diskless.Topic // by name
	// version counts the catalogs published (group.Topics.Version).
	version uint64
	// replaced is closed once a newer catalog is published: what
	// AwaitDisablement waits on.
	replaced chan struct{}
}

// publishCatalog publishes the catalog held by st (shard 0's state). Only
// shard 0's driver (or Open, before drivers run) calls it.
func (c *Coordinator) publishCatalog(st *state) {
	cat := &catalog{
		byID:     make(map[diskless.TopicID]*diskless.Topic, len(st.topics)),
		byName:   make(map[string]*diskless.Topic, len(st.topics)),
		sorted:   make([]*diskless.Topic, 0, len(st.topics)),
		replaced: make(chan struct{}),
	}
	if old := c.catalog.Load(); old != nil {
		cat.version = old.version + 1
	}
	for _, te := range st.topics {
		t := &diskless.Topic{ID: te.id, Name: te.name, Partitions: te.partitions, Config: te.config, Disablement: te.disable}
		cat.byID[t.ID] = t
		cat.byName[t.Name] = t
		cat.sorted = append(cat.sorted, t)
	}
	slices.SortFunc(cat.sorted, func(a, b *diskless.Topic) int { return strings.Compare(a.Name, b.Name) })
	if old := c.catalog.Swap(cat); old != nil {
		close(old.replaced) // each catalog is swapped out once
	}
}

// Topic returns the topic named name, if it exists. Topics are immutable
// snapshots: Config.Raw is shared with the catalog and must not be
// modified (a config change publishes a new Topic). Produce and Fetch look
// topics up on every request, so this does not allocate.
func (c *Coordinator) Topic(name string) (diskless.Topic, bool) {
	t := c.catalog.Load().byName[name]
	if t == nil {
		return diskless.Topic{}, false
	}
	return *t, true
}

// TopicByID returns the topic with id, if it exists.
func (c *Coordinator) TopicByID(id diskless.TopicID) (diskless.Topic, bool) {
	t := c.catalog.Load().byID[id]
	if t == nil {
		return diskless.Topic{}, false
	}
	return *t, true
}

// Topics returns every topic, sorted by name.
func (c *Coordinator) Topics() []diskless.Topic {
	cat := c.catalog.Load()
	out := make([]diskless.Topic, len(cat.sorted))
	for i, t := range cat.sorted {
		out[i] = *t
	}
	return out
}

// collisionName maps a topic name to the name its metrics would use: Kafka
// refuses two topics that differ only in '.' versus '_'.
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// CreateTopic creates a topic with partitions partitions and the given
// topic configs (SPEC §11) under a new random TopicID, and returns it once
// it is durable. Errors: a *topicconfig.Error for an invalid config
// (answer INVALID_CONFIG); *kerr.Error (wrapped, match with errors.Is or
// errors.As) INVALID_TOPIC_EXCEPTION for a name breaking Kafka's rules or
// colliding with an existing one in '.' versus '_', INVALID_PARTITIONS
// for partitions outside [1, MaxPartitionsPerTopic], TOPIC_ALREADY_EXISTS;
// otherwise ErrClosed, ctx's error or a storage failure.
//
// The partitions' records (100) are made durable on their shards first,
// then the catalog record (104) on shard 0, which is the commit point:
// after a failure in between the topic does not exist and its partition
// records are ignored (docs/format/metadata-records.md).
func (c *Coordinator) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) (diskless.Topic, error) {
	if err := topicconfig.ValidateName(name); err != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: %w: %s", kerr.InvalidTopicException, err)
	}
	if partitions < 1 || partitions > MaxPartitionsPerTopic {
		return diskless.Topic{}, fmt.Errorf("coordinator: %w: %d partitions, must be in [1, %d]",
			kerr.InvalidPartitions, partitions, MaxPartitionsPerTopic)
	}
	cfg, err := topicconfig.Parse(configs)
	if err != nil {
		return diskless.Topic{}, err
	}
	if err := topicconfig.ValidateCreate(cfg); err != nil {
		return diskless.Topic{}, err
	}

	c.createMu.Lock()
	defer c.createMu.Unlock()
	cat := c.catalog.Load()
	if _, ok := cat.byName[name]; ok {
		return diskless.Topic{}, fmt.Errorf("coordinator: %w: %q", kerr.TopicAlreadyExists, name)
	}
	cn := collisionName(name)
	for _, t := range cat.sorted {
		if collisionName(t.Name) == cn {
			return diskless.Topic{}, fmt.Errorf("coordinator: %w: topic %q collides with existing topic %q",
				kerr.InvalidTopicException, name, t.Name)
		}
	}
	// Offsets a deleted topic of this name left (its DeleteTopic failed or
	// crashed before removing them, and no purge pass ran since) are not
	// the new topic's.
	if err := c.dropTopicOffsets(ctx, name, diskless.TopicID{}); err != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: create topic %q: %w", name, err)
	}
	id, err := newTopicID(cat)
	for err == nil && c.idInUse(id) {
		id, err = newTopicID(cat)
	}
	if err != nil {
		return diskless.Topic{}, err
	}

	// Partition records first, on every owning shard in parallel.
	byShard := make(map[int32][]int32)
	for p := range partitions {
		s := c.ShardFor(id, p)
		byShard[s] = append(byShard[s], p)
	}
	// The id is new (no shard holds a partition of it), so each shard
	// creates its partitions afresh.
	errs := make(chan error, len(byShard))
	for s, parts := range byShard {
		go func() {
			errs <- c.createPartitionsAt(ctx, s, []diskless.TopicPartitions{{ID: id, Name: name, Partitions: parts}})
		}()
	}
	var firstErr error
	for range byShard {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: create topic %q: %w", name, firstErr)
	}

	// The catalog record: the commit point.
	rec := &records.TopicConfig{TopicID: id, TopicName: name, NumPartitions: partitions}
	for _, n := range slices.Sorted(maps.Keys(cfg.Raw)) {
		rec.Configs = append(rec.Configs, records.TopicConfigEntry{Name: n, Value: cfg.Raw[n]})
	}
	resp := c.shards[0].do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		if _, ok := st.topicNames[name]; ok {
			return nil, fmt.Errorf("coordinator: %w: %q", kerr.TopicAlreadyExists, name)
		}
		if st.topics[id] != nil {
			return nil, fmt.Errorf("coordinator: topic id %s exists already", id)
		}
		return []records.Record{rec}, nil
	}})
	if resp.err != nil {
		return diskless.Topic{}, fmt.Errorf("coordinator: create topic %q: %w", name, resp.err)
	}
	t, ok := c.TopicByID(id)
	if !ok {
		return diskless.Topic{}, fmt.Errorf("coordinator: create topic %q: not in the catalog after commit", name)
	}
	return t, nil
}

// newTopicID returns a random version-4 UUID that is not zero and not in
// use.
func newTopicID(cat *catalog) (diskless.TopicID, error) {
	for {
		var id diskless.TopicID
		if _, err := rand.Read(id[:]); err != nil {
			return id, fmt.Errorf("coordinator: topic id: %w", err)
		}
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if _, used := cat.byID[id]; !used && id != (diskless.TopicID{}) {
			return id, nil
		}
	}
}

// idInUse reports whether a shard holds partitions of topic id: a deleted
// topic still being purged, or the leftovers of a failed creation. A new
// topic never takes such an id, so a re-created topic's batches are never
// the old one's (docs/format/metadata-records.md §101).
func (c *Coordinator) idInUse(id diskless.TopicID) bool {
	for _, s := range c.shards {
		s.mu.RLock()
		_, used := s.mu.st.topicParts[id]
		s.mu.RUnlock()
		if used {
			return true
		}
	}
	return false
}
