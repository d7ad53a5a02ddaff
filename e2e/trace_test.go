package e2e

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a tiny OTLP/HTTP trace receiver (POST
// <prefix>/v1/traces, protobuf, gzip or not): it keeps every span it is
// sent with its resource's attributes.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// spans are the spans received, resources the resource attributes
	// (key → string value) of each export's first resource.
	spans     []*tracepb.Span
	resources []map[string]string
	paths     map[string]int
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{paths: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.paths[req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type")]++
		for _, rs := range msg.ResourceSpans {
			attrs := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				attrs[kv.Key] = kv.GetValue().GetStringValue()
			}
			r.resources = append(r.resources, attrs)
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// names returns the names of the spans received so far, each once, sorted.
func (r *otlpReceiver) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for _, s := range r.spans {
		seen[s.Name] = true
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestTracesOverOTLP runs the binary with otel.exporter.otlp.endpoint on an
// in-test OTLP/HTTP receiver (under a path prefix) and OTEL_* variables for
// the batching and the service name: after a produce and a consume through
// kgo, the spans of the produce path, the fetch path, the coordinator
// commit and the object store arrive at <prefix>/v1/traces as protobuf,
// with the resource naming the service (OTEL_SERVICE_NAME) and the node.
func TestTracesOverOTLP(t *testing.T) {
	t.Parallel()
	recv := startOTLPReceiver(t)
	sc := startSidecar(t, "", []string{"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=e2e-sidecar"},
		"otel.exporter.otlp.endpoint="+recv.srv.URL+"/otlp", "otel.traces.sampler.ratio=1", "node.id=7")
	if !strings.Contains(sc.Logs(), "exporting traces over OTLP") {
		t.Fatalf("no start-up line about tracing:\n%s", sc.Logs())
	}
	ctx := testCtx(t, time.Minute)
	cl := sc.Client(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("traced"), kgo.ConsumeTopics("traced"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 10; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		n += fs.NumRecords()
	}

	want := []string{"produce", "fetch", "fetch.find", "fetch.read", "coordinator.commit", "objstore.Put"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := recv.names()
		missing := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return slices.Contains(got, n) })
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans %v received, missing %v", got, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recv.mu.Lock()
	for p := range recv.paths {
		if p != "POST /otlp/v1/traces application/x-protobuf" {
			t.Errorf("request %q: want POST /otlp/v1/traces application/x-protobuf", p)
		}
	}
	for _, res := range recv.resources {
		if res["service.name"] != "e2e-sidecar" || res["service.instance.id"] != "7" {
			t.Errorf("resource %v: want service.name e2e-sidecar (OTEL_SERVICE_NAME), service.instance.id 7", res)
		}
	}
	recv.mu.Unlock()
	sc.Stop()
}
