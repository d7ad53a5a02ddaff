package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/commit"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/fetch"
	"github.com/diskless-sidecar/sidecar/group"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/produce"
	"github.com/diskless-sidecar/sidecar/server"
	"github.com/diskless-sidecar/sidecar/upload"
)

// inproc is a sidecar in this process, wired as cmd/sidecar wires one:
// the real server, coordinator (embedded file log, fsync per group),
// produce pipeline, block cache and fetch handler over a local
// object-store directory. The consumer-group benchmarks drive it over TCP
// with real clients and raw group requests.
type inproc struct {
	addr  string
	coord *coordinator.Coordinator
	// commits times every CommitFile of the produce pipeline (the shard
	// driver's queue, decision and fsync) under the phase of its start.
	commits *phased
	phase   atomic.Pointer[string]
}

// setPhase names the phase commits are timed under from now on.
func (s *inproc) setPhase(p string) { s.phase.Store(&p) }

// timedShards is the coordinator as the committer sees it, timing each
// CommitFile.
type timedShards struct{ s *inproc }

func (t timedShards) ShardFor(id diskless.TopicID, p int32) int32 { return t.s.coord.ShardFor(id, p) }

func (t timedShards) CommitFile(ctx context.Context, shard int32, req *diskless.CommitFileRequest) ([]diskless.CommitBatchResult, error) {
	start, ph := time.Now(), *t.s.phase.Load()
	r, err := t.s.coord.CommitFile(ctx, shard, req)
	t.s.commits.record(ph, time.Since(start))
	return r, err
}

// inprocConfig is what the group benchmarks vary.
type inprocConfig struct {
	shards         int32
	commitInterval time.Duration // diskless.append.commit.interval.ms; 0: its default
	groups         group.Config
}

func startInproc(b testing.TB, cfg inprocConfig) *inproc {
	b.Helper()
	dir := b.TempDir()
	store, err := objstore.NewDir(filepath.Join(dir, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	coord, err := coordinator.Open(coordinator.Config{Dir: filepath.Join(dir, "coordinator"), NumShards: cfg.shards,
		Objects: store, Logger: quiet, Groups: cfg.groups})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := cache.New(cache.Config{}, store)
	if err != nil {
		b.Fatal(err)
	}
	up, err := upload.New(upload.Config{}, store)
	if err != nil {
		b.Fatal(err)
	}
	sc := &inproc{coord: coord, commits: newPhased()}
	sc.setPhase("")
	cm, err := commit.New(commit.Config{Logger: quiet, Objects: store}, timedShards{sc})
	if err != nil {
		b.Fatal(err)
	}
	prod, err := produce.New(produce.Config{CommitInterval: cfg.commitInterval, Logger: quiet}, coord, up, cm, cc)
	if err != nil {
		b.Fatal(err)
	}
	fh, err := fetch.New(fetch.Config{Logger: quiet}, coord, cc)
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{Addr: "127.0.0.1:0", ClusterID: "bench", Logger: quiet, Groups: coord}, prod, fh, coord)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
		prod.Close(ctx)
		up.Close()
		cc.Close()
		coord.Close()
	})
	sc.addr = srv.Addr().String()
	return sc
}

// rawConn sends one request at a time on its own connection and reads its
// answer: a group member's connection (a parked JoinGroup holds the
// answers behind it, so every member has its own, as clients do).
type rawConn struct {
	conn net.Conn
	corr int32
	buf  []byte
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawConn{conn: c}, nil
}

func (r *rawConn) close() { r.conn.Close() }

// do sends req (its Version set by the caller) and decodes the answer into
// a fresh response.
func (r *rawConn) do(req kmsg.Request) (kmsg.Response, error) {
	r.corr++
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench"))
	r.buf = f.AppendRequest(r.buf[:0], req, r.corr)
	if _, err := r.conn.Write(r.buf); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(r.conn, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if cap(r.buf) < int(n) {
		r.buf = make([]byte, n)
	}
	body := r.buf[:n]
	if _, err := io.ReadFull(r.conn, body); err != nil {
		return nil, err
	}
	if int32(binary.BigEndian.Uint32(body)) != r.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", binary.BigEndian.Uint32(body), r.corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() {
		body = body[1:] // no response header tags
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

// phased is a set of latency histograms (µs, 1 µs to 10 min), one per
// phase, safe for concurrent recording.
type phased struct {
	mu sync.Mutex
	h  map[string]*hdrhistogram.Histogram
}

func newPhased() *phased { return &phased{h: map[string]*hdrhistogram.Histogram{}} }

func (p *phased) record(phase string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.h[phase]
	if h == nil {
		h = hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
		p.h[phase] = h
	}
	h.RecordValue(max(d.Microseconds(), 1))
}

// quantileMs returns a phase's quantile q (0–100) in ms and its count.
func (p *phased) quantileMs(phase string, q float64) (float64, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.h[phase]
	if h == nil {
		return 0, 0
	}
	return float64(h.ValueAtQuantile(q)) / 1000, h.TotalCount()
}

// producer produces rate records/s of size bytes to topic from one
// idempotent kgo client (acks=all, the defaults), recording each record's
// produce latency (promise time minus Produce call time) under the phase
// current when it was sent, until ctx ends; wait returns once every
// promise ran. The rate is kept on a schedule: records the sending
// goroutine could not send on time (a busy machine delays it) are sent
// at its next turn, so that every phase is offered the same load.
type producer struct {
	lat   *phased
	phase func() string
	wg    sync.WaitGroup
	errs  sync.Map
}

func startProducer(b testing.TB, ctx context.Context, addr, topic string, rate, size int, phase func() string) *producer {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	p := &producer{lat: newPhased(), phase: phase}
	value := make([]byte, size)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer cl.Close()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		var inflight sync.WaitGroup
		defer inflight.Wait()
		begin, sent := time.Now(), int64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for due := int64(time.Since(begin)) * int64(rate) / int64(time.Second); sent < due; sent++ {
				start, ph := time.Now(), p.phase()
				inflight.Add(1)
				cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					defer inflight.Done()
					if err != nil {
						p.errs.Store(err.Error(), true)
						return
					}
					p.lat.record(ph, time.Since(start))
				})
			}
		}
	}()
	return p
}

func (p *producer) wait() { p.wg.Wait() }
