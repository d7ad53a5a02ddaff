// Package telemetry wires OpenTelemetry metrics for the sidecar
// (DESIGN §Observability): a MeterProvider whose readings are exported in
// the Prometheus text format, the instruments that read the components'
// own counters (upload, cache, coordinator stats), and wrappers around the
// stage interfaces (Producer, Fetcher, Shards) that time them. Hot-path
// packages never import the SDK: they take a metric.MeterProvider (noop by
// default) or are wrapped here.
//
// Metric names are dotted OpenTelemetry names; the Prometheus exporter
// turns them into underscores with unit and _total suffixes, e.g.
// diskless.upload.bytes (unit By) → diskless_upload_bytes_total and
// diskless.produce.latency (unit s) → diskless_produce_latency_seconds.
package telemetry

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Scope is the instrumentation scope of every sidecar instrument.
const Scope = "github.com/diskless-sidecar/sidecar"

// Prometheus is a MeterProvider exporting to a Prometheus registry, with
// the Go runtime and process collectors registered beside it.
type Prometheus struct {
	*sdkmetric.MeterProvider
	registry *prometheus.Registry
}

// NewPrometheus returns a MeterProvider whose instruments are read on each
// scrape of Handler.
func NewPrometheus() (*Prometheus, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	return &Prometheus{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)), registry: reg}, nil
}

// Handler serves the metrics in the Prometheus text format (GET /metrics).
func (p *Prometheus) Handler() http.Handler {
	return promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{})
}

// Meter returns the sidecar's meter from mp.
func Meter(mp metric.MeterProvider) metric.Meter { return mp.Meter(Scope) }

// must panics on an instrument definition error: those are programming
// errors (a bad name or unit), caught by the package's tests.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("telemetry: defining an instrument: %v", err))
	}
	return v
}
