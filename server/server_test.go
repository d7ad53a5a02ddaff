package server

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConfigValidate(t *testing.T) {
	valid := Config{Addr: "127.0.0.1:9092", ClusterID: "c"}
	for _, tc := range []struct {
		name    string
		mod     func(*Config)
		wantErr string // "" = valid
	}{
		{name: "minimal", mod: func(*Config) {}},
		{name: "all interfaces, port 0", mod: func(c *Config) { c.Addr = ":0" }},
		{name: "no port", mod: func(c *Config) { c.Addr = "localhost" }, wantErr: "listeners"},
		{name: "bad port", mod: func(c *Config) { c.Addr = "localhost:99999" }, wantErr: "listeners"},
		{name: "advertised port", mod: func(c *Config) { c.AdvertisedPort = 70000 }, wantErr: "advertised.listeners"},
		{name: "node id", mod: func(c *Config) { c.NodeID = -1 }, wantErr: "node.id"},
		{name: "cluster id", mod: func(c *Config) { c.ClusterID = "" }, wantErr: "ClusterID"},
		{name: "num.partitions", mod: func(c *Config) { c.NumPartitions = -1 }, wantErr: "num.partitions"},
		{name: "socket.request.max.bytes", mod: func(c *Config) { c.MaxRequestBytes = -1 }, wantErr: "socket.request.max.bytes"},
		{name: "in-flight", mod: func(c *Config) { c.MaxInflightPerConn = -1 }, wantErr: "MaxInflightPerConn"},
		{name: "queued below one request", mod: func(c *Config) { c.MaxRequestBytes, c.MaxQueuedRequestBytes = 2048, 1024 }, wantErr: "queued.max.request.bytes"},
		{name: "idle timeout", mod: func(c *Config) { c.IdleTimeout = -1 }, wantErr: "connections.max.idle.ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.mod(&c)
			err := c.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}

	d := valid.withDefaults()
	if d.MaxRequestBytes != DefaultMaxRequestBytes || d.MaxInflightPerConn != DefaultMaxInflightPerConn ||
		d.NumPartitions != DefaultNumPartitions || d.Logger == nil {
		t.Fatalf("defaults not applied: %+v", d)
	}
}

func TestLifecycleMisuse(t *testing.T) {
	if _, err := New(Config{}, &fakeProducer{}, &fakeFetcher{}, newFakeCatalog()); err == nil {
		t.Fatalf("New accepted an invalid config")
	}
	cfg := Config{Addr: "127.0.0.1:0", ClusterID: "c", Logger: (&logSink{}).logger()}
	if _, err := New(cfg, nil, &fakeFetcher{}, newFakeCatalog()); err == nil {
		t.Fatalf("New accepted a nil Producer")
	}
	ts := startServer(t, nil)
	if err := ts.Listen(); err == nil {
		t.Fatalf("second Listen succeeded")
	}
	waitFor(t, func() bool { ts.mu.Lock(); defer ts.mu.Unlock(); return ts.mu.serving })
	if err := ts.Serve(context.Background()); err == nil {
		t.Fatalf("second Serve succeeded")
	}

	// Shutdown before Serve: Serve returns at once.
	s, err := New(cfg, &fakeProducer{}, &fakeFetcher{}, newFakeCatalog())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background()); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// TestLargeFrame sends a produce request bigger than the read chunk: the
// frame is assembled as it arrives and reaches the Producer intact.
func TestLargeFrame(t *testing.T) {
	records := make([]byte, 3*readChunk+12345)
	for i := range records {
		records[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.prod.produceHook = func(_ context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
			got <- req.Topics[0].Partitions[0].Records
			resp := ts.prod.answer(req)
			return func() *kmsg.ProduceResponse { return resp }
		}
	})
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := dialRaw(t, ts.Addr())
	c.roundTrip(req)
	if b := <-got; string(b) != string(records) {
		t.Fatalf("records differ: %d bytes, want %d", len(b), len(records))
	}
}
