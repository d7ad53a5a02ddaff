package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TraceConfig configures the export of traces over OTLP (DESIGN
// §Observability, Traces). Tracing is off unless an endpoint is given, by
// Endpoint or by the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT /
// OTEL_EXPORTER_OTLP_ENDPOINT variables; the exporters and the SDK read
// the other OTEL_* variables themselves (headers, timeout, compression,
// certificates, OTEL_BSP_* for the batching, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES for the resource, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG unless SampleRatio is set).
type TraceConfig struct {
	// Endpoint is the OTLP receiver's base URL, http://host:port or
	// https://host:port, with an optional path prefix: over
	// http/protobuf spans go to <Endpoint>/v1/traces, over grpc to its
	// host and port (plain text for http://). "" takes the OTEL_* variables,
	// and means off without them. Key otel.exporter.otlp.endpoint
	// (ValidateEndpoint checks it).
	Endpoint string
	// SampleRatio, in [0, 1], samples spans without a parent (every
	// request: the Kafka protocol carries no trace context) at this ratio,
	// and the others as their parent was (parent-based ratio sampling). A
	// negative value leaves the sampler to OTEL_TRACES_SAMPLER (the SDK's
	// default: parent-based, always on). Key otel.traces.sampler.ratio.
	SampleRatio float64
	// ServiceInstance is the resource's service.instance.id (the sidecar's
	// node.id); the service name is "diskless-sidecar". OTEL_SERVICE_NAME
	// and OTEL_RESOURCE_ATTRIBUTES override both.
	ServiceInstance string
	// Version is the resource's service.version, if not "".
	Version string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// ErrTraceEnv wraps an OTEL_* variable that names something the sidecar
// cannot do; its message names the variable. Start-up refuses it, as a
// bad configuration key.
var ErrTraceEnv = errors.New("telemetry: unsupported OTEL_* setting")

// ValidateEndpoint checks a value of otel.exporter.otlp.endpoint: "" or an
// http(s) URL with a host and neither query nor fragment.
func ValidateEndpoint(v string) error {
	if v == "" {
		return nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("has no host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("must have no user, query or fragment")
	}
	return nil
}

// Tracing is the sidecar's TracerProvider, exporting over OTLP in
// batches: spans are queued (OTEL_BSP_MAX_QUEUE_SIZE, 2048 by default) and
// dropped when the queue is full, so that a slow or absent receiver never
// holds up a request. Shutdown flushes the queue.
type Tracing struct {
	*sdktrace.TracerProvider
	// Protocol is the OTLP protocol in use: "http/protobuf" or "grpc".
	Protocol string
}

// NewTracing returns the TracerProvider cfg describes, or nil when
// tracing is off: no endpoint, OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. Errors: ErrTraceEnv for an OTEL_TRACES_EXPORTER
// other than otlp or none, or an OTEL_EXPORTER_OTLP(_TRACES)_PROTOCOL other
// than http/protobuf or grpc; an invalid Endpoint; the exporter's. The
// exporter connects lazily: an unreachable receiver is no error here.
func NewTracing(ctx context.Context, cfg TraceConfig) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if err := ValidateEndpoint(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("telemetry: otel.exporter.otlp.endpoint %q: %w", cfg.Endpoint, err)
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	switch e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: the sidecar exports traces over OTLP only (otlp or none)", ErrTraceEnv, e)
	}
	if cfg.Endpoint == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return nil, nil
	}
	protocol, protoVar := "http/protobuf", ""
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			protocol, protoVar = v, name
			break
		}
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch protocol {
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			u, _ := url.Parse(cfg.Endpoint) // validated above
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("%w: %s=%q: must be http/protobuf or grpc", ErrTraceEnv, protoVar, protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP trace exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "diskless-sidecar")}
	if cfg.ServiceInstance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.ServiceInstance))
	}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	// Later detectors win: the OTEL_* variables over the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: the trace resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if cfg.SampleRatio >= 0 {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(min(cfg.SampleRatio, 1)))))
	}
	return &Tracing{TracerProvider: sdktrace.NewTracerProvider(opts...), Protocol: protocol}, nil
}
