// Command heap measures from outside what each committed batch costs the
// sidecar in heap, in metadata log bytes on disk and in restart (replay)
// time: the measurement of issue 17 ("Metadata that stays bounded as data
// grows"), scripted so that it can be run again on every change.
//
// It starts the sidecar binary (built from ./cmd/sidecar unless -sidecar
// names one) on a fresh data.dir with GOGC=10 (-gogc) and a small block
// cache (-cache-bytes, so that the cache filling with produced bytes does
// not count as metadata), creates a topic of -partitions partitions and
// sends raw Produce requests (acks=-1, not idempotent) from -conns
// connections, each request holding one batch of one -value-size record
// per partition. At each of -points committed batches it stops sending,
// waits for the runtime's forced collection (at most 2 minutes apart
// when nothing else triggers one; go_memstats_last_gc_time_seconds moves)
// and reads go_memstats_heap_alloc_bytes from /metrics right after it,
// so the figure is the live heap, not GOGC's headroom. It then reports
// the heap per committed batch at each point and between points (the
// growth rate, which is what retention multiplies), the metadata log's
// bytes on disk per batch, and, with -restart, the time a restarted
// sidecar takes until /readyz answers 200 (the shards' replay).
//
//	go run ./bench/heap                                  # 1M and 2M batches over 1000 partitions
//	go run ./bench/heap -points 500000,1000000 -conns 8  # a shorter run
//	go run ./bench/heap -set diskless.consolidation.enable=true -set diskless.consolidation.min.age.ms=60000
//
// With consolidation, -settle waits at each point, producing nothing, until
// it has caught up (longer than min.age + segment.ms + a pass), so the heap
// read holds the segments and no WAL runs:
//
//	go run ./bench/heap -points 1000000,2000000,3000000,4000000 -settle 30s -set diskless.consolidation.enable=true \
//	  -set diskless.consolidation.min.age.ms=10000 -set diskless.consolidation.segment.ms=10000 \
//	  -set diskless.consolidation.interval.ms=1000 -set diskless.file.deletion.delay.ms=1000
//
// The load needs about 45,000 batches/s to match the figure (two
// cores; the sidecar seals a file every 250 ms, so each connection has a
// request in flight per file). bench/RESULTS.md holds the figures.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batchtest"
)

type config struct {
	sidecar    string
	partitions int
	points     []int64
	conns      int
	valueSize  int
	gogc       string
	cacheBytes int64
	restart    bool
	keep       bool
	jsonOut    bool
	sets       []string
	gcWait     time.Duration
	settle     time.Duration
}

type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var cfg config
	var points string
	var sets setFlags
	flag.StringVar(&cfg.sidecar, "sidecar", "", "sidecar binary to run (default: go build ./cmd/sidecar into a temporary directory)")
	flag.IntVar(&cfg.partitions, "partitions", 1000, "partitions of the topic; each request holds one batch per partition")
	flag.StringVar(&points, "points", "1000000,2000000", "committed batch counts at which the heap is read, ascending")
	flag.IntVar(&cfg.conns, "conns", 16, "connections, each with one Produce request in flight")
	flag.IntVar(&cfg.valueSize, "value-size", 16, "bytes of each record's value (one record per batch)")
	flag.StringVar(&cfg.gogc, "gogc", "10", "GOGC of the sidecar process")
	flag.Int64Var(&cfg.cacheBytes, "cache-bytes", 8<<20, "diskless.cache.max.bytes of the sidecar (small: the cache's bytes are not metadata)")
	flag.BoolVar(&cfg.restart, "restart", true, "restart the sidecar at the end and time its start-up (replay)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the data.dir")
	flag.BoolVar(&cfg.jsonOut, "json", false, "print the report as JSON")
	flag.DurationVar(&cfg.gcWait, "gc-wait", 150*time.Second, "how long to wait for a forced collection at each point")
	flag.DurationVar(&cfg.settle, "settle", 0, "how long to wait at each point, producing nothing, before reading the heap (with consolidation: longer than min.age + segment.ms + a pass, so that it has caught up)")
	flag.Var(&sets, "set", "extra sidecar config key=value (repeatable)")
	flag.Parse()
	cfg.sets = sets
	for _, p := range strings.Split(points, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n <= 0 || (len(cfg.points) > 0 && n <= cfg.points[len(cfg.points)-1]) {
			fmt.Fprintf(os.Stderr, "heap: -points %q: want ascending positive counts\n", points)
			os.Exit(2)
		}
		cfg.points = append(cfg.points, n)
	}
	if cfg.partitions < 1 || cfg.conns < 1 || cfg.valueSize < 0 {
		fmt.Fprintln(os.Stderr, "heap: -partitions and -conns must be ≥ 1, -value-size ≥ 0")
		os.Exit(2)
	}
	rep, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "heap:", err)
		os.Exit(1)
	}
	if cfg.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return
	}
	rep.print(os.Stdout)
}

// point is the state at one checkpoint.
type point struct {
	Batches      int64   `json:"batches"`
	HeapBytes    int64   `json:"heap_alloc_bytes"`
	HeapPerBatch float64 `json:"heap_bytes_per_batch"`
	// GrowthPerBatch is the heap added per batch since the point before
	// (since the empty sidecar for the first point).
	GrowthPerBatch float64 `json:"heap_growth_bytes_per_batch"`
	LogBytes       int64   `json:"metadata_log_bytes"`
	LogPerBatch    float64 `json:"metadata_log_bytes_per_batch"`
	BatchesPerSec  float64 `json:"batches_per_s"`
	GCWait         string  `json:"gc_wait"`
	// Segments and RunsConsolidated are consolidation's counts so far
	// (diskless_consolidation_segments_committed_total, _runs_total): 0
	// without it.
	Segments         int64 `json:"segments_committed,omitempty"`
	RunsConsolidated int64 `json:"runs_consolidated,omitempty"`
}

const (
	segmentsCommitted = "diskless_consolidation_segments_committed_total"
	runsConsolidated  = "diskless_consolidation_runs_total"
)

type report struct {
	Partitions     int      `json:"partitions"`
	Conns          int      `json:"conns"`
	ValueSize      int      `json:"value_size"`
	GOGC           string   `json:"gogc"`
	CacheBytes     int64    `json:"cache_bytes"`
	Sets           []string `json:"sets,omitempty"`
	EmptyHeapBytes int64    `json:"empty_heap_alloc_bytes"`
	Points         []point  `json:"points"`
	// RestartSeconds is the time from the restarted process's start to
	// /readyz answering 200, and RestartPerBatch that per committed batch.
	RestartSeconds    float64 `json:"restart_seconds,omitempty"`
	RestartNsPerBatch float64 `json:"restart_ns_per_batch,omitempty"`
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "%d partitions, %d connections, %d-byte values, GOGC=%s, diskless.cache.max.bytes=%d %s\n",
		r.Partitions, r.Conns, r.ValueSize, r.GOGC, r.CacheBytes, strings.Join(r.Sets, " "))
	fmt.Fprintf(w, "empty sidecar: heap %.1f MB\n", float64(r.EmptyHeapBytes)/1e6)
	fmt.Fprintf(w, "%12s %12s %10s %12s %12s %12s %10s %8s\n", "batches", "heap MB", "B/batch", "growth B/b", "log MB", "log B/batch", "batches/s", "gc wait")
	for _, p := range r.Points {
		fmt.Fprintf(w, "%12d %12.1f %10.1f %12.1f %12.1f %12.1f %10.0f %8s\n", p.Batches, float64(p.HeapBytes)/1e6,
			p.HeapPerBatch, p.GrowthPerBatch, float64(p.LogBytes)/1e6, p.LogPerBatch, p.BatchesPerSec, p.GCWait)
	}
	if r.RestartSeconds > 0 {
		fmt.Fprintf(w, "restart until ready: %.2f s (%.0f ns per batch)\n", r.RestartSeconds, r.RestartNsPerBatch)
	}
}

func run(cfg config) (*report, error) {
	tmp, err := os.MkdirTemp("", "sidecar-heap-")
	if err != nil {
		return nil, err
	}
	if !cfg.keep {
		defer os.RemoveAll(tmp)
	} else {
		fmt.Fprintln(os.Stderr, "heap: data.dir", filepath.Join(tmp, "data"))
	}
	bin := cfg.sidecar
	if bin == "" {
		bin = filepath.Join(tmp, "sidecar")
		build := exec.Command("go", "build", "-o", bin, "./cmd/sidecar")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return nil, fmt.Errorf("building the sidecar (run from the repository root, or pass -sidecar): %w", err)
		}
	}
	dataDir := filepath.Join(tmp, "data")
	sc, err := startSidecar(bin, dataDir, cfg)
	if err != nil {
		return nil, err
	}
	defer sc.kill()

	rep := &report{Partitions: cfg.partitions, Conns: cfg.conns, ValueSize: cfg.valueSize, GOGC: cfg.gogc,
		CacheBytes: cfg.cacheBytes, Sets: cfg.sets}
	ctx := context.Background()
	if err := createTopic(sc.kafka, "heap", cfg.partitions); err != nil {
		return nil, err
	}
	empty, wait, err := sc.heapAfterGC(ctx, cfg.gcWait)
	if err != nil {
		return nil, err
	}
	rep.EmptyHeapBytes = empty
	fmt.Fprintf(os.Stderr, "heap: empty sidecar %.1f MB (gc wait %v)\n", float64(empty)/1e6, wait)

	p, err := newProducer(sc.kafka, "heap", cfg)
	if err != nil {
		return nil, err
	}
	defer p.close()
	prevBatches, prevHeap := int64(0), empty
	for _, target := range cfg.points {
		start, before := time.Now(), p.acked.Load()
		if err := p.produceUntil(target); err != nil {
			return nil, err
		}
		elapsed := time.Since(start)
		n := p.acked.Load()
		if cfg.settle > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(cfg.settle):
			}
		}
		heap, wait, err := sc.heapAfterGC(ctx, cfg.gcWait)
		if err != nil {
			return nil, err
		}
		logBytes := dirBytes(filepath.Join(dataDir, "coordinator"))
		pt := point{
			Batches:        n,
			HeapBytes:      heap,
			HeapPerBatch:   float64(heap-empty) / float64(n),
			GrowthPerBatch: float64(heap-prevHeap) / float64(n-prevBatches),
			LogBytes:       logBytes,
			LogPerBatch:    float64(logBytes) / float64(n),
			BatchesPerSec:  float64(n-before) / elapsed.Seconds(),
			GCWait:         wait.Round(time.Second).String(),
		}
		if m, err := sc.metrics(segmentsCommitted, runsConsolidated); err == nil {
			pt.Segments, pt.RunsConsolidated = int64(m[segmentsCommitted]), int64(m[runsConsolidated])
		}
		rep.Points = append(rep.Points, pt)
		fmt.Fprintf(os.Stderr, "heap: %d batches, heap %.1f MB, %.1f B/batch (growth %.1f), log %.1f B/batch, %.0f batches/s\n",
			n, float64(heap)/1e6, pt.HeapPerBatch, pt.GrowthPerBatch, pt.LogPerBatch, pt.BatchesPerSec)
		if pt.Segments > 0 {
			fmt.Fprintf(os.Stderr, "heap: consolidation so far: %d segments committed, %d runs replaced\n", pt.Segments, pt.RunsConsolidated)
		}
		prevBatches, prevHeap = n, heap
	}
	p.close()
	if cfg.restart {
		if err := sc.stop(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		sc2, err := startSidecar(bin, dataDir, cfg)
		if err != nil {
			return nil, err
		}
		defer sc2.kill()
		if err := sc2.waitReady(10 * time.Minute); err != nil {
			return nil, err
		}
		rep.RestartSeconds = time.Since(t0).Seconds()
		if n := prevBatches; n > 0 {
			rep.RestartNsPerBatch = rep.RestartSeconds * 1e9 / float64(n)
		}
	}
	return rep, nil
}

// sidecar is a running sidecar process.
type sidecar struct {
	cmd    *exec.Cmd
	kafka  string
	http   string
	exited chan struct{}
	logs   *os.File
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startSidecar(bin, dataDir string, cfg config) (*sidecar, error) {
	kp, err := freePort()
	if err != nil {
		return nil, err
	}
	hp, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &sidecar{kafka: fmt.Sprintf("127.0.0.1:%d", kp), http: fmt.Sprintf("127.0.0.1:%d", hp), exited: make(chan struct{})}
	args := []string{
		"--set", "listeners=PLAINTEXT://" + s.kafka,
		"--set", "http.listener=" + s.http,
		"--set", "data.dir=" + dataDir,
		"--set", "log.level=warn",
		"--set", "auto.create.topics.enable=false",
		"--set", fmt.Sprintf("diskless.cache.max.bytes=%d", cfg.cacheBytes),
	}
	for _, kv := range cfg.sets {
		args = append(args, "--set", kv)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = append(os.Environ(), "GOGC="+cfg.gogc)
	if s.logs, err = os.CreateTemp("", "sidecar-heap-log-"); err != nil {
		return nil, err
	}
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(2 * time.Minute); err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

func (s *sidecar) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("the sidecar exited during start-up; its log: %s", s.logs.Name())
		default:
		}
		resp, err := http.Get("http://" + s.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the sidecar was not ready within %v; its log: %s", limit, s.logs.Name())
}

func (s *sidecar) stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(2 * time.Minute):
		return errors.New("the sidecar did not stop within 2 minutes of SIGTERM")
	}
}

func (s *sidecar) kill() {
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.logs.Close()
	os.Remove(s.logs.Name())
}

// metrics returns the named gauges' values from one scrape of /metrics.
func (s *sidecar) metrics(names ...string) (map[string]float64, error) {
	resp, err := http.Get("http://" + s.http + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := make(map[string]float64, len(names))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, n := range names {
			if rest, ok := strings.CutPrefix(line, n+" "); ok {
				v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
				if err != nil {
					return nil, fmt.Errorf("metric %s: %w", n, err)
				}
				out[n] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("metric %s not in /metrics", n)
		}
	}
	return out, nil
}

// heapAfterGC waits, doing nothing, for a collection that starts after the
// call (the runtime forces one at least every 2 minutes), and returns
// go_memstats_heap_alloc_bytes as of the first scrape that sees it — the
// live heap plus what the scrapes allocated since — and how long it
// waited.
func (s *sidecar) heapAfterGC(ctx context.Context, limit time.Duration) (int64, time.Duration, error) {
	const last, heap = "go_memstats_last_gc_time_seconds", "go_memstats_heap_alloc_bytes"
	start := time.Now()
	m, err := s.metrics(last, heap)
	if err != nil {
		return 0, 0, err
	}
	before := m[last]
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		if m, err = s.metrics(last, heap); err != nil {
			return 0, 0, err
		}
		if m[last] > before {
			return int64(m[heap]), time.Since(start), nil
		}
	}
	return 0, 0, fmt.Errorf("no collection within %v (-gc-wait)", limit)
}

// dirBytes returns the bytes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// conn is a raw Kafka connection with one request in flight at a time.
type conn struct {
	c    net.Conn
	corr int32
}

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &conn{c: c}, nil
}

// roundTrip sends frame (a whole request with its size prefix, whose
// correlation id it overwrites) and decodes the answer into resp.
func (c *conn) roundTrip(frame []byte, resp kmsg.Response) error {
	c.corr++
	binary.BigEndian.PutUint32(frame[8:12], uint32(c.corr))
	_ = c.c.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := c.c.Write(frame); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c.c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.c, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != c.corr {
		return fmt.Errorf("correlation id %d, want %d", got, c.corr)
	}
	body = body[4:]
	if resp.IsFlexible() {
		if len(body) == 0 || body[0] != 0 {
			return errors.New("unexpected response header tags")
		}
		body = body[1:]
	}
	return resp.ReadFrom(body)
}

func request(req kmsg.Request) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("bench-heap")).AppendRequest(nil, req, 0)
}

func createTopic(addr, name string, partitions int) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.c.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 5
	req.TimeoutMillis = 60_000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions = int32(partitions)
	t.ReplicationFactor = 1
	req.Topics = append(req.Topics, t)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	resp.Version = req.Version
	if err := c.roundTrip(request(req), resp); err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return fmt.Errorf("CreateTopics %s: %w", name, err)
	}
	return nil
}

// producer sends the Produce requests from its connections.
type producer struct {
	conns []*conn
	frame [][]byte // per connection: one request, encoded once
	acked atomic.Int64
}

func newProducer(addr, topic string, cfg config) (*producer, error) {
	p := &producer{}
	value := make([]byte, cfg.valueSize)
	ts := time.Now().UnixMilli()
	b := batchtest.Make(batchtest.Plain(ts), batchtest.Record{Value: value})
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 60_000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for i := range cfg.partitions {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = int32(i)
		rp.Records = b
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	for range cfg.conns {
		c, err := dial(addr)
		if err != nil {
			p.close()
			return nil, err
		}
		p.conns = append(p.conns, c)
		p.frame = append(p.frame, request(req))
	}
	return p, nil
}

// produceUntil sends requests on every connection until target batches
// are acknowledged, then waits for the requests in flight. A partition
// error fails the run.
func (p *producer) produceUntil(target int64) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i, c := range p.conns {
		wg.Go(func() {
			resp := kmsg.NewPtrProduceResponse()
			for p.acked.Load() < target {
				resp.Default()
				resp.Version = 9
				if err := c.roundTrip(p.frame[i], resp); err != nil {
					mu.Lock()
					first = cmpErr(first, fmt.Errorf("produce: %w", err))
					mu.Unlock()
					return
				}
				var n int64
				for _, t := range resp.Topics {
					for _, rp := range t.Partitions {
						if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
							mu.Lock()
							first = cmpErr(first, fmt.Errorf("produce: partition %d: %w", rp.Partition, err))
							mu.Unlock()
							return
						}
						n++
					}
				}
				p.acked.Add(n)
			}
		})
	}
	wg.Wait()
	return first
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (p *producer) close() {
	for _, c := range p.conns {
		c.c.Close()
	}
	p.conns = nil
}
