package telemetry

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/upload"
)

// counter is one observable counter read from a component's atomic.
type counter struct {
	name, unit, desc string
	v                *atomic.Int64
}

func observe(m metric.Meter, counters []counter, gauges []counter) error {
	var obs []metric.Observable
	cs := make([]metric.Int64ObservableCounter, len(counters))
	for i, c := range counters {
		cs[i] = must(m.Int64ObservableCounter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc)))
		obs = append(obs, cs[i])
	}
	gs := make([]metric.Int64ObservableGauge, len(gauges))
	for i, g := range gauges {
		gs[i] = must(m.Int64ObservableGauge(g.name, metric.WithUnit(g.unit), metric.WithDescription(g.desc)))
		obs = append(obs, gs[i])
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for i, c := range counters {
			o.ObserveInt64(cs[i], c.v.Load())
		}
		for i, g := range gauges {
			o.ObserveInt64(gs[i], g.v.Load())
		}
		return nil
	}, obs...)
	return err
}

// ObserveUpload exports the uploader's counters: objects and bytes
// uploaded, attempts, retries and failures, hedges (the extra PUTs of
// hedged uploads: their rate over diskless.upload.objects' is the extra
// PUT share), their wins and the losers' deletes, and the current hedge
// delay.
func ObserveUpload(mp metric.MeterProvider, s *upload.Stats) error {
	m := Meter(mp)
	if err := observe(m, []counter{
		{"diskless.upload.objects", "{object}", "WAL objects uploaded successfully", &s.Uploads},
		{"diskless.upload.bytes", "By", "bytes of WAL objects uploaded successfully, each object once", &s.BytesUploaded},
		{"diskless.upload.attempts", "{attempt}", "object store PUTs attempted, retries and hedges included", &s.Attempts},
		{"diskless.upload.retries", "{attempt}", "upload attempts after the first of an object", &s.Retries},
		{"diskless.upload.failures", "{object}", "objects whose upload gave up after every attempt", &s.Failures},
		{"diskless.upload.hedges", "{attempt}", "hedged uploads: second attempts started under a new key beside a slow one (extra PUTs)", &s.Hedges},
		{"diskless.upload.hedge.wins", "{object}", "hedged uploads whose second attempt stored the object first", &s.HedgeWins},
		{"diskless.upload.hedge.deletes", "{object}", "losing attempts' objects deleted", &s.HedgeDeletes},
		{"diskless.upload.hedge.delete.failures", "{object}", "losing attempts' objects whose delete failed (left to the orphan scan)", &s.HedgeDeleteFailures},
	}, nil); err != nil {
		return err
	}
	_, err := m.Float64ObservableGauge("diskless.upload.hedge.delay", metric.WithUnit("s"),
		metric.WithDescription("how long an upload attempt runs before it is hedged now (0: hedging off)"),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(s.HedgeDelay().Seconds())
			return nil
		}))
	return err
}

// ObserveCache exports the block cache's counters and its size.
func ObserveCache(mp metric.MeterProvider, s *cache.Stats) error {
	return observe(Meter(mp), []counter{
		{"diskless.cache.hits", "{block}", "block lookups served from the cache", &s.Hits},
		{"diskless.cache.misses", "{block}", "block lookups that had to load the block", &s.Misses},
		{"diskless.cache.coalesced", "{block}", "misses that joined a load already in flight", &s.Coalesced},
		{"diskless.cache.evictions", "{block}", "blocks evicted to stay within diskless.cache.max.bytes", &s.Evictions},
		{"diskless.cache.store.reads", "{request}", "ranged GETs issued to the object store", &s.StoreReads},
		{"diskless.cache.store.read", "By", "bytes read from the object store", &s.StoreReadBytes},
		{"diskless.cache.bypass.reads", "{request}", "ranged GETs that served data older than the cache's reach without caching it (also in diskless.cache.store.reads)", &s.BypassReads},
		{"diskless.cache.bypass.read", "By", "bytes read by those GETs (also in diskless.cache.store.read)", &s.BypassReadBytes},
		{"diskless.cache.catchup.reads", "{request}", "GETs of whole objects into the catch-up segment for data older than the cache's reach, read-aheads included (also in diskless.cache.store.reads)", &s.CatchUpReads},
		{"diskless.cache.catchup.read", "By", "bytes read by those GETs (also in diskless.cache.store.read)", &s.CatchUpReadBytes},
		{"diskless.cache.readaheads", "{request}", "catch-up reads started ahead of a sequential reader", &s.ReadAheads},
		{"diskless.cache.catchup.evictions", "{block}", "blocks evicted to stay within diskless.cache.catchup.max.bytes", &s.CatchUpEvictions},
		{"diskless.cache.check.failures", "{check}", "reads from the object store whose bytes failed their check (a range's batches or a whole object)", &s.CheckFailures},
		{"diskless.cache.rereads", "{request}", "reads from the object store made again after a failed check or a wrong object size", &s.Rereads},
		{"diskless.cache.corrupt", "{range}", "ranges that failed their check on both reads (answered CORRUPT_MESSAGE)", &s.CorruptRanges},
		{"diskless.cache.size.mismatches", "{request}", "store answers whose object size differed from the committed one", &s.SizeMismatches},
		{"diskless.cache.dropped", "{block}", "cached blocks removed because a read over them failed its check", &s.Dropped},
	}, []counter{
		{"diskless.cache.size", "By", "bytes of object data cached", &s.BytesCached},
		{"diskless.cache.catchup.size", "By", "bytes of whole objects in the catch-up segment", &s.CatchUpBytesCached},
	})
}

// ObserveCoordinator exports the coordinators' background work: retention,
// file release and deletion, the orphan scan, disablements' sends,
// consolidation.
func ObserveCoordinator(mp metric.MeterProvider, s *coordinator.Stats) error {
	return observe(Meter(mp), []counter{
		{"diskless.retention.moves", "{move}", "log start offsets moved by retention", &s.RetentionMoves},
		{"diskless.files.released", "{file}", "files whose batches are all gone from a shard", &s.FilesReleased},
		{"diskless.files.forgotten", "{file}", "closed files dropped from a shard's file table an hour (of log time) after their commit", &s.FilesForgotten},
		{"diskless.objects.deleted", "{object}", "objects deleted by the file lifecycle", &s.ObjectsDeleted},
		{"diskless.objects.delete.failures", "{object}", "object deletes that failed (retried on the next pass)", &s.DeleteFailures},
		{"diskless.orphans.found", "{object}", "objects older than the grace period that no shard holds", &s.OrphansFound},
		{"diskless.orphans.deleted", "{object}", "orphan objects deleted", &s.OrphansDeleted},
		{"diskless.orphan.scans", "{scan}", "orphan scans completed", &s.OrphanScans},
		{"diskless.disable.sends", "{request}", "DisklessDisableTopic requests sent to sidecars by the disablements this coordinator drives", &s.DisableSends},
		{"diskless.disable.send.failures", "{request}", "DisklessDisableTopic requests a sidecar did not confirm (sent again on the next pass)", &s.DisableSendFailures},
		{"diskless.consolidation.reads", "{request}", "ranged GETs of WAL objects by consolidation", &s.ConsolidationReads},
		{"diskless.consolidation.read.bytes", "By", "bytes of WAL objects consolidation read", &s.ConsolidationReadBytes},
		{"diskless.consolidation.segments.uploaded", "{object}", "segment objects consolidation put (one PUT each)", &s.SegmentsUploaded},
		{"diskless.consolidation.segment.bytes", "By", "bytes of segment objects consolidation put", &s.SegmentBytesUploaded},
		{"diskless.consolidation.segments.committed", "{object}", "segment objects swapped in for their partitions' WAL runs (records 114)", &s.SegmentsCommitted},
		{"diskless.consolidation.runs", "{run}", "WAL runs replaced by segment objects", &s.RunsConsolidated},
		{"diskless.consolidation.segments.abandoned", "{object}", "segment objects a log start move made stale, deleted uncommitted", &s.SegmentsAbandoned},
		{"diskless.consolidation.failures", "{failure}", "consolidation reads, checks, uploads and commits that failed (retried on the next pass)", &s.ConsolidationFailures},
	}, nil)
}

// ProduceHandler is what the server calls for Produce (server.Producer).
type ProduceHandler interface {
	Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse
	APIVersions() []kmsg.ApiVersionsResponseApiKey
}

// Producer wraps a ProduceHandler, measuring each request from its arrival
// to its answer (diskless.produce.latency, by acks), the record-batch bytes
// received, and the error answered per partition.
type Producer struct {
	next    ProduceHandler
	latency metric.Float64Histogram
	bytes   metric.Int64Counter
	errors  metric.Int64Counter
}

// latencyBuckets (s) cover a diskless produce: most of it is the wait for
// the file to seal (diskless.append.commit.interval.ms), then upload and
// commit; S3 puts it in the hundreds of ms (SPEC §13).
var latencyBuckets = []float64{.001, .005, .01, .025, .05, .1, .15, .2, .25, .3, .4, .5, .75, 1, 1.5, 2, 3, 5, 10, 30}

// NewProducer wraps next.
func NewProducer(mp metric.MeterProvider, next ProduceHandler) *Producer {
	m := Meter(mp)
	return &Producer{
		next: next,
		latency: must(m.Float64Histogram("diskless.produce.latency", metric.WithUnit("s"),
			metric.WithDescription("Produce request latency, arrival to answer (acks=0: to acceptance)"),
			metric.WithExplicitBucketBoundaries(latencyBuckets...))),
		bytes: must(m.Int64Counter("diskless.produce.received", metric.WithUnit("By"),
			metric.WithDescription("record-batch bytes received in Produce requests"))),
		errors: must(m.Int64Counter("diskless.produce.partition.errors", metric.WithUnit("{partition}"),
			metric.WithDescription("Produce partitions answered with an error, by Kafka error"))),
	}
}

// acksOptions are the latency histogram's acks attribute sets, built once:
// "-1", "0", "1", and "invalid" for any other value a client sends (Kafka
// answers those INVALID_REQUIRED_ACKS), so that a client cannot grow the
// number of series.
var acksOptions = [...]metric.MeasurementOption{
	metric.WithAttributeSet(attribute.NewSet(attribute.String("acks", "-1"))),
	metric.WithAttributeSet(attribute.NewSet(attribute.String("acks", "0"))),
	metric.WithAttributeSet(attribute.NewSet(attribute.String("acks", "1"))),
	metric.WithAttributeSet(attribute.NewSet(attribute.String("acks", "invalid"))),
}

// acksOption returns the acks attribute set for a produce request's acks.
func acksOption(acks int16) metric.MeasurementOption {
	switch acks {
	case -1, 0, 1:
		return acksOptions[acks+1]
	}
	return acksOptions[3]
}

// APIVersions returns the wrapped handler's versions.
func (p *Producer) APIVersions() []kmsg.ApiVersionsResponseApiKey { return p.next.APIVersions() }

// Produce implements server.Producer.
func (p *Producer) Produce(ctx context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
	start := time.Now()
	var n int64
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			n += int64(len(req.Topics[i].Partitions[j].Records))
		}
	}
	p.bytes.Add(ctx, n)
	wait := p.next.Produce(ctx, req)
	acks := acksOption(req.Acks)
	return func() *kmsg.ProduceResponse {
		resp := wait()
		p.latency.Record(ctx, time.Since(start).Seconds(), acks)
		if resp != nil {
			for i := range resp.Topics {
				for _, pr := range resp.Topics[i].Partitions {
					if pr.ErrorCode != 0 {
						p.errors.Add(ctx, 1, metric.WithAttributes(errorAttr(pr.ErrorCode)))
					}
				}
			}
		}
		return resp
	}
}

func errorAttr(code int16) attribute.KeyValue {
	if e := kerr.TypedErrorForCode(code); e != nil {
		return attribute.String("error", e.Message)
	}
	return attribute.String("error", strconv.Itoa(int(code)))
}

// FetchHandler is what the server calls for Fetch, ListOffsets and
// OffsetForLeaderEpoch (server.Fetcher).
type FetchHandler interface {
	Fetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse
	ListOffsets(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse
	OffsetForLeaderEpoch(ctx context.Context, req *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse
	APIVersions() []kmsg.ApiVersionsResponseApiKey
}

// Fetcher wraps a FetchHandler, measuring fetch latency (long-poll
// included), the record bytes served, and partition errors.
type Fetcher struct {
	FetchHandler
	latency metric.Float64Histogram
	bytes   metric.Int64Counter
	errors  metric.Int64Counter
}

// NewFetcher wraps next.
func NewFetcher(mp metric.MeterProvider, next FetchHandler) *Fetcher {
	m := Meter(mp)
	return &Fetcher{
		FetchHandler: next,
		latency: must(m.Float64Histogram("diskless.fetch.latency", metric.WithUnit("s"),
			metric.WithDescription("Fetch request latency, long-poll included"),
			metric.WithExplicitBucketBoundaries(latencyBuckets...))),
		bytes: must(m.Int64Counter("diskless.fetch.bytes", metric.WithUnit("By"),
			metric.WithDescription("record-batch bytes served to consumers"))),
		errors: must(m.Int64Counter("diskless.fetch.partition.errors", metric.WithUnit("{partition}"),
			metric.WithDescription("Fetch partitions answered with an error, by Kafka error"))),
	}
}

// Fetch implements server.Fetcher.
func (f *Fetcher) Fetch(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	start := time.Now()
	resp := f.FetchHandler.Fetch(ctx, req)
	f.latency.Record(ctx, time.Since(start).Seconds())
	if resp == nil {
		return nil
	}
	var n int64
	for i := range resp.Topics {
		for _, p := range resp.Topics[i].Partitions {
			n += int64(len(p.RecordBatches))
			if p.ErrorCode != 0 {
				f.errors.Add(ctx, 1, metric.WithAttributes(errorAttr(p.ErrorCode)))
			}
		}
	}
	f.bytes.Add(ctx, n)
	return resp
}

// ShardCommitter is the coordinator surface the commit stage calls.
type ShardCommitter interface {
	ShardFor(id diskless.TopicID, partition int32) int32
	CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error)
}

// Shards wraps a ShardCommitter, measuring commit latency per shard
// (diskless.commit.latency) and failed calls.
type Shards struct {
	ShardCommitter
	latency  metric.Float64Histogram
	failures metric.Int64Counter
}

// NewShards wraps next.
func NewShards(mp metric.MeterProvider, next ShardCommitter) *Shards {
	m := Meter(mp)
	return &Shards{
		ShardCommitter: next,
		latency: must(m.Float64Histogram("diskless.commit.latency", metric.WithUnit("s"),
			metric.WithDescription("CommitFile latency per coordinator shard (durable in its metadata log)"),
			metric.WithExplicitBucketBoundaries(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5))),
		failures: must(m.Int64Counter("diskless.commit.failures", metric.WithUnit("{call}"),
			metric.WithDescription("CommitFile calls that failed as a whole"))),
	}
}

// CommitFile implements commit.Shards.
func (s *Shards) CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	start := time.Now()
	rs, err := s.ShardCommitter.CommitFile(ctx, shard, req)
	attrs := metric.WithAttributes(attribute.Int("shard", int(shard)))
	s.latency.Record(ctx, time.Since(start).Seconds(), attrs)
	if err != nil {
		s.failures.Add(ctx, 1, attrs)
	}
	return rs, err
}

// ObserveLimits exports configured limits as gauges, so that alerts and
// dashboards can compare a usage with its bound without knowing the
// configuration: diskless.produce.pending.limit (bytes,
// diskless.append.max.pending.bytes) beside diskless.produce.pending.
func ObserveLimits(mp metric.MeterProvider, maxPendingBytes int64) error {
	var v atomic.Int64
	v.Store(maxPendingBytes)
	return observe(Meter(mp), nil, []counter{
		{"diskless.produce.pending.limit", "By", "diskless.append.max.pending.bytes: the bound of diskless.produce.pending", &v},
	})
}

// ObserveHealth exports diskless.coordinator.failed, a gauge: 1 while
// health's reading reports failed (a coordinator shard has failed for good and
// answers KAFKA_STORAGE_ERROR until the process restarts; /healthz names
// it), else 0; and diskless.coordinator.shards, a gauge of the shards by
// state (serving, loading, retrying, failed: coordinator.ShardState) and
// role (hosted, replica), every pair observed (0 included) so a series
// never vanishes — a shard retrying its rebuild or reload while its log
// cannot be read is counted there, not in the first. health is called
// once per collection, so both gauges come from one reading (as /healthz
// does: coordinator.Health), and must be cheap (coordinator.Coordinator's
// Health is).
func ObserveHealth(mp metric.MeterProvider, health func() (shards []coordinator.ShardHealth, failed error)) error {
	m := Meter(mp)
	g, err := m.Int64ObservableGauge("diskless.coordinator.failed", metric.WithUnit("{shard}"),
		metric.WithDescription("1 while a coordinator shard has failed for good (/healthz answers 503 naming it), else 0"))
	if err != nil {
		return err
	}
	byState, err := m.Int64ObservableGauge("diskless.coordinator.shards", metric.WithUnit("{shard}"),
		metric.WithDescription("coordinator shards by state (serving, loading, retrying, failed) and role (hosted, replica)"))
	if err != nil {
		return err
	}
	states := []coordinator.ShardState{coordinator.ShardServing, coordinator.ShardLoading, coordinator.ShardRetrying, coordinator.ShardFailed}
	type key struct {
		hosted bool
		state  coordinator.ShardState
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		shards, failed := health()
		var v int64
		if failed != nil {
			v = 1
		}
		o.ObserveInt64(g, v)
		n := map[key]int64{}
		for _, h := range shards {
			n[key{h.Hosted, h.State}]++
		}
		for _, hosted := range []bool{true, false} {
			role := "replica"
			if hosted {
				role = "hosted"
			}
			for _, st := range states {
				o.ObserveInt64(byState, n[key{hosted, st}], metric.WithAttributes(
					attribute.String("state", st.String()), attribute.String("role", role)))
			}
		}
		return nil
	}, g, byState)
	return err
}
