package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traced is a sidecar started in-process whose spans go to an in-memory
// recorder (sdk/trace/tracetest), sampling every request.
type traced struct {
	a   *app
	rec *tracetest.SpanRecorder
	cl  *kgo.Client
}

func startTracedSidecar(t *testing.T, sets ...string) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	a, err := startTraced(testConfig(t, sets...), quiet, tp)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.server.Addr().String()), kgo.AllowAutoTopicCreation(),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Close()
		if err := a.shutdown(10 * time.Second); err != nil {
			t.Error(err)
		}
		tp.Shutdown(context.Background())
	})
	return &traced{a: a, rec: rec, cl: cl}
}

// named returns the ended spans called name.
func (s *traced) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.rec.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// children returns the ended spans whose parent is p, by name.
func (s *traced) children(p sdktrace.ReadOnlySpan) map[string][]sdktrace.ReadOnlySpan {
	out := map[string][]sdktrace.ReadOnlySpan{}
	for _, sp := range s.rec.Ended() {
		if sp.Parent().SpanID() == p.SpanContext().SpanID() && sp.Parent().TraceID() == p.SpanContext().TraceID() {
			out[sp.Name()] = append(out[sp.Name()], sp)
		}
	}
	return out
}

// one returns the only span of spans, failing the test if there is not
// exactly one.
func one(t *testing.T, what string, spans []sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	t.Helper()
	if len(spans) != 1 {
		t.Fatalf("%s: %d spans, want 1: %s", what, len(spans), names(spans))
	}
	return spans[0]
}

func names(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, sp := range spans {
		fmt.Fprintf(&b, "%s(%s) ", sp.Name(), sp.SpanContext().SpanID())
	}
	return b.String()
}

func attr(sp sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// produceOne produces one record to topic and returns its offset.
func (s *traced) produceOne(t *testing.T, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("traced")}).First()
	if err != nil {
		t.Fatal(err)
	}
	return r.Offset
}

// fetch sends one Fetch of topic's partition 0 from offset.
func (s *traced) fetch(t *testing.T, topic string, offset int64, maxWaitMs int32) *kmsg.FetchResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, s.cl)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMs
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = mresp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		t.Fatal(err)
	}
	if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
		t.Fatalf("fetch: error %d", ec)
	}
	return resp
}

// TestTraceFetch: a Fetch through the real server is one "fetch" span
// (server kind) with its find and read as children; a fetch at the end
// of the partition long-polls: "fetch.long_poll", whose outcome is
// "expired", with the look it ends with under it.
func TestTraceFetch(t *testing.T) {
	s := startTracedSidecar(t)
	off := s.produceOne(t, "traced")

	s.rec.Reset()
	resp := s.fetch(t, "traced", off, 0)
	if len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
		t.Fatal("fetch returned no records")
	}
	f := one(t, "fetch", s.named("fetch"))
	if f.SpanKind() != trace.SpanKindServer || f.Parent().IsValid() {
		t.Errorf("fetch: kind %v, parent %v: want a server root span", f.SpanKind(), f.Parent())
	}
	if v, _ := attr(f, "diskless.bytes"); v.AsInt64() == 0 {
		t.Errorf("fetch: diskless.bytes %v, want the bytes served", v)
	}
	c := s.children(f)
	one(t, "fetch.find", c["fetch.find"])
	read := one(t, "fetch.read", c["fetch.read"])
	if v, _ := attr(read, "diskless.fetch.ranges"); v.AsInt64() != 1 {
		t.Errorf("fetch.read: %v ranges, want 1", v)
	}
	if len(c["fetch.long_poll"]) != 0 {
		t.Errorf("a fetch with data long-polled")
	}

	s.rec.Reset()
	resp = s.fetch(t, "traced", off+1, 50)
	if len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatal("fetch at the end returned records")
	}
	f = one(t, "fetch", s.named("fetch"))
	c = s.children(f)
	one(t, "fetch.find (before the wait)", c["fetch.find"])
	lp := one(t, "fetch.long_poll", c["fetch.long_poll"])
	if v, _ := attr(lp, "diskless.fetch.outcome"); v.AsString() != "expired" {
		t.Errorf("fetch.long_poll: outcome %q, want expired", v.AsString())
	}
	if d := lp.EndTime().Sub(lp.StartTime()); d < 50*time.Millisecond {
		t.Errorf("fetch.long_poll lasted %v, want ≥ the 50 ms max wait", d)
	}
	if n := len(s.children(lp)["fetch.find"]); n < 1 {
		t.Errorf("fetch.long_poll: %d looks under it, want ≥ 1 (the last one)", n)
	}
	if len(c["fetch.read"]) != 0 {
		t.Errorf("a fetch with nothing to read read")
	}
}

// linksTo reports whether sp links to the span context sc.
func linksTo(sp sdktrace.ReadOnlySpan, sc trace.SpanContext) bool {
	for _, l := range sp.Links() {
		if l.SpanContext.SpanID() == sc.SpanID() && l.SpanContext.TraceID() == sc.TraceID() {
			return true
		}
	}
	return false
}

// TestTraceProduce: Produce requests through the real server, from two
// clients at once, are one "produce" span each (server kind, a root) with
// the steps validate, wait_memory and buffer as children; the file
// carrying a request's batch has an upload and a commit span, both
// linked to every produce span whose batch it carries (the buffer span
// names the file), a child of the first of them; under the upload span
// the object-store Put, under the commit span the coordinator commit of
// the same object.
func TestTraceProduce(t *testing.T) {
	s := startTracedSidecar(t, "diskless.append.commit.interval.ms=1000")
	s.produceOne(t, "traced") // creates the topic
	s.rec.Reset()
	other, err := kgo.NewClient(kgo.SeedBrokers(s.a.server.Addr().String()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	done := make(chan error, 1)
	go func() {
		done <- other.ProduceSync(context.Background(), &kgo.Record{Topic: "traced", Value: []byte("other")}).FirstErr()
	}()
	s.produceOne(t, "traced")
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	produces := s.named("produce")
	if len(produces) != 2 {
		t.Fatalf("%d produce spans, want 2: %s", len(produces), names(produces))
	}
	uploads, commits := s.named("produce.file.upload"), s.named("produce.file.commit")
	if len(uploads) == 0 || len(uploads) != len(commits) {
		t.Fatalf("%d upload and %d commit spans, want one each per file", len(uploads), len(commits))
	}
	for _, p := range produces {
		if p.SpanKind() != trace.SpanKindServer || p.Parent().IsValid() {
			t.Errorf("produce: kind %v, parent %v: want a server root span", p.SpanKind(), p.Parent())
		}
		if v, _ := attr(p, "diskless.acks"); v.AsInt64() != -1 {
			t.Errorf("produce: diskless.acks %v, want -1", v)
		}
		c := s.children(p)
		one(t, "produce.validate", c["produce.validate"])
		one(t, "produce.wait_memory", c["produce.wait_memory"])
		buf := one(t, "produce.buffer", c["produce.buffer"])
		seq, _ := attr(buf, "diskless.file.seq")
		for _, file := range [][]sdktrace.ReadOnlySpan{uploads, commits} {
			var linked []sdktrace.ReadOnlySpan
			for _, f := range file {
				if linksTo(f, p.SpanContext()) {
					linked = append(linked, f)
				}
			}
			f := one(t, "file spans linked to a produce", linked)
			if fs, _ := attr(f, "diskless.file.seq"); fs.AsInt64() != seq.AsInt64() {
				t.Errorf("%s of file %d links to a produce buffered in file %d", f.Name(), fs.AsInt64(), seq.AsInt64())
			}
		}
	}
	for i, up := range uploads {
		if !linksTo(up, up.Parent()) {
			t.Errorf("produce.file.upload: its parent is not one of its requests")
		}
		if n := len(up.Links()); n > 1 {
			t.Logf("one file carried %d requests", n)
		}
		put := one(t, "objstore.Put under produce.file.upload", s.children(up)["objstore.Put"])
		key, _ := attr(put, "diskless.object.key")
		var commit sdktrace.ReadOnlySpan
		for _, c := range commits {
			if cs, _ := attr(c, "diskless.file.seq"); cs == mustAttr(t, up, "diskless.file.seq") {
				commit = c
			}
		}
		if commit == nil {
			t.Fatalf("upload %d: no commit span of its file", i)
		}
		cc := one(t, "coordinator.commit under produce.file.commit", s.children(commit)["coordinator.commit"])
		if ck, _ := attr(cc, "diskless.object.key"); key.AsString() == "" || ck.AsString() != key.AsString() {
			t.Errorf("coordinator.commit of object %q, objstore.Put of %q: want the same", ck.AsString(), key.AsString())
		}
	}
}

func mustAttr(t *testing.T, sp sdktrace.ReadOnlySpan, key string) attribute.Value {
	t.Helper()
	v, ok := attr(sp, key)
	if !ok {
		t.Fatalf("%s has no attribute %s", sp.Name(), key)
	}
	return v
}
