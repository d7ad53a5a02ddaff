package fetch

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/ratelog"
	"github.com/diskless-sidecar/sidecar/internal/tracing"
)

// Coordinator is what fetch needs from the coordinator shards: topic
// lookups, the batch index and the commit signal (SPEC §9).
type Coordinator interface {
	// Topic returns the topic named name, if it exists.
	Topic(name string) (diskless.Topic, bool)
	// TopicByID returns the topic with id, if it exists.
	TopicByID(id diskless.TopicID) (diskless.Topic, bool)
	// FindBatches answers each request, in order: one result per request.
	FindBatches(ctx context.Context, reqs []diskless.FindBatchesRequest) []diskless.FindBatchesResult
	// ListOffsets resolves a ListOffsets timestamp (≥ 0, or one of the
	// diskless.ListOffsets* values) on one partition, from up-to-date
	// state.
	ListOffsets(ctx context.Context, tp diskless.TopicPartition, timestamp int64) diskless.ListOffsetsResult
	// ListOffsetsFrom is ListOffsets over the batches holding an offset ≥
	// from: for a timestamp ≥ 0 the first of them whose max timestamp
	// reaches it, for diskless.ListOffsetsMaxTimestamp the earliest
	// with the largest among them. A timestamp lookup calls it once per
	// batch it has to look past (lookup.go).
	ListOffsetsFrom(ctx context.Context, tp diskless.TopicPartition, timestamp, from int64) diskless.ListOffsetsResult
	// Watch returns a channel that is closed at the next commit that makes
	// data visible. Take it before looking at the index, then wait on it.
	Watch() <-chan struct{}
	// ShardFor returns the coordinator shard of a partition (SPEC §3):
	// ListOffsets looks up the partitions of different shards
	// concurrently.
	ShardFor(id diskless.TopicID, partition int32) int32
}

// ObjectReader is how fetch reads stored batches: the block cache
// (cache.Cache) implements it.
//
// ReadRanges fills every range of rs, whole, from object obj (ranges in any
// order; empty ones ignored), or returns an error: an object that ends
// before a range does is an error too, and after an error which ranges
// were filled is unspecified. obj carries the object's size as committed
// (diskless.RunCoordinate.FileSize; a store answering another size is an
// error) and the data's commit time in ms since the Unix epoch
// (diskless.RunCoordinate.LogAppendTime; the oldest, for ranges
// committed at different times), which the cache compares with its reach:
// data older than it is read with one GET of the whole object into a
// catch-up segment, so a lagging consumer neither pays a GET per partition
// nor evicts the blocks other consumers are reading. Before any range is
// returned whose bytes were read from the store and not checked before,
// check.Check(i, rs[i].P) must pass (fetch checks each batch against its
// coordinate, CRC-32C included: DESIGN §Fetch step 3); a range that fails
// is read again once, and if it fails again its Err is set and the error
// returned wraps cache.ErrCorrupt, the other ranges being filled and
// checked. Fetch relies on this: it does not check CRCs itself.
//
// ReadAhead hints that obj, the object after the one a reader is reading,
// will be read soon: the cache loads it in the background if the reader is
// catching up (its data is beyond the cache's reach). It never blocks.
//
// A wrapper around the cache (metrics, tracing) passes every argument on.
type ObjectReader interface {
	ReadRanges(ctx context.Context, obj cache.Object, rs []cache.Range, check cache.Checker) error
	ReadAhead(obj cache.Object)
}

var _ ObjectReader = (*cache.Cache)(nil)

// Handler serves Fetch and ListOffsets. It holds no per-request state and
// is safe for concurrent use.
type Handler struct {
	cfg   Config
	coord Coordinator
	r     ObjectReader
	// rl writes the warnings a client can repeat by fetching or looking
	// up a bad partition again (DESIGN §Logging).
	rl *ratelog.Limiter
	// decompressSlots is the semaphore of Config.DecompressConcurrency:
	// a timestamp lookup sends to decompress a batch and receives when
	// done.
	decompressSlots chan struct{}
	// tr starts a Fetch's spans when tracing is on.
	tr tracing.Tracer
	// indexes caches segment objects' decoded indexes (segments.go).
	indexes *segmentIndexes
}

// New returns a Handler over c and r. Errors: an invalid cfg (naming the
// field), or a nil dependency.
func New(cfg Config, c Coordinator, r ObjectReader) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil || r == nil {
		return nil, errNilDependency
	}
	cfg = cfg.withDefaults()
	return &Handler{
		cfg:             cfg,
		coord:           c,
		r:               r,
		rl:              ratelog.New(cfg.Logger, ratelog.Config{}),
		decompressSlots: make(chan struct{}, cfg.DecompressConcurrency),
		tr:              tracing.New(cfg.TracerProvider),
		indexes:         newSegmentIndexes(cfg.SegmentIndexCacheBytes),
	}, nil
}

// APIVersions returns the versions the Handler serves of each API key it
// answers, as declared beside each handler: Fetch (fetchVersions),
// ListOffsets (listOffsetsVersions), OffsetForLeaderEpoch
// (offsetForLeaderEpochVersions). The server advertises them in
// ApiVersions (server.Fetcher).
func (h *Handler) APIVersions() []kmsg.ApiVersionsResponseApiKey {
	return []kmsg.ApiVersionsResponseApiKey{fetchVersions, listOffsetsVersions, offsetForLeaderEpochVersions}
}

// acquireDecompress waits for a decompression slot (Config.DecompressConcurrency)
// or ctx, and returns the release, or ctx's error.
func (h *Handler) acquireDecompress(ctx context.Context) (release func(), err error) {
	select {
	case h.decompressSlots <- struct{}{}:
		return func() { <-h.decompressSlots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// checkLeaderEpoch checks a request's CurrentLeaderEpoch (KIP-320) against
// the fixed epoch every partition has: −1 means "not given", a larger
// epoch is one this sidecar does not know yet, a smaller one is fenced.
func (h *Handler) checkLeaderEpoch(current int32) *kerr.Error {
	switch {
	case current == -1 || current == h.cfg.LeaderEpoch:
		return nil
	case current > h.cfg.LeaderEpoch:
		return kerr.UnknownLeaderEpoch
	default:
		return kerr.FencedLeaderEpoch
	}
}

// partitionExists reports whether p is a partition of t.
func partitionExists(t *diskless.Topic, p int32) bool {
	return p >= 0 && p < t.Partitions
}

// Close writes the summaries of the warnings counted since their last line
// (how often each partition's condition recurred), which would otherwise
// wait for the interval's end, and stops the limiter's timer. The Handler
// keeps serving; Close may be called more than once. Call it at shutdown,
// after the server has stopped.
func (h *Handler) Close() {
	h.rl.Close()
}

// warn logs msg, a constant naming the cause, about one partition of topic
// through the rate limiter, with the partition as its subject ("topic-p",
// Kafka's name for it) and attributes topic, partition and attrs: a
// consumer that fetches a bad partition thousands of times a second gets
// one line, then one summary a minute (DESIGN §Logging).
func (h *Handler) warn(ctx context.Context, topic string, partition int32, msg string, attrs ...slog.Attr) {
	all := make([]slog.Attr, 0, len(attrs)+2)
	all = append(all, slog.String("topic", topic), slog.Int("partition", int(partition)))
	h.rl.Log(ctx, slog.LevelWarn, topic+"-"+strconv.Itoa(int(partition)), msg, append(all, attrs...)...)
}
