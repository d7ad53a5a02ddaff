package peer

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkCommitFile times CommitFile of a one-batch file at a shard on
// in-memory logs (the log takes no time, so what is timed is the call
// path): Local, the coordinator called directly; RPC, through a Router
// whose placement names another sidecar, over a loopback TCP connection.
// Reports p50 and p99 besides the mean.
func BenchmarkCommitFile(b *testing.B) {
	for _, mode := range []string{"Local", "RPC"} {
		b.Run(mode, func(b *testing.B) {
			a, owner := startNode(b, 1), startNode(b, 2)
			self := a
			if mode == "Local" {
				self = owner
			}
			cl := NewClient(ClientConfig{Logger: quiet})
			defer cl.Close()
			r, err := NewRouter(RouterConfig{NodeID: self.id, Local: self.coord, Placement: newPlacement(owner.sidecar()), Client: cl, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			topic, err := owner.coord.CreateTopic(ctx, "bench", 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			s := owner.coord.ShardFor(topic.ID, 0)
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				req := commitReq(topic, 0, fmt.Sprintf("wal/bench-%d", i), 1, -1, 0)
				req.OwnerIDs = []int32{s}
				t0 := time.Now()
				if _, err := r.CommitFile(ctx, s, req); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(durs[len(durs)*99/100].Microseconds()), "p99-µs")
		})
	}
}
