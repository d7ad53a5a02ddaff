package produce

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// metrics are the produce pipeline's instruments (DESIGN §Observability):
// each file's time in each stage, its size, and why it was sealed. The
// meter comes from Config.MeterProvider; noop by default.
type metrics struct {
	stage   metric.Float64Histogram
	bytes   metric.Int64Histogram
	batches metric.Int64Histogram
	files   metric.Int64Counter
	early   metric.Int64Counter
}

var (
	stageBuffer = metric.WithAttributes(attribute.String("stage", "buffer"))
	stageUpload = metric.WithAttributes(attribute.String("stage", "upload"))
	stageWait   = metric.WithAttributes(attribute.String("stage", "wait"))
	stageCommit = metric.WithAttributes(attribute.String("stage", "commit"))
)

func newMetrics(mp metric.MeterProvider, pending func() int64) (*metrics, error) {
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	m := mp.Meter("github.com/diskless-sidecar/sidecar")
	var (
		ms  metrics
		err error
	)
	if ms.stage, err = m.Float64Histogram("diskless.produce.file.stage.duration", metric.WithUnit("s"),
		metric.WithDescription("time a file spent in each stage: buffer (first batch to seal), upload (seal to stored), wait (stored to its commit's start: an earlier file holding batches of one of its producers and partitions had not finished), commit (its commit, to the answer)"),
		metric.WithExplicitBucketBoundaries(.001, .005, .01, .025, .05, .1, .15, .2, .25, .3, .5, 1, 2, 5, 10)); err != nil {
		return nil, err
	}
	if ms.bytes, err = m.Int64Histogram("diskless.produce.file.size", metric.WithUnit("By"),
		metric.WithDescription("bytes of record batches per sealed file (WAL object size)"),
		metric.WithExplicitBucketBoundaries(1<<10, 16<<10, 64<<10, 256<<10, 1<<20, 2<<20, 4<<20, 8<<20, 16<<20, 64<<20)); err != nil {
		return nil, err
	}
	if ms.batches, err = m.Int64Histogram("diskless.produce.file.batches", metric.WithUnit("{batch}"),
		metric.WithDescription("record batches per sealed file"),
		metric.WithExplicitBucketBoundaries(1, 10, 100, 1000, 10000, 100000)); err != nil {
		return nil, err
	}
	if ms.files, err = m.Int64Counter("diskless.produce.files", metric.WithUnit("{file}"),
		metric.WithDescription("files sealed, by reason: size, age, count or close")); err != nil {
		return nil, err
	}
	if ms.early, err = m.Int64Counter("diskless.produce.files.committed.early", metric.WithUnit("{file}"),
		metric.WithDescription("files whose commit started while a file sealed before them was still uploading or committing (no batch of one producer and partition in common)")); err != nil {
		return nil, err
	}
	ms.early.Add(context.Background(), 0) // exported from the start, 0 until the first
	if _, err = m.Int64ObservableGauge("diskless.produce.pending", metric.WithUnit("By"),
		metric.WithDescription("record-batch bytes buffered, uploading or committing (bounded by diskless.append.max.pending.bytes)"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(pending())
			return nil
		})); err != nil {
		return nil, err
	}
	return &ms, nil
}

// file records a file answered at done.
func (m *metrics) file(f *file, done time.Time) {
	ctx := context.Background()
	m.stage.Record(ctx, f.sealed.Sub(f.created).Seconds(), stageBuffer)
	m.stage.Record(ctx, f.uploadDone.Sub(f.sealed).Seconds(), stageUpload)
	m.stage.Record(ctx, f.commitStart.Sub(f.uploadDone).Seconds(), stageWait)
	if f.uploadErr == nil {
		m.stage.Record(ctx, done.Sub(f.commitStart).Seconds(), stageCommit)
	}
	m.bytes.Record(ctx, int64(f.size))
	m.batches.Record(ctx, int64(len(f.batches)))
	m.files.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", f.sealReason)))
}
