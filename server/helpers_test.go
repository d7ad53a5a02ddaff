package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; nothing should come near it.
const testTimeout = 10 * time.Second

// testServer is a Server on 127.0.0.1:0 with fake dependencies.
type testServer struct {
	*Server
	cat   *fakeCatalog
	prod  *fakeProducer
	fetch *fakeFetcher
	logs  *logSink

	cancel    context.CancelFunc
	serveDone chan error
}

// startServer starts a Server with fakes; mod may adjust the config and the
// fakes before it starts. Cleanup shuts it down and checks that Serve
// returned nil.
func startServer(t testing.TB, mod func(*Config, *testServer)) *testServer {
	t.Helper()
	ts := &testServer{cat: newFakeCatalog(), prod: &fakeProducer{}, fetch: &fakeFetcher{}, logs: &logSink{}}
	cfg := Config{
		Addr:             "127.0.0.1:0",
		NodeID:           7,
		ClusterID:        "test-cluster",
		AutoCreateTopics: true,
		NumPartitions:    2,
		Logger:           ts.logs.logger(),
	}
	if mod != nil {
		mod(&cfg, ts)
	}
	s, err := New(cfg, ts.prod, ts.fetch, ts.cat)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Listen(); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ts.Server = s
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	ts.serveDone = make(chan error, 1)
	go func() { ts.serveDone <- s.Serve(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), testTimeout)
		defer scancel()
		if err := s.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-ts.serveDone:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(testTimeout):
			t.Errorf("Serve did not return")
		}
		cancel()
		if t.Failed() {
			t.Logf("server log:\n%s", ts.logs.String())
		}
	})
	return ts
}

// rawConn is a hand-driven Kafka client connection.
type rawConn struct {
	t    testing.TB
	nc   net.Conn
	br   *bufio.Reader
	corr int32
}

func dialRaw(t testing.TB, addr net.Addr) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr.String(), testTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes req with the next correlation id and returns that id.
func (c *rawConn) send(req kmsg.Request) int32 {
	c.t.Helper()
	c.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test"))
	c.write(f.AppendRequest(nil, req, c.corr))
	return c.corr
}

func (c *rawConn) write(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// readFrame reads one response frame.
func (c *rawConn) readFrame() ([]byte, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	var sz [4]byte
	if _, err := io.ReadFull(c.br, sz[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(sz[:]))
	_, err := io.ReadFull(c.br, buf)
	return buf, err
}

// recv reads the response to a request shaped like req: its correlation id
// and decoded body.
func (c *rawConn) recv(req kmsg.Request) (int32, kmsg.Response) {
	c.t.Helper()
	frame, err := c.readFrame()
	if err != nil {
		c.t.Fatalf("read response: %v", err)
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if req.IsFlexible() && req.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			c.t.Fatalf("flexible response header: want an empty tag section, got % x", body[:min(len(body), 4)])
		}
		body = body[1:]
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decode %s v%d response: %v", nameForKey(req.Key()), req.GetVersion(), err)
	}
	return corr, resp
}

// roundTrip sends req and returns its response, checking the correlation id.
func (c *rawConn) roundTrip(req kmsg.Request) kmsg.Response {
	c.t.Helper()
	corr := c.send(req)
	got, resp := c.recv(req)
	if got != corr {
		c.t.Fatalf("correlation id %d, want %d", got, corr)
	}
	return resp
}

// expectClosed checks that the server closes the connection (EOF or reset)
// without answering anything.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	frame, err := c.readFrame()
	if err == nil {
		c.t.Fatalf("got a %d-byte response, want the connection closed", len(frame))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		c.t.Fatalf("connection still open after %v", testTimeout)
	}
}

// apiVersions returns a v3 ApiVersions request.
func apiVersionsReq() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "raw", "1.0"
	return req
}

// checkServing checks that a fresh connection gets an ApiVersions answer.
func checkServing(t testing.TB, addr net.Addr) {
	t.Helper()
	c := dialRaw(t, addr)
	resp := c.roundTrip(apiVersionsReq()).(*kmsg.ApiVersionsResponse)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) != len(testAPIs()) {
		t.Fatalf("ApiVersions: error %d, %d keys", resp.ErrorCode, len(resp.ApiKeys))
	}
	_ = c.nc.Close()
}

// dialRawErr dials addr once, closing the connection on success.
func dialRawErr(addr net.Addr) (net.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr.String(), time.Second)
	if err == nil {
		_ = nc.Close()
	}
	return nc, err
}
