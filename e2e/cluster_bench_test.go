package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// TestBenchClusterProduce is a measurement, not a test: it runs only with
// SIDECAR_BENCH=1 (SIDECAR_BENCH=1 go test -run TestBenchClusterProduce -v
// ./e2e), starting processes the Go benchmark harness cannot
// (e2e.Sidecar needs a *testing.T), and logs its figures for
// bench/RESULTS.md. Sidecars1 and Sidecars3 each start that many sidecars of one
// cluster next to the shared 3-broker Kafka, on one versitygw bucket, and
// run 4 idempotent kgo producers given every sidecar's address (partition
// leaders spread over the sidecars) for 20 s, reporting the acknowledged
// MB/s; Sidecars3 also measures the replica lag: a record acknowledged
// through one sidecar, how long until a consumer long-polling another
// sidecar, which does not host the partition's shard, reads it
// (replica-lag-p50/p99-ms over 300 records). Everything shares the
// machine's cores: the ratio of the two throughputs says what a cluster
// costs here, not what it scales to on separate machines.
func TestBenchClusterProduce(t *testing.T) {
	requireBench(t)
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("Sidecars%d", n), func(t *testing.T) {
			b := t
			cl := startSidecarCluster(t, n)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			topic := fmt.Sprintf("bench-%d", n)
			first := cl.scs[cl.k.Brokers()[0]]
			createTopic(t, ctx, first, topic, 12, nil)
			const window = 20 * time.Second
			var acked atomic.Int64
			value := make([]byte, 1024)
			var wg sync.WaitGroup
			start := time.Now()
			pctx, stop := context.WithTimeout(ctx, window)
			defer stop()
			for i := range 4 {
				p, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(cl.addrs(), ",")...), kgo.DefaultProduceTopic(topic),
					kgo.ProducerLinger(5*time.Millisecond), kgo.ClientID(fmt.Sprintf("bench-%d", i)))
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				wg.Go(func() {
					for pctx.Err() == nil {
						p.Produce(pctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
							if err == nil {
								acked.Add(int64(len(r.Value)))
							}
						})
					}
					p.Flush(ctx)
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			t.Logf("%d sidecars: %.1f MB/s acknowledged (1 KiB records, 4 producers, %v)", n, float64(acked.Load())/elapsed.Seconds()/1e6, window)
			if n == 3 {
				p50, p99 := replicaLag(t, ctx, cl, topic)
				t.Logf("replica lag (acknowledged through one sidecar, read through a replica): p50 %v p99 %v", p50, p99)
			}
		})
	}
}

// replicaLag produces 300 records one at a time through one sidecar, to a
// partition whose shard another sidecar hosts, and times each until a
// consumer of a third sidecar — a replica of that shard — reads it.
func replicaLag(b *testing.T, ctx context.Context, cl *sidecarCluster, topic string) (p50, p99 time.Duration) {
	ids := cl.k.Brokers()
	owner := map[int32]int32{} // shard → node
	for _, id := range ids {
		for _, s := range cl.hosted(cl.scs[id]) {
			owner[int32(s)] = id
		}
	}
	t, ok := topicOf(ctx, cl.scs[ids[0]], topic)
	if !ok {
		b.Fatal("no topic")
	}
	var part, prod, cons int32 = -1, -1, -1
	for p := range int32(12) {
		o := owner[diskless.ShardFor(t, p, clusterShards)]
		var others []int32
		for _, id := range ids {
			if id != o {
				others = append(others, id)
			}
		}
		if len(others) == 2 {
			part, prod, cons = p, others[0], others[1]
			break
		}
	}
	if part < 0 {
		b.Fatal("no partition with a remote owner")
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(cl.scs[prod].Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ClientID(fmt.Sprintf("lag-producer,diskless_az=zone-%d", prod)))
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	end := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: []byte("start")})
	if err := end.FirstErr(); err != nil {
		b.Fatal(err)
	}
	from := end[0].Record.Offset + 1
	c, err := kgo.NewClient(kgo.SeedBrokers(cl.scs[cons].Addr), kgo.FetchMaxWait(5*time.Second),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(from)}}),
		kgo.ClientID(fmt.Sprintf("lag-consumer,diskless_az=zone-%d", cons)))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var lags []time.Duration
	for i := range 300 {
		v := binary.BigEndian.AppendUint64(nil, uint64(i))
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: part, Value: v}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		for got := false; !got; {
			fs := c.PollFetches(ctx)
			if ctx.Err() != nil {
				b.Fatal("consumer timed out")
			}
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) == 8 && binary.BigEndian.Uint64(r.Value) == uint64(i) {
					got = true
				}
			})
		}
		lags = append(lags, time.Since(acked))
	}
	return quantile(lags, 0.5), quantile(lags, 0.99)
}

// requireBench skips t, a measurement, unless SIDECAR_BENCH=1.
func requireBench(t *testing.T) {
	t.Helper()
	if os.Getenv("SIDECAR_BENCH") != "1" {
		t.Skip("a measurement: run with SIDECAR_BENCH=1")
	}
}

// quantile sorts d and returns its q quantile (0 ≤ q ≤ 1), the nearest
// rank at or below; d must not be empty.
func quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[int(float64(len(d)-1)*q)]
}
