package coordinator

import (
	"context"
	"fmt"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// orphanBatchKeys is how many listed keys the orphan scan checks against
// the shards at once (one DescribeFiles per shard): S3 lists 1000 keys
// per request.
const orphanBatchKeys = 1000

// runOrphanScan deletes orphan objects (DESIGN §Coordinators, invariant
// 5): it lists "<ObjectKeyPrefix>/", skips objects younger than
// OrphanScanGracePeriod (by Config.Now; an object without a modification
// time is skipped too), and deletes every other object that no shard
// holds open — that is, no shard has it live or released (DescribeFiles):
// objects never committed (uploads whose commit failed or was refused)
// and objects whose deletion was recorded but that were written again by
// a late upload attempt. Config.OrphanScanInterval runs it periodically;
// tests call it directly.
//
// It needs every shard's answer: in one process the Coordinator has them
// all. With several sidecars sharing a bucket only the one leading shard 0
// runs it, asking the other shards through Config.Files.
//
// Counts go to Stats (OrphansFound, OrphansDeleted, DeleteFailures,
// OrphanScans). A failed delete is logged and retried by the next scan;
// a failed List or DescribeFiles ends the scan with an error (the next
// one starts over). With Config.Objects nil it does nothing.
func (c *Coordinator) runOrphanScan(ctx context.Context) error {
	if c.cfg.Objects == nil {
		return nil
	}
	c.jobs.orphans.Lock()
	defer c.jobs.orphans.Unlock()
	if !c.owns(c.shards[0]) {
		return nil // one scan per cluster: shard 0's owner runs it
	}
	cutoff := c.cfg.Now().Add(-c.cfg.OrphanScanGracePeriod)
	prefix := c.cfg.ObjectKeyPrefix + "/"
	batch := make([]string, 0, orphanBatchKeys)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		held := make([]bool, len(batch))
		for shard := range c.cfg.NumShards {
			states, err := c.describer().DescribeFiles(ctx, shard, batch)
			if err == nil && len(states) != len(batch) {
				err = fmt.Errorf("%d answers for %d keys", len(states), len(batch))
			}
			if err != nil {
				return fmt.Errorf("coordinator: orphan scan: DescribeFiles on shard %d: %w", shard, err)
			}
			for i, st := range states {
				held[i] = held[i] || st == diskless.FileLive || st == diskless.FileReleased
			}
		}
		var orphans []string
		for i, k := range batch {
			if !held[i] {
				orphans = append(orphans, k)
			}
		}
		c.stats.OrphansFound.Add(int64(len(orphans)))
		for i, err := range c.deleteObjects(ctx, orphans) {
			if err != nil {
				c.stats.DeleteFailures.Add(1)
				c.logger.Warn("coordinator: deleting an orphan object failed; retrying on the next scan",
					"key", orphans[i], "err", err)
				continue
			}
			c.stats.OrphansDeleted.Add(1)
			c.logger.Info("coordinator: deleted orphan object", "key", orphans[i])
		}
		return nil
	}
	err := c.cfg.Objects.List(ctx, prefix, func(oi objstore.ObjectInfo) error {
		if oi.LastModified.IsZero() || oi.LastModified.After(cutoff) {
			return nil
		}
		batch = append(batch, oi.Key)
		if len(batch) < orphanBatchKeys {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("coordinator: orphan scan of %q: %w", prefix, err)
	}
	c.stats.OrphanScans.Add(1)
	return nil
}
