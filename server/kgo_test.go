package server

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests drive the server with franz-go's real client over TCP.

func newKgo(t testing.TB, ts *testServer, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(ts.Addr().String()),
		kgo.RetryTimeout(5 * time.Second),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestKgoApiVersions: kgo opens with ApiVersions v5, gets UNSUPPORTED_VERSION
// and retries at the advertised max; the versions it learns are the table.
func TestKgoApiVersions(t *testing.T) {
	ts := startServer(t, nil)
	_, adm := newKgo(t, ts)
	all, err := adm.ApiVersions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	v, ok := all[7]
	if !ok || v.Err != nil {
		t.Fatalf("ApiVersions of node 7: %+v", all)
	}
	n := 0
	v.EachKeySorted(func(key, lo, hi int16) {
		n++
		wlo, whi, ok := ts.versionRange(key)
		if !ok || lo != wlo || hi != whi {
			t.Errorf("key %d: %d–%d, advertised table says %d–%d (%v)", key, lo, hi, wlo, whi, ok)
		}
	})
	if n != len(testAPIs()) {
		t.Fatalf("%d keys, want %d", n, len(testAPIs()))
	}
	if ts.logs.errors.Load() != 0 {
		t.Fatalf("error logs")
	}
}

// TestKgoProduceAutoCreate produces with an idempotent kgo client to a topic
// that does not exist: Metadata auto-creates it, InitProducerId hands out an
// id, the produce reaches the Producer with it, and kadm sees the topic id.
func TestKgoProduceAutoCreate(t *testing.T) {
	var (
		mu       sync.Mutex
		batchPID []int64
	)
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.prod.produceHook = func(_ context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
			mu.Lock()
			for _, tp := range req.Topics {
				for _, p := range tp.Partitions {
					if len(p.Records) >= 51 {
						batchPID = append(batchPID, int64(binary.BigEndian.Uint64(p.Records[43:])))
					}
				}
			}
			mu.Unlock()
			resp := ts.prod.answer(req)
			return func() *kmsg.ProduceResponse { return resp }
		}
	})
	cl, adm := newKgo(t, ts, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("auto"))
	ctx := testCtx(t)
	for i := range 3 {
		r := &kgo.Record{Value: []byte("v"), Partition: int32(i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	topic, ok := ts.cat.Topic("auto")
	if !ok || topic.Partitions != 2 {
		t.Fatalf("auto-created topic: %+v, %v", topic, ok)
	}
	mu.Lock()
	if len(batchPID) == 0 || batchPID[0] != 1001 {
		t.Fatalf("producer ids in batches %v, want the allocated 1001", batchPID)
	}
	mu.Unlock()

	details, err := adm.ListTopics(ctx, "auto")
	if err != nil {
		t.Fatal(err)
	}
	d := details["auto"]
	if d.Err != nil || [16]byte(d.ID) != topic.ID || len(d.Partitions) != 2 {
		t.Fatalf("kadm sees %+v, catalog has id %v", d, topic.ID)
	}
	for _, p := range d.Partitions {
		if p.Leader != 7 || p.LeaderEpoch != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %+v", p)
		}
	}
	all, err := adm.ListTopics(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("all topics: %v, %v", all, err)
	}
}

// TestKadmCreateTopics creates topics with kadm, including the errors a
// client sees.
func TestKadmCreateTopics(t *testing.T) {
	ts := startServer(t, nil)
	_, adm := newKgo(t, ts)
	ctx := testCtx(t)

	resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"retention.ms": kadm.StringPtr("1000")}, "c")
	if err != nil {
		t.Fatalf("create: %v (%s)", err, resp.ErrMessage)
	}
	topic, ok := ts.cat.Topic("c")
	if !ok || [16]byte(resp.ID) != topic.ID || resp.NumPartitions != 3 || topic.Partitions != 3 {
		t.Fatalf("response %+v, catalog %+v", resp, topic)
	}
	if c := resp.Configs["retention.ms"]; c.Value == nil || *c.Value != "1000" || topic.Config.RetentionMs != 1000 {
		t.Fatalf("retention.ms: response %+v, catalog %d", c, topic.Config.RetentionMs)
	}

	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "c"); !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	resp, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "compacted")
	if !errors.Is(err, kerr.InvalidConfig) || resp.ErrMessage == "" {
		t.Fatalf("bad config: %v %q, want INVALID_CONFIG with a message", err, resp.ErrMessage)
	}
	if _, err := adm.CreateTopic(ctx, 0, 1, nil, "zero"); !errors.Is(err, kerr.InvalidPartitions) {
		t.Fatalf("zero partitions: %v", err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "bad name"); !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("bad name: %v", err)
	}
	resp, err = adm.CreateTopic(ctx, -1, -1, nil, "defaults")
	if err != nil || resp.NumPartitions != 2 || resp.ReplicationFactor != 1 {
		t.Fatalf("defaults: %+v, %v", resp, err)
	}

	vr, err := adm.ValidateCreateTopics(ctx, 5, 3, nil, "dry")
	if err != nil || vr["dry"].Err != nil || vr["dry"].NumPartitions != 5 {
		t.Fatalf("validate: %+v, %v", vr, err)
	}
	if _, ok := ts.cat.Topic("dry"); ok {
		t.Fatalf("validate-only created the topic")
	}
}
