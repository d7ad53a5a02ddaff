package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Target is a Kafka endpoint to drive.
type Target struct {
	// Name labels the target in progress lines and reports ("sidecar",
	// "kfake").
	Name string
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// MetricsURL is the target's Prometheus endpoint for the store
	// figures; empty means the target has none, and NoMetrics says why.
	MetricsURL string
	// NoMetrics is printed for the store figures when MetricsURL is empty.
	NoMetrics string
	// PIDs are the target's server processes on this machine (the
	// sidecar; the Kafka brokers), whose CPU time in the window is
	// measured; none: no CPU figures, and NoCPU says why.
	PIDs  []int
	NoCPU string
	// PeerPIDs are other processes whose work in the window is part of
	// the target's cost (the Kafka brokers holding a sidecar's metadata
	// log), measured apart (Result.PeerCPU) and named by PeerName.
	PeerPIDs []int
	PeerName string
	// ReplicationFactor and TopicConfigs lay out a created topic; 0 is 1
	// replica (the sidecar ignores both).
	ReplicationFactor int16
	TopicConfigs      map[string]*string
}

// Result is one target's outcome. Rates are over the measured window;
// latencies are of the records sent in it (their answers and receipts may
// come during the drain).
type Result struct {
	Target  string   `json:"target"`
	Brokers []string `json:"brokers"`
	Topic   string   `json:"topic"`
	// WindowSeconds is the measured window's actual length.
	WindowSeconds float64 `json:"window_s"`
	// Interrupted is set when the run was cut short (SIGINT): the figures
	// are those of the window so far.
	Interrupted bool `json:"interrupted,omitempty"`

	// Produced counts records acknowledged without error in the window.
	Produced Throughput `json:"produced"`
	// Consumed counts this run's records received in the window; nil
	// without consumers.
	Consumed *Throughput `json:"consumed,omitempty"`
	// ProduceLatency is promise time minus Produce call time.
	ProduceLatency Latency `json:"produce_latency"`
	// E2ELatency is receive time minus Produce call time; nil without
	// consumers.
	E2ELatency *Latency `json:"e2e_latency,omitempty"`

	// Errors counts produce and fetch errors of the whole run (warmup and
	// drain included) by kind; ErrorCount is their sum.
	Errors     map[string]int64 `json:"errors,omitempty"`
	ErrorCount int64            `json:"error_count"`
	// Unacked counts records whose promise had not run when the drain
	// ended; Unconsumed, acknowledged records the consumers had not read by
	// then; Foreign, records read that another run wrote to the topic.
	Unacked    int64 `json:"unacked,omitempty"`
	Unconsumed int64 `json:"unconsumed,omitempty"`
	Foreign    int64 `json:"foreign,omitempty"`

	// Store is what the target's object store did in the window.
	Store Store `json:"store"`

	// produceHist and e2eHist are the histograms ProduceLatency and
	// E2ELatency summarise (microseconds), for -plot; e2eHist is nil
	// without consumers.
	produceHist, e2eHist *hdrhistogram.Histogram
	// windowOpened is how long after the load's clocks started (before the
	// warmup and the consumers' delay, which count from a moment later)
	// the window opened, past Warmup on a loaded machine; 0 if it never
	// opened.
	windowOpened time.Duration
	// CPU is what the target's server processes spent in the window.
	CPU CPU `json:"cpu"`
	// PeerCPU is what Target.PeerPIDs spent in the window, named by Peer;
	// nil without peers.
	PeerCPU *CPU   `json:"peer_cpu,omitempty"`
	Peer    string `json:"peer,omitempty"`
}

// Throughput is a count of records and value bytes over the window.
type Throughput struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	RecordsPerSec float64 `json:"records_per_s"`
	// MBPerSec is value bytes per second / 10^6.
	MBPerSec float64 `json:"mb_per_s"`
}

func throughput(records, bytes int64, window time.Duration) Throughput {
	t := Throughput{Records: records, Bytes: bytes}
	if s := window.Seconds(); s > 0 {
		t.RecordsPerSec = float64(records) / s
		t.MBPerSec = float64(bytes) / s / 1e6
	}
	return t
}

// newTopicName returns a topic name no earlier run used.
func newTopicName() string {
	return fmt.Sprintf("load-%s-%04x", time.Now().UTC().Format("20060102-150405"), rand.Uint32()&0xffff)
}

// run drives target t with the load cfg describes: cfg.Warmup of load, the
// measured window of cfg.Duration, then the drain (producers flushed,
// consumers caught up, both within cfg.Drain). If ctx is cancelled it stops
// early and returns the figures so far with Interrupted set. It returns an
// error only when the load could not start (bad config, target
// unreachable, topic not created).
func run(ctx context.Context, cfg Config, t Target) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if len(t.Brokers) == 0 {
		return Result{}, errors.New("no brokers")
	}
	topic := cfg.Topic
	if topic == "" {
		topic = newTopicName()
	}
	res := Result{Target: t.Name, Brokers: t.Brokers, Topic: topic}

	start, err := prepareTopic(ctx, cfg, t, topic)
	if err != nil {
		return res, fmt.Errorf("%s: %w", t.Name, err)
	}

	l, err := newLoad(cfg, t, topic, start)
	if err != nil {
		return res, fmt.Errorf("%s: %w", t.Name, err)
	}
	defer l.close()
	l.drive(ctx)
	l.fill(&res)
	return res, nil
}

// prepareTopic checks that a seed broker answers, creates topic (keeping
// it if it exists) and returns its partitions' end offsets, where the
// consumers start.
func prepareTopic(ctx context.Context, cfg Config, t Target, topic string) (map[int32]kgo.Offset, error) {
	brokers := t.Brokers
	ctx, cancel := context.WithTimeout(ctx, cfg.SetupTimeout)
	defer cancel()
	// kgo retries a refused connection until the deadline and then
	// reports the deadline; one dial names the real problem at once.
	if err := dialAny(ctx, brokers); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(clientOpts(brokers)...)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, cfg.Partitions, max(1, t.ReplicationFactor), t.TopicConfigs, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("create topic %s: %w", topic, err)
	}
	// A created topic may take a moment to show in metadata; retry until
	// every partition has an end offset.
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = offs.Error()
		}
		if err == nil {
			if listed := offs[topic]; len(listed) > 0 {
				// Offsets without the leader epoch that kadm's KOffsets
				// would attach: with one, kgo first validates the
				// position with OffsetForLeaderEpoch, which the sidecar
				// does not serve (kgo then fails every fetch with "broker
				// is too old").
				start := make(map[int32]kgo.Offset, len(listed))
				for p, o := range listed {
					start[p] = kgo.NewOffset().At(o.Offset)
				}
				return start, nil
			}
			err = errors.New("no partitions listed")
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// dialAny returns nil once one of brokers accepts a TCP connection.
func dialAny(ctx context.Context, brokers []string) error {
	var d net.Dialer
	var errs []error
	for _, b := range brokers {
		c, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return c.Close()
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no broker reachable: %w", errors.Join(errs...))
}

// load is one run in progress: its clients, the goroutines driving them,
// and what they count. drive owns every goroutine it starts and returns
// after they have stopped; close closes the clients.
type load struct {
	cfg       Config
	target    Target
	st        *stats
	producers []*producer
	consumers []*consumer

	interrupted bool
	store       Store
	cpu         CPU
	peerCPU     *CPU
}

func newLoad(cfg Config, t Target, topic string, start map[int32]kgo.Offset) (*load, error) {
	l := &load{cfg: cfg, target: t}
	parts := slices.Sorted(maps.Keys(start))
	// A consumer beyond the partition count would have nothing to read.
	nCons := min(cfg.Consumers, len(parts))
	l.st = newStats(rand.Uint64(), cfg.Producers, nCons)
	for i := range cfg.Producers {
		cl, err := kgo.NewClient(cfg.producerOpts(t.Brokers, topic)...)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("producer client: %w", err)
		}
		l.producers = append(l.producers, newProducer(cl, l.st, l.st.produce[i], cfg, uint64(i)))
	}
	for i := range nCons {
		mine := make(map[int32]kgo.Offset)
		for j := i; j < len(parts); j += nCons {
			mine[parts[j]] = start[parts[j]]
		}
		cl, err := kgo.NewClient(consumerOpts(t.Brokers, map[string]map[int32]kgo.Offset{topic: mine})...)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("consumer client: %w", err)
		}
		l.consumers = append(l.consumers, &consumer{cl: cl, st: l.st, lat: l.st.e2e[i]})
	}
	return l, nil
}

// close closes every client.
func (l *load) close() {
	for _, p := range l.producers {
		p.cl.Close()
	}
	for _, c := range l.consumers {
		c.cl.Close()
	}
}

// interruptFlush bounds the flush after an interrupt: the user wants the
// report now, and records kgo can still fail safely fail at once.
const interruptFlush = 3 * time.Second

// drive runs the warmup, the window and the drain.
func (l *load) drive(ctx context.Context) {
	st := l.st
	var wg sync.WaitGroup

	consCtx, cancelCons := context.WithCancel(ctx)
	defer cancelCons()
	for _, c := range l.consumers {
		wg.Go(func() {
			if sleepCtx(consCtx, l.cfg.ConsumerDelay) {
				c.loop(consCtx)
			}
		})
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	for _, p := range l.producers {
		pwg.Go(func() { p.loop(ctx, stop) })
	}
	progStop := make(chan struct{})
	if l.cfg.Progress != nil {
		wg.Go(func() { l.progress(progStop) })
	}

	var before counters
	var beforeErr error
	if sleepCtx(ctx, l.cfg.Warmup) {
		if l.target.MetricsURL != "" {
			before, beforeErr = scrape(ctx, l.target.MetricsURL)
		}
		cpu0, cpuErr := l.cpuNow()
		peer0, peerErr := processesCPU(l.target.PeerPIDs)
		st.windowStart.Store(st.now())
		if !sleepCtx(ctx, l.cfg.Duration) {
			l.interrupted = true
		}
		st.windowEnd.Store(st.now())
		cpu1, err := l.cpuNow()
		switch {
		case cpuErr != nil:
			l.cpu = CPU{NA: cpuErr.Error()}
		case err != nil:
			l.cpu = CPU{NA: err.Error()}
		default:
			l.cpu = cpuFigures(cpu1-cpu0, st.winAckedBytes.Load())
		}
		if len(l.target.PeerPIDs) > 0 {
			peer1, err := processesCPU(l.target.PeerPIDs)
			c := cpuFigures(peer1-peer0, st.winAckedBytes.Load())
			if err = cmp.Or(peerErr, err); err != nil {
				c = CPU{NA: err.Error()}
			}
			l.peerCPU = &c
		}
	} else {
		l.interrupted = true
	}
	// Drain: stop sending, flush what the clients hold, let the
	// consumers catch up with every acknowledged record.
	close(stop)
	pwg.Wait()
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.Drain)
	defer cancelDrain()
	if l.interrupted {
		drainCtx, cancelDrain = context.WithTimeout(drainCtx, interruptFlush)
		defer cancelDrain()
	}
	var fwg sync.WaitGroup
	for _, p := range l.producers {
		fwg.Go(func() { _ = p.cl.Flush(drainCtx) })
	}
	fwg.Wait()
	if !l.interrupted && len(l.consumers) > 0 {
		l.waitConsumed(ctx, drainCtx)
	}
	cancelCons()
	close(progStop)
	wg.Wait()

	l.store = l.storeFigures(ctx, before, beforeErr)
}

// cpuNow is the CPU time the target's server processes used so far; an
// error when there are none to measure.
func (l *load) cpuNow() (time.Duration, error) {
	if len(l.target.PIDs) == 0 {
		reason := l.target.NoCPU
		if reason == "" {
			reason = "no process ids given"
		}
		return 0, errors.New(reason)
	}
	return processesCPU(l.target.PIDs)
}

// waitConsumed returns when the consumers have read every acknowledged
// record, or drainCtx or ctx is done.
func (l *load) waitConsumed(ctx, drainCtx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for l.st.consumed.Load() < l.st.acked.Load() {
		select {
		case <-ctx.Done():
			return
		case <-drainCtx.Done():
			return
		case <-tick.C:
		}
	}
}

// storeFigures scrapes the target after the drain and derives the store
// figures, or says why there are none.
func (l *load) storeFigures(ctx context.Context, before counters, beforeErr error) Store {
	switch {
	case l.target.MetricsURL == "":
		return Store{NA: l.target.NoMetrics}
	case l.st.windowStart.Load() == math.MaxInt64:
		return Store{NA: "the window never opened"}
	case beforeErr != nil:
		return Store{NA: beforeErr.Error()}
	}
	after, err := scrape(context.WithoutCancel(ctx), l.target.MetricsURL)
	if err != nil {
		return Store{NA: err.Error()}
	}
	return storeDelta(before, after)
}

// fill writes the run's figures into res.
func (l *load) fill(res *Result) {
	st := l.st
	window := st.windowLength()
	res.WindowSeconds = window.Seconds()
	if at := st.windowStart.Load(); at != math.MaxInt64 {
		res.windowOpened = time.Duration(at)
	}
	res.Interrupted = l.interrupted
	res.Produced = throughput(st.winAcked.Load(), st.winAckedBytes.Load(), window)
	res.produceHist = mergeShards(st.produce, pickWindow, false)
	res.ProduceLatency = summarise(res.produceHist)
	if len(l.consumers) > 0 {
		c := throughput(st.winConsumed.Load(), st.winConsumedBytes.Load(), window)
		res.Consumed = &c
		res.e2eHist = mergeShards(st.e2e, pickWindow, false)
		e := summarise(res.e2eHist)
		res.E2ELatency = &e
		res.Unconsumed = max(0, st.acked.Load()-st.consumed.Load())
	}
	res.Errors, res.ErrorCount = st.errs.snapshot()
	res.Unacked = max(0, st.sent.Load()-st.acked.Load()-st.failed.Load())
	res.Foreign = st.foreign.Load()
	res.Store = l.store
	res.CPU = l.cpu
	if l.peerCPU != nil {
		res.PeerCPU, res.Peer = l.peerCPU, l.target.PeerName
	}
	if res.CPU == (CPU{}) {
		res.CPU.NA = "the window never opened"
	}
}

// sleepCtx sleeps for d and reports whether it did so without ctx ending.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
