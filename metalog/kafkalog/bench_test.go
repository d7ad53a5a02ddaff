package kafkalog

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// BenchmarkAppend: one group of one 200-byte record per Append, one
// after the other, on a 3-broker Apache Kafka on this machine (RF 3,
// min.insync.replicas 2): the commit latency a shard's driver sees
// (Append), and beside it the floor, one idempotent acks=all produce of
// the same record to a topic laid out alike (ProduceAcksAll), and what the
// transactional design this backend replaced paid per Append
// (Transaction: begin, produce, EndTxn(commit) on 4 transactional
// producers used in turn). Each reports its p50 and p99. The brokers run
// with the JVM settings of Kafka's start scripts (1 GiB heap, G1), as an
// operator's brokers would, not the tests' small serial-collector heap
// (bench/RESULTS.md entry 20: on a quiet machine the collector made no
// difference beyond the runs' spread).
func BenchmarkAppend(b *testing.B) {
	c := kafkatest.Start(b, kafkatest.Options{Brokers: 3, JVMOptions: kafkatest.ProductionJVM("1g")})
	// The floors' topics are laid out as the metadata topic is: one
	// partition, 3 replicas, min.insync.replicas 2 (an auto-created topic
	// would get the brokers' default replication factor, 1).
	for _, topic := range []string{"plain", "txn"} {
		resp, err := c.Admin(b).CreateTopic(context.Background(), 1, 3, map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Append", func(b *testing.B) { benchAppend(b, c) })
	b.Run("ProduceAcksAll", func(b *testing.B) { benchProduce(b, c) })
	b.Run("Transaction", func(b *testing.B) { benchTransaction(b, c) })
}

func benchTransaction(b *testing.B, c *kafkatest.Cluster) {
	ctx := context.Background()
	var cls []*kgo.Client
	for i := range 4 {
		cls = append(cls, c.Client(b, kgo.DefaultProduceTopic("txn"), kgo.ProducerLinger(0),
			kgo.TransactionalID(fmt.Sprintf("bench-%d", i))))
	}
	txn := func(i int) error {
		cl := cls[i%len(cls)]
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: bytes.Repeat([]byte("r"), 200)}).FirstErr(); err != nil {
			return err
		}
		return cl.EndTransaction(ctx, kgo.TryCommit)
	}
	for i := range 50 {
		if err := txn(i); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if err := txn(i); err != nil {
			b.Fatal(err)
		}
		i++
		lat = append(lat, time.Since(t0))
	}
	report(b, lat)
}

func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func benchProduce(b *testing.B, c *kafkatest.Cluster) {
	cl := c.Client(b, kgo.DefaultProduceTopic("plain"), kgo.ProducerLinger(0))
	ctx := context.Background()
	r := func() *kgo.Record { return &kgo.Record{Value: bytes.Repeat([]byte("r"), 200)} }
	for range 50 {
		if err := cl.ProduceSync(ctx, r()).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := cl.ProduceSync(ctx, r()).FirstErr(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	report(b, lat)
}

// openBenchLog opens shard 0's log of a one-partition metadata topic on c
// and replays it, ready to append; it is closed when b ends.
func openBenchLog(b *testing.B, c *kafkatest.Cluster) metalog.Log {
	b.Helper()
	tp, err := Open(context.Background(), Config{
		Brokers:    strings.Split(c.BootstrapServers(), ","),
		Partitions: 1,
		Snapshots:  objstoretest.NewMemory(),
		Logger:     discard(),
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tp.Close() })
	l, err := tp.OpenLog(0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	if _, err := l.Replay(context.Background(), 0, func(int64, []byte) error { return nil }); err != nil {
		b.Fatal(err)
	}
	return l
}

func benchAppend(b *testing.B, c *kafkatest.Cluster) {
	l := openBenchLog(b, c)
	ctx := context.Background()
	body := [][]byte{bytes.Repeat([]byte("r"), 200)}
	for range 50 { // warm the connections and producers
		if err := l.Append(ctx, body); err != nil {
			b.Fatal(err)
		}
	}
	var lat []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := l.Append(ctx, body); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	report(b, lat)
}

// BenchmarkConfirm: what the read-index rule costs a wave of reads at a
// shard's owner (DESIGN §Fencing): one Confirm on a 3-broker Apache
// Kafka on this machine (RF 3), p50 and p99 — Idle, nothing appended
// since the writer's last group (one ListOffsets to the partition's
// leader), and WhileAppending, another goroutine appending one group
// after the other meanwhile (the records of the Append in progress read
// too when the high watermark is past the writer's position: a Fetch
// more). The brokers run with the JVM settings of Kafka's start scripts,
// as in BenchmarkAppend.
func BenchmarkConfirm(b *testing.B) {
	c := kafkatest.Start(b, kafkatest.Options{Brokers: 3, JVMOptions: kafkatest.ProductionJVM("1g")})
	l := openBenchLog(b, c)
	ctx := context.Background()
	body := [][]byte{bytes.Repeat([]byte("r"), 200)}
	for range 50 {
		if err := l.Append(ctx, body); err != nil {
			b.Fatal(err)
		}
		if err := l.Confirm(ctx); err != nil {
			b.Fatal(err)
		}
	}
	confirm := func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := l.Confirm(ctx); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		report(b, lat)
	}
	b.Run("Idle", confirm)
	b.Run("WhileAppending", func(b *testing.B) {
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if err := l.Append(ctx, body); err != nil {
					done <- err
					return
				}
			}
		}()
		confirm(b)
		close(stop)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	})
}
