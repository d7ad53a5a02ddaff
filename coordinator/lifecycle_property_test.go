package coordinator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// TestLifecycleInterleavingsReplay is the property test of the topic
// lifecycle (DESIGN invariant 6): any interleaving of commits, topic
// creations and deletions, purge passes, partition additions, config
// changes, disablement steps (disable with either policy, a sidecar that
// does not confirm, the passes, re-enable), retention and file deletion,
// with snapshots every few records, gives a state that a reopened shard —
// replaying its latest snapshot and the log after it — rebuilds exactly,
// with the same answers. Each seed is one interleaving; the state is
// compared after a reopen at random steps and at the end.
func TestLifecycleInterleavingsReplay(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 8
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 11))
			sc := &fakeSidecars{nodes: []int32{1}, down: map[int32]bool{}}
			e, store := newEnvObjects(t, 3, func(c *Config) {
				c.Sidecars = sc
				c.SnapshotIntervalRecords = int64(3 + r.IntN(20))
			})
			ctx := context.Background()
			names := []string{"a", "b", "c", "d"}
			for step := range 120 {
				topics := e.c.Topics()
				var top diskless.Topic
				if len(topics) > 0 {
					top = topics[r.IntN(len(topics))]
				}
				switch op := r.IntN(100); {
				case op < 10 || len(topics) == 0:
					name := names[r.IntN(len(names))]
					if _, ok := e.c.Topic(name); !ok {
						e.createTopic(name, int32(1+r.IntN(4)), nil)
					}
				case op < 45:
					k := nextKey()
					store.Put(ctx, k, []byte("x"))
					var bs []diskless.CommitBatch
					for range 1 + r.IntN(4) {
						b := plain(top, int32(r.IntN(int(top.Partitions))), int32(1+r.IntN(3)))
						b.ByteOffset = int32(len(bs) * 100)
						bs = append(bs, withMaxTs(b, e.clock.Ms()-int64(r.IntN(5000))))
					}
					for s, part := range splitByShard(e.c, bs) {
						req := commitRequest(e.c, k, part...)
						req.OwnerIDs = ownersOf(e.c, bs)
						if _, err := e.c.CommitFile(ctx, s, req); err != nil {
							t.Fatalf("step %d: commit: %v", step, err)
						}
					}
				case op < 52:
					if _, err := e.c.DeleteTopic(ctx, top.ID); err != nil {
						t.Fatalf("step %d: delete: %v", step, err)
					}
				case op < 60:
					if err := e.c.runPurge(ctx); err != nil {
						t.Fatalf("step %d: purge: %v", step, err)
					}
				case op < 66:
					if top.Partitions < 8 {
						if _, err := e.c.CreatePartitions(ctx, top.ID, top.Partitions+int32(1+r.IntN(3)), false); err != nil {
							t.Fatalf("step %d: create partitions: %v", step, err)
						}
					}
				case op < 72:
					ch := setConfigs("retention.ms", fmt.Sprint(1000+r.IntN(10000)))
					if r.IntN(2) == 0 {
						ch = setConfigs("retention.bytes", fmt.Sprint(r.IntN(500)))
					}
					if _, err := e.c.AlterTopicConfigs(ctx, top.ID, ch); err != nil {
						t.Fatalf("step %d: alter: %v", step, err)
					}
				case op < 80:
					enable := []string{"true", "false"}[r.IntN(2)]
					policy := []string{"retain", "delete"}[r.IntN(2)]
					_, err := e.c.AlterTopicConfigs(ctx, top.ID, setConfigs("diskless.enable", enable, "diskless.disable.policy", policy))
					if err != nil && !errors.Is(err, ErrDisablementInProgress) {
						t.Fatalf("step %d: disable/enable: %v", step, err)
					}
				case op < 86:
					sc.setDown(1, r.IntN(3) == 0)
					e.c.runDisablement(ctx) // fails while the sidecar is down
				case op < 91:
					e.clock.Advance(time.Duration(r.IntN(20)) * time.Second)
					if err := e.c.runRetention(ctx); err != nil {
						t.Fatalf("step %d: retention: %v", step, err)
					}
				case op < 95:
					e.clock.Advance(time.Duration(r.IntN(90)) * time.Minute)
					e.runFileDeletion()
				default:
					restartIdentical(t, e)
				}
			}
			restartIdentical(t, e)
			// Everything finishes: every disablement and purge completes
			// and still replays equal.
			sc.setDown(1, false)
			if err := e.c.runDisablement(ctx); err != nil {
				t.Fatal(err)
			}
			if err := e.c.runPurge(ctx); err != nil {
				t.Fatal(err)
			}
			for _, top := range e.c.Topics() {
				if top.Disablement.State == diskless.TopicDisabling {
					t.Fatalf("topic %s still DISABLING", top.Name)
				}
			}
			for _, s := range e.c.shards {
				if n := len(s.mu.st.deletedTopics); n != 0 {
					t.Fatalf("shard %d: %d deleted topics left after a purge with nothing new", s.id, n)
				}
			}
			e.reopenSame()
		})
	}
}

func splitByShard(c *Coordinator, bs []diskless.CommitBatch) map[int32][]diskless.CommitBatch {
	out := map[int32][]diskless.CommitBatch{}
	for _, b := range bs {
		s := c.ShardFor(b.TopicID, b.Partition)
		out[s] = append(out[s], b)
	}
	return out
}

func ownersOf(c *Coordinator, bs []diskless.CommitBatch) []int32 {
	seen := map[int32]bool{}
	var out []int32
	for s := range c.NumShards() {
		for _, b := range bs {
			if c.ShardFor(b.TopicID, b.Partition) == s && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
