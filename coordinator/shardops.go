package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/diskless-sidecar/sidecar/coordinator/records"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// The operations of one shard that the coordinator RPCs carry between
// sidecars (SPEC §9: DisklessCreatePartitions, DisklessDeleteTopics,
// DisklessDeleteFiles, DisklessAllocateProducerIds), and the check that a
// shard is hosted here. The catalog operations (CreateTopic, DeleteTopic,
// CreatePartitions) are built from them.

// Serving reports whether shard is hosted by this coordinator and takes
// requests: nil, or diskless.ErrNotCoordinator (wrapped) for a shard out
// of range, diskless.ErrClosed once Close began, the shard's failure
// (wrapping diskless.ErrShardFenced or diskless.ErrShardFailed). It does
// not block on the shard's driver.
func (c *Coordinator) Serving(shard int32) error {
	if shard < 0 || shard >= c.cfg.NumShards {
		return fmt.Errorf("%w: shard %d of %d", diskless.ErrNotCoordinator, shard, c.cfg.NumShards)
	}
	c.closeMu.RLock()
	closed := c.closed
	c.closeMu.RUnlock()
	if closed {
		return diskless.ErrClosed
	}
	s := c.shards[shard]
	if r := s.roleOf(); r != roleHosted {
		return s.roleError(r)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.failed != nil {
		return s.failedError()
	}
	return nil
}

// shardFor returns shard's *shard, or diskless.ErrNotCoordinator for one
// out of range.
func (c *Coordinator) shardFor(shard int32) (*shard, error) {
	if shard < 0 || shard >= c.cfg.NumShards {
		return nil, fmt.Errorf("%w: shard %d of %d", diskless.ErrNotCoordinator, shard, c.cfg.NumShards)
	}
	return c.shards[shard], nil
}

// CreatePartitionsIn writes a record 100 for each of topics' partitions
// on shard, in one group (DisklessCreatePartitions, SPEC §9): the first
// step of a topic's creation or growth, before the catalog's record 104
// on shard 0. A partition that exists already, empty and not deleted —
// left by an attempt that failed before its record 104 — is taken as it
// is. Errors: a partition of another shard, or one that exists with
// batches or deleted (nothing written); diskless.ErrNotCoordinator,
// ErrClosed, ctx's error, a storage failure.
func (c *Coordinator) CreatePartitionsIn(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error {
	s, err := c.shardFor(shard)
	if err != nil {
		return err
	}
	for _, t := range topics {
		for _, p := range t.Partitions {
			if got := c.ShardFor(t.ID, p); got != shard {
				return fmt.Errorf("coordinator: partition %d of topic %q belongs to shard %d, not %d", p, t.Name, got, shard)
			}
		}
	}
	resp := s.do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		var recs []records.Record
		for _, t := range topics {
			for _, p := range t.Partitions {
				if old := st.partitions[diskless.TopicPartition{TopicID: t.ID, Partition: p}]; old != nil {
					if old.deleted || old.hwm != 0 {
						return nil, fmt.Errorf("coordinator: partition %d of topic %q exists already", p, t.Name)
					}
					continue
				}
				recs = append(recs, &records.PartitionCreated{TopicID: t.ID, TopicName: t.Name, Partition: p})
			}
		}
		return recs, nil
	}})
	return resp.err
}

// DeleteTopicsIn marks the partitions of each topic on shard deleted
// (record 101; DisklessDeleteTopics, SPEC §9), after shard 0's record 101,
// the deletion's commit point; the purge then removes their batches. A
// topic the shard holds nothing of, or has marked already, writes
// nothing. Errors: diskless.ErrNotCoordinator, ErrClosed, ctx's error, a
// storage failure.
func (c *Coordinator) DeleteTopicsIn(ctx context.Context, shard int32, ids []diskless.TopicID) error {
	s, err := c.shardFor(shard)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := s.markDeleted(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CloseFiles closes each of keys that shard released and has not closed
// (record 106 naming deleter, DisklessDeleteFiles, SPEC §9): deleter
// deletes the objects. Keys the shard does not hold released are skipped.
// Errors: diskless.ErrNotCoordinator, ErrClosed, ctx's error, a storage
// failure.
func (c *Coordinator) CloseFiles(ctx context.Context, shard, deleter int32, keys []string) error {
	s, err := c.shardFor(shard)
	if err != nil {
		return err
	}
	recs := make([]records.Record, len(keys))
	for i, k := range keys {
		recs[i] = &records.FileDeleted{ObjectKey: k, DeleterShard: deleter}
	}
	return s.closeFiles(ctx, recs)
}

// AllocateProducerIDBlock records a new block of producer ids for node
// on shard 0 (record 105; DisklessAllocateProducerIds, SPEC §9) and
// returns its first id and size: ids never handed out before, by any
// sidecar. Errors: diskless.ErrNotCoordinator, ErrClosed, ctx's error, a
// storage failure, ids exhausted.
func (c *Coordinator) AllocateProducerIDBlock(ctx context.Context, node int32) (first int64, size int32, err error) {
	var blk records.ProducerIDBlock
	resp := c.shards[0].do(&request{ctx: ctx, build: func(st *state) ([]records.Record, error) {
		blk = records.ProducerIDBlock{NodeID: node, FirstProducerID: st.nextProducerID, BlockSize: producerIDBlockSize}
		if blk.FirstProducerID > (1<<63-1)-producerIDBlockSize {
			return nil, errors.New("coordinator: producer ids exhausted")
		}
		return []records.Record{&blk}, nil
	}})
	if resp.err != nil {
		return -1, 0, resp.err
	}
	return blk.FirstProducerID, blk.BlockSize, nil
}

// The steps a coordinator's own operations take on other shards: at this
// coordinator when it hosts the shard (alone, it hosts all), else at the
// shard's owner through Config.Remote — also when the shard moved away
// between the check and the call.

// onShard runs local when this coordinator hosts shard, else (or when
// local finds the shard gone) remote.
func (c *Coordinator) onShard(shard int32, local, remote func() error) error {
	if !c.clustered() {
		return local()
	}
	if c.shards[shard].hosted() {
		err := local()
		if !errors.Is(err, diskless.ErrNotCoordinator) && !errors.Is(err, diskless.ErrShardLoading) &&
			!errors.Is(err, diskless.ErrShardFenced) {
			return err
		}
	}
	return remote()
}

func (c *Coordinator) createPartitionsAt(ctx context.Context, shard int32, topics []diskless.TopicPartitions) error {
	return c.onShard(shard,
		func() error { return c.CreatePartitionsIn(ctx, shard, topics) },
		func() error { return c.cfg.Remote.CreatePartitionsIn(ctx, shard, topics) })
}

func (c *Coordinator) deleteTopicsAt(ctx context.Context, shard int32, ids []diskless.TopicID) error {
	return c.onShard(shard,
		func() error { return c.DeleteTopicsIn(ctx, shard, ids) },
		func() error { return c.cfg.Remote.DeleteTopicsIn(ctx, shard, ids) })
}

// producerIDBlock records a block of producer ids for this node on
// shard 0.
func (c *Coordinator) producerIDBlock(ctx context.Context) (first int64, size int32, err error) {
	err = c.onShard(0,
		func() (err error) { first, size, err = c.AllocateProducerIDBlock(ctx, c.cfg.NodeID); return err },
		func() (err error) {
			first, size, err = c.cfg.Remote.AllocateProducerIDBlock(ctx, c.cfg.NodeID)
			return err
		})
	return first, size, err
}
