package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/topicconfig"
)

// fakeCatalog is an in-memory Catalog. The hooks, when set, replace or
// precede the default behaviour.
type fakeCatalog struct {
	mu     sync.Mutex
	topics map[string]diskless.Topic
	nextID atomic.Int64

	// maxPartitions refuses larger topics with INVALID_PARTITIONS (0: 1000),
	// as a real catalog bounds what one request may create.
	maxPartitions int32
	// createHook, if set, runs first; a non-nil error is returned as is.
	createHook func(name string) error
	// topicsHook, if set, runs at the start of Topics.
	topicsHook func()
	// allocHook, if set, replaces AllocateProducerID.
	allocHook func() (int64, error)
	// deleteHook, if set, replaces DeleteRecords.
	deleteHook func(tp diskless.TopicPartition, offset int64) (int64, error)
}

var _ Catalog = (*fakeCatalog)(nil)

func newFakeCatalog() *fakeCatalog {
	c := &fakeCatalog{topics: make(map[string]diskless.Topic)}
	c.nextID.Store(1000)
	return c
}

func (c *fakeCatalog) Topic(name string) (diskless.Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.topics[name]
	return t, ok
}

func (c *fakeCatalog) TopicByID(id diskless.TopicID) (diskless.Topic, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		if t.ID == id {
			return t, true
		}
	}
	return diskless.Topic{}, false
}

func (c *fakeCatalog) Topics() []diskless.Topic {
	if c.topicsHook != nil {
		c.topicsHook()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]diskless.Topic, 0, len(c.topics))
	for _, t := range c.topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *fakeCatalog) CreateTopic(_ context.Context, name string, partitions int32, configs map[string]string) (diskless.Topic, error) {
	if c.createHook != nil {
		if err := c.createHook(name); err != nil {
			return diskless.Topic{}, err
		}
	}
	limit := c.maxPartitions
	if limit == 0 {
		limit = 1000
	}
	if partitions < 1 || partitions > limit {
		return diskless.Topic{}, kerr.InvalidPartitions
	}
	cfg, err := topicconfig.Parse(configs)
	if err != nil {
		return diskless.Topic{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.topics[name]; ok {
		return diskless.Topic{}, kerr.TopicAlreadyExists
	}
	t := diskless.Topic{Name: name, Partitions: partitions, Config: cfg}
	_, _ = rand.Read(t.ID[:])
	c.topics[name] = t
	return t, nil
}

func (c *fakeCatalog) DeleteRecords(_ context.Context, tp diskless.TopicPartition, offset int64) (int64, error) {
	if c.deleteHook != nil {
		return c.deleteHook(tp, offset)
	}
	if offset < -1 {
		return -1, kerr.OffsetOutOfRange
	}
	return max(offset, 0), nil
}

func (c *fakeCatalog) AllocateProducerID(context.Context) (int64, error) {
	if c.allocHook != nil {
		return c.allocHook()
	}
	return c.nextID.Add(1), nil
}

// fakeProducer answers every partition with NONE and increasing offsets,
// unless produceHook is set.
type fakeProducer struct {
	offset      atomic.Int64
	produceHook func(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse
}

var _ Producer = (*fakeProducer)(nil)

func (p *fakeProducer) Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	if p.produceHook != nil {
		return p.produceHook(ctx, req)
	}
	resp := p.answer(req)
	return func() *kmsg.ProduceResponse { return resp }
}

// APIVersions declares Produce 0–13, the range produce.Handler serves.
func (p *fakeProducer) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{{ApiKey: 0, MinVersion: 0, MaxVersion: 13}}
}

// answer builds a successful response for req (nil for acks=0).
func (p *fakeProducer) answer(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	if req.Acks == 0 {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, pt := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = pt.Partition
			rp.BaseOffset = p.offset.Add(1) - 1
			rp.LogStartOffset = 0
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// fakeFetcher answers with empty responses unless a hook is set.
type fakeFetcher struct {
	fetchHook       func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse
	listOffsetsHook func(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse
}

var _ Fetcher = (*fakeFetcher)(nil)

func (f *fakeFetcher) Fetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	if f.fetchHook != nil {
		return f.fetchHook(ctx, req)
	}
	return req.ResponseKind().(*kmsg.FetchResponse)
}

func (f *fakeFetcher) ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	if f.listOffsetsHook != nil {
		return f.listOffsetsHook(ctx, req)
	}
	return req.ResponseKind().(*kmsg.ListOffsetsResponse)
}

func (f *fakeFetcher) OffsetForLeaderEpoch(_ context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	return req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
}

// APIVersions declares the ranges fetch.Handler serves: Fetch 4–16,
// ListOffsets 1–8, OffsetForLeaderEpoch 0–4.
func (f *fakeFetcher) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 1, MinVersion: 4, MaxVersion: 16},
		{ApiKey: 2, MinVersion: 1, MaxVersion: 8},
		{ApiKey: 23, MinVersion: 0, MaxVersion: 4},
	}
}

// testAPIs is the ApiVersions table of a server over the fakes.
func testAPIs() []kmsg.ApiVersionsResponseApiKey {
	apis, err := buildAPIs((&fakeProducer{}).APIVersions(), (&fakeFetcher{}).APIVersions())
	if err != nil {
		panic(err)
	}
	return withoutTxns(apis, true)
}

// logSink collects a test server's logs and counts error records (a
// recovered panic or a broken handler contract).
type logSink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	errors atomic.Int64
}

func (l *logSink) logger() *slog.Logger {
	return slog.New(&countingHandler{Handler: slog.NewTextHandler(lockedWriter{l}, &slog.HandlerOptions{Level: slog.LevelDebug}), sink: l})
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type lockedWriter struct{ l *logSink }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	return w.l.buf.Write(p)
}

type countingHandler struct {
	slog.Handler
	sink *logSink
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.sink.errors.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(as), sink: h.sink}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), sink: h.sink}
}

func (c *fakeCatalog) DeleteTopic(_ context.Context, id diskless.TopicID) (diskless.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, t := range c.topics {
		if t.ID == id {
			delete(c.topics, n)
			return t, nil
		}
	}
	return diskless.Topic{}, kerr.UnknownTopicID
}

func (c *fakeCatalog) CreatePartitions(_ context.Context, id diskless.TopicID, count int32, validateOnly bool) (diskless.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, t := range c.topics {
		if t.ID == id {
			if count <= t.Partitions {
				return t, kerr.InvalidPartitions
			}
			t.Partitions = count
			if !validateOnly {
				c.topics[n] = t
			}
			return t, nil
		}
	}
	return diskless.Topic{}, kerr.UnknownTopicOrPartition
}

func (c *fakeCatalog) AlterTopicConfigs(_ context.Context, id diskless.TopicID, ch diskless.ConfigChange) (diskless.Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, t := range c.topics {
		if t.ID == id {
			next, err := ch.Apply(maps.Clone(t.Config.Raw))
			if err != nil {
				return t, err
			}
			cfg, err := topicconfig.Parse(next)
			if err != nil {
				return t, err
			}
			t.Config = cfg
			if !ch.ValidateOnly {
				c.topics[n] = t
			}
			return t, nil
		}
	}
	return diskless.Topic{}, kerr.UnknownTopicOrPartition
}

func (c *fakeCatalog) PartitionSizes(id diskless.TopicID) []int64 {
	t, ok := c.TopicByID(id)
	if !ok {
		return nil
	}
	out := make([]int64, t.Partitions)
	for i := range out {
		out[i] = int64(100 * (i + 1))
	}
	return out
}
