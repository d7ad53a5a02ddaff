package server

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// FuzzConn feeds arbitrary bytes to one connection's reader and writer, with
// the fakes behind them. Nothing may panic (a recovered panic is logged at
// error, which fails the test), no goroutine may hang, and every request
// read is answered before the connection closes.
func FuzzConn(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOneConn(t, data, &boundListener{Listener: Listener{Name: "PLAINTEXT", Protocol: Plaintext}})
	})
}

// fuzzOneConn runs one connection of listener l over data: nothing may
// panic or log an error, no goroutine may hang, every request read is
// answered before the connection closes.
func fuzzOneConn(t *testing.T, data []byte, l *boundListener) {
	logs := &logSink{}
	cat := newFakeCatalog()
	if _, err := cat.CreateTopic(context.Background(), "existing", 3, nil); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{
		Addr: "127.0.0.1:0", NodeID: 1, ClusterID: "fuzz", AutoCreateTopics: true,
		MaxRequestBytes: 1 << 20, MaxInflightPerConn: 4, Logger: logs.logger(), FailedAuthDelay: time.Microsecond,
		Shards: &fakeShards{commitFn: func(_ int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
			return make([]diskless.CommitBatchResult, len(req.Batches)), nil
		}},
	}, &fakeProducer{}, &fakeFetcher{}, cat)
	if err != nil {
		t.Fatal(err)
	}
	fc := newScriptConn(data)
	s.startConn(context.Background(), l, fc)
	c := func() *conn {
		s.mu.Lock()
		defer s.mu.Unlock()
		for c := range s.mu.conns {
			return c
		}
		return nil
	}()

	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	deadline := time.After(testTimeout)
wait:
	for {
		select {
		case <-done:
			break wait
		case <-deadline:
			t.Fatalf("connection goroutines still running after %v", testTimeout)
		case <-fc.drained:
			// Input consumed; close once every request read is answered
			// (the reader itself holds one in-flight token while reading).
			if c != nil && len(c.inflight) <= 1 {
				fc.Close()
			} else {
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	if n := logs.errors.Load(); n != 0 {
		t.Fatalf("%d error logs:\n%s", n, logs.String())
	}
}

// scriptConn is a net.Conn whose reads return a fixed input, then block
// until Close; writes are discarded.
type scriptConn struct {
	mu      sync.Mutex
	in      []byte
	drained chan struct{} // closed when the input is consumed
	closed  chan struct{}
	once    sync.Once
	dOnce   sync.Once
}

func newScriptConn(in []byte) *scriptConn {
	return &scriptConn{in: in, drained: make(chan struct{}), closed: make(chan struct{})}
}

func (c *scriptConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.in) > 0 {
		n := copy(p, c.in)
		c.in = c.in[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	c.dOnce.Do(func() { close(c.drained) })
	<-c.closed
	return 0, io.EOF
}

func (c *scriptConn) Write(p []byte) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
		return len(p), nil
	}
}

func (c *scriptConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{Port: 1} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzSeeds returns valid requests of every supported key and version (some
// concatenated, some truncated) and a few broken frames.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	var all []byte
	for _, a := range testAPIs() {
		for v := a.MinVersion; v <= a.MaxVersion; v++ {
			req := requestForKey(a.ApiKey)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.ProduceRequest:
				r.Acks = -1
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "existing"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = make([]byte, 61)
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics = append(r.Topics, rt)
			case *kmsg.MetadataRequest:
				rt := kmsg.NewMetadataRequestTopic()
				rt.Topic = kmsg.StringPtr("auto")
				r.Topics = append(r.Topics, rt)
				r.AllowAutoTopicCreation = true
			case *kmsg.CreateTopicsRequest:
				rt := kmsg.NewCreateTopicsRequestTopic()
				rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "created", 2, 3
				c := kmsg.NewCreateTopicsRequestTopicConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("1000")
				rt.Configs = append(rt.Configs, c)
				r.Topics = append(r.Topics, rt)
			case *kmsg.InitProducerIDRequest:
				r.ProducerID, r.ProducerEpoch = 5, 1
			}
			b := f.AppendRequest(nil, req, int32(v))
			seeds = append(seeds, b)
			all = append(all, b...)
		}
	}
	seeds = append(seeds,
		all,
		all[:len(all)/2],
		[]byte{0xff, 0xff, 0xff, 0xff},
		binary.BigEndian.AppendUint32(nil, 1<<20+1),
		append(binary.BigEndian.AppendUint32(nil, 10), 0, 18, 0, 9, 0, 0, 0, 1, 0xff, 0xff),
		append(binary.BigEndian.AppendUint32(nil, 10), 0x7f, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff),
	)
	return seeds
}
