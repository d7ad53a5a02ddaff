package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestPipelinedResponsesInOrder sends a slow request, then a fast one, on one
// connection without waiting: the fast one is handled first but answered
// second.
func TestPipelinedResponsesInOrder(t *testing.T) {
	listed := make(chan struct{})
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.fetch.fetchHook = func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
			select { // finish only after the later ListOffsets was handled
			case <-listed:
			case <-ctx.Done():
			}
			return req.ResponseKind().(*kmsg.FetchResponse)
		}
		ts.fetch.listOffsetsHook = func(_ context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
			close(listed)
			return req.ResponseKind().(*kmsg.ListOffsetsResponse)
		}
	})
	c := dialRaw(t, ts.Addr())
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	list := kmsg.NewPtrListOffsetsRequest()
	list.Version = 7
	c1, c2 := c.send(fetch), c.send(list)
	if got, resp := c.recv(fetch); got != c1 || resp.Key() != 1 {
		t.Fatalf("first response: correlation %d key %d, want %d (Fetch)", got, resp.Key(), c1)
	}
	if got, resp := c.recv(list); got != c2 || resp.Key() != 2 {
		t.Fatalf("second response: correlation %d key %d, want %d (ListOffsets)", got, resp.Key(), c2)
	}
}

// TestProduceOrder checks that Produce is called in request order on the
// reader, that responses follow request order even when an earlier produce
// completes last, and that acks=0 gets no response without disturbing the
// order of the others.
func TestProduceOrder(t *testing.T) {
	var (
		mu      sync.Mutex
		calls   []int32 // TimeoutMillis of each request, in call order
		release = make(chan struct{})
	)
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.prod.produceHook = func(_ context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
			mu.Lock()
			calls = append(calls, req.TimeoutMillis)
			mu.Unlock()
			resp := ts.prod.answer(req)
			if req.TimeoutMillis == 1 { // the first one completes last
				return func() *kmsg.ProduceResponse { <-release; return resp }
			}
			return func() *kmsg.ProduceResponse { return resp }
		}
	})
	c := dialRaw(t, ts.Addr())
	produce := func(timeout int32, acks int16) *kmsg.ProduceRequest {
		req := kmsg.NewPtrProduceRequest()
		req.Version = 9
		req.Acks = acks
		req.TimeoutMillis = timeout
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewProduceRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return req
	}
	reqs := []*kmsg.ProduceRequest{produce(1, -1), produce(2, 0), produce(3, 1), produce(4, -1)}
	var corrs []int32
	for _, r := range reqs {
		corrs = append(corrs, c.send(r))
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	mdCorr := c.send(md)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) == 4 })
	close(release)

	for _, i := range []int{0, 2, 3} { // request 1 is acks=0
		got, resp := c.recv(reqs[i])
		if got != corrs[i] {
			t.Fatalf("response %d: correlation %d, want %d", i, got, corrs[i])
		}
		if p := resp.(*kmsg.ProduceResponse); len(p.Topics) != 1 || p.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("response %d: %+v", i, p)
		}
	}
	if got, _ := c.recv(md); got != mdCorr {
		t.Fatalf("metadata: correlation %d, want %d", got, mdCorr)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, v := range calls {
		if v != int32(i+1) {
			t.Fatalf("Produce call order %v, want request order", calls)
		}
	}
}

// TestMalformedInputClosesOnlyThatConnection sends bad input on one
// connection while another, already open, keeps working.
func TestMalformedInputClosesOnlyThatConnection(t *testing.T) {
	const maxReq = 1 << 16
	ts := startServer(t, func(cfg *Config, _ *testServer) { cfg.MaxRequestBytes = maxReq })
	frame := func(body []byte) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	hdr := func(key, version int16) []byte { // fixed header, correlation id 1, null client id
		return []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version), 0, 0, 0, 1, 0xff, 0xff}
	}
	md := func(v int16) []byte {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		return kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
	}
	for _, tc := range []struct {
		name string
		data []byte
		// halfClose closes the client's write side after data.
		halfClose bool
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff, 0, 3, 0, 1}, false},
		{"size below a header", frame([]byte{0, 3, 0, 1}), false},
		{"frame above socket.request.max.bytes", binary.BigEndian.AppendUint32(nil, maxReq+1), false},
		{"truncated frame", append(binary.BigEndian.AppendUint32(nil, 100), hdr(3, 1)...), true},
		{"truncated header", frame([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 9, 'a'}), false},
		{"truncated body", frame(append(hdr(3, 1), 0, 0, 0, 5)), false},
		{"garbage body", frame(append(hdr(19, 4), 0x7f, 0xff, 0xff, 0xff, 1, 2, 3)), false},
		{"unknown api key", frame(hdr(999, 0)), false},
		{"unimplemented api key", frame(hdr(10, 3)), false},
		{"unsupported version", md(13), false},
		{"version below the minimum", frame(append(hdr(1, 3), make([]byte, 40)...)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := dialRaw(t, ts.Addr())
			good.roundTrip(apiVersionsReq())
			bad := dialRaw(t, ts.Addr())
			bad.write(tc.data)
			if tc.halfClose {
				_ = bad.nc.(interface{ CloseWrite() error }).CloseWrite()
			}
			bad.expectClosed()
			good.roundTrip(apiVersionsReq())
			checkServing(t, ts.Addr())
		})
	}
	if n := ts.logs.errors.Load(); n != 0 {
		t.Fatalf("%d error logs for client mistakes", n)
	}
}

// TestPanicClosesConnection checks that a panic in a handler, in Produce or
// in a produce wait func closes that connection only, is logged at error,
// and the server keeps serving.
func TestPanicClosesConnection(t *testing.T) {
	var where atomic.Value // which hook panics
	where.Store("")
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.cat.topicsHook = func() {
			if where.Load() == "handler" {
				panic("test panic in handler")
			}
		}
		ts.prod.produceHook = func(_ context.Context, req *kmsg.ProduceRequest) func() *kmsg.ProduceResponse {
			if where.Load() == "produce" {
				panic("test panic in Produce")
			}
			return func() *kmsg.ProduceResponse { panic("test panic in wait") }
		}
	})
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	produce.Acks = -1
	for _, tc := range []struct {
		name string
		req  kmsg.Request
	}{
		{"handler", md},
		{"produce", produce},
		{"wait", produce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			where.Store(tc.name)
			before := ts.logs.errors.Load()
			other := dialRaw(t, ts.Addr())
			other.roundTrip(apiVersionsReq())
			c := dialRaw(t, ts.Addr())
			c.send(tc.req)
			c.expectClosed()
			if ts.logs.errors.Load() == before {
				t.Fatalf("panic not logged at error")
			}
			where.Store("")
			other.roundTrip(apiVersionsReq())
			checkServing(t, ts.Addr())
		})
	}
}

// TestSlowClientDoesNotBlockOthers fills one connection's pipeline with
// responses it never reads; another connection is served meanwhile.
func TestSlowClientDoesNotBlockOthers(t *testing.T) {
	big := make([]byte, 256<<10)
	ts := startServer(t, func(cfg *Config, ts *testServer) {
		cfg.MaxInflightPerConn = 4
		ts.fetch.fetchHook = func(_ context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic = "t"
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.RecordBatches = big
			rt.Partitions = append(rt.Partitions, rp)
			resp.Topics = append(resp.Topics, rt)
			return resp
		}
	})
	slow := dialRaw(t, ts.Addr())
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	for range 40 { // ~10 MiB of responses, more than socket buffers hold
		slow.send(fetch)
	}
	for range 5 {
		checkServing(t, ts.Addr())
	}
}

// TestGracefulShutdown checks that Shutdown stops accepting, answers a
// request already read (a blocked ListOffsets) without cancelling it, and
// then closes the connection.
func TestGracefulShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var sawCancel atomic.Bool
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.fetch.listOffsetsHook = func(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				sawCancel.Store(true)
			}
			return req.ResponseKind().(*kmsg.ListOffsetsResponse)
		}
	})
	c := dialRaw(t, ts.Addr())
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	corr := c.send(lo)
	<-entered

	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- ts.Shutdown(context.Background()) }()
	waitFor(t, func() bool { return ts.isClosing() })
	select {
	case err := <-shutdownDone:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if got, _ := c.recv(lo); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	c.expectClosed()
	if err := <-shutdownDone; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-ts.serveDone; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	ts.serveDone <- nil // for the cleanup
	if sawCancel.Load() {
		t.Fatalf("graceful shutdown canceled the handler's context")
	}
	if _, err := dialRawErr(ts.Addr()); err == nil {
		t.Fatalf("dial after Shutdown succeeded")
	}
}

// TestShutdownEndsLongPolls checks that a fetch waiting in its long-poll is
// told to answer at once when Shutdown starts, and its answer is still
// written before the connection closes.
func TestShutdownEndsLongPolls(t *testing.T) {
	entered := make(chan struct{})
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.fetch.fetchHook = func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
			close(entered)
			<-ctx.Done() // a long-poll that only Shutdown ends
			return req.ResponseKind().(*kmsg.FetchResponse)
		}
	})
	c := dialRaw(t, ts.Addr())
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	corr := c.send(fetch)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v (it waited for the long-poll)", err)
	}
	if got, _ := c.recv(fetch); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	c.expectClosed()
}

// TestShutdownDeadline checks that Shutdown past its deadline cancels the
// handlers' contexts, closes connections, and returns the context's error
// once every goroutine is gone.
func TestShutdownDeadline(t *testing.T) {
	entered := make(chan struct{})
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.fetch.listOffsetsHook = func(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
			close(entered)
			<-ctx.Done()
			return req.ResponseKind().(*kmsg.ListOffsetsResponse)
		}
	})
	c := dialRaw(t, ts.Addr())
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	c.send(lo)
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ts.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown: %v, want deadline exceeded", err)
	}
	c.expectClosed()
}

// TestServeContextCancel checks that canceling Serve's context closes
// connections at once and Serve returns nil.
func TestServeContextCancel(t *testing.T) {
	entered := make(chan struct{})
	ts := startServer(t, func(_ *Config, ts *testServer) {
		ts.fetch.fetchHook = func(ctx context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
			close(entered)
			<-ctx.Done()
			return req.ResponseKind().(*kmsg.FetchResponse)
		}
	})
	c := dialRaw(t, ts.Addr())
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	c.send(fetch)
	<-entered
	ts.cancel()
	select {
	case err := <-ts.serveDone:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		ts.serveDone <- nil
	case <-time.After(testTimeout):
		t.Fatalf("Serve did not return")
	}
	c.expectClosed()
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", testTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestIdleTimeout: a connection that sends nothing is closed after
// IdleTimeout, unless a request is in flight (a long-poll is not idleness).
func TestIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	ts := startServer(t, func(cfg *Config, ts *testServer) {
		cfg.IdleTimeout = 200 * time.Millisecond
		ts.fetch.listOffsetsHook = func(ctx context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return req.ResponseKind().(*kmsg.ListOffsetsResponse)
		}
	})
	idle := dialRaw(t, ts.Addr())
	idle.roundTrip(apiVersionsReq())
	start := time.Now()
	idle.expectClosed()
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", d)
	}

	busy := dialRaw(t, ts.Addr())
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	corr := busy.send(lo)
	time.Sleep(600 * time.Millisecond) // three idle timeouts with a request in flight
	close(release)
	if got, _ := busy.recv(lo); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
}

// TestNeverReadingClientIsClosed: a client that stops reading its
// responses is closed after IdleTimeout, freeing what its requests held.
func TestNeverReadingClientIsClosed(t *testing.T) {
	big := make([]byte, 1<<20)
	ts := startServer(t, func(cfg *Config, ts *testServer) {
		cfg.IdleTimeout = 300 * time.Millisecond
		ts.fetch.fetchHook = func(_ context.Context, req *kmsg.FetchRequest) *kmsg.FetchResponse {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.Topics = []kmsg.FetchResponseTopic{{Topic: "t", Partitions: []kmsg.FetchResponseTopicPartition{{RecordBatches: big}}}}
			return resp
		}
	})
	slow := dialRaw(t, ts.Addr())
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	for range 20 { // 20 MiB of responses, far more than socket buffers hold
		slow.send(fetch)
	}
	waitFor(t, func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(ts.mu.conns) == 0
	})
}

// TestRequestBudget: with MaxQueuedRequestBytes used up by requests in
// flight, another connection's request waits until they are answered.
func TestRequestBudget(t *testing.T) {
	release := make(chan struct{})
	var entered atomic.Int32
	ts := startServer(t, func(cfg *Config, ts *testServer) {
		cfg.MaxRequestBytes = 64 << 10
		cfg.MaxQueuedRequestBytes = 64 << 10
		ts.fetch.listOffsetsHook = func(_ context.Context, req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
			entered.Add(1)
			<-release
			return req.ResponseKind().(*kmsg.ListOffsetsResponse)
		}
	})
	// A request padded to most of the budget (topic names), held by the hook.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 4
	for i := range 60 {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = fmt.Sprintf("%0900d", i)
		lo.Topics = append(lo.Topics, rt)
	}
	holder := dialRaw(t, ts.Addr())
	corr := holder.send(lo)
	waitFor(t, func() bool { return entered.Load() == 1 })

	other := dialRaw(t, ts.Addr())
	done := make(chan struct{})
	go func() {
		defer close(done)
		other.roundTrip(lo)
	}()
	select {
	case <-done:
		t.Fatal("a request was read while the request budget was used up")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if got, _ := holder.recv(lo); got != corr {
		t.Fatalf("correlation %d, want %d", got, corr)
	}
	select {
	case <-done:
	case <-time.After(testTimeout):
		t.Fatal("the waiting request was not served once budget was free")
	}
}
