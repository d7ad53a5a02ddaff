package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxCatchUp bounds how far a paced producer that fell behind (its client's
// buffer was full) may burst to catch up with its schedule.
const maxCatchUp = time.Second

// producer drives one kgo client: its loop calls Produce as fast as the
// client accepts records or at a fixed pace, and its promise records the
// outcome. The loop is the only caller of Produce; kgo calls the promise
// serially on its own goroutine.
type producer struct {
	cl       *kgo.Client
	st       *stats
	lat      *latencyShard
	size     int           // record value size, bytes
	fill     bool          // write random hex after the header (compressing codecs)
	interval time.Duration // time between records at a fixed pace; 0: unpaced
	rng      *rand.PCG     // filler source; used by the loop only

	// pool recycles records once their promise has run: kgo no longer
	// holds a record after that, and reusing them keeps a fast producer
	// from allocating a record and a value per send.
	pool sync.Pool
}

func newProducer(cl *kgo.Client, st *stats, lat *latencyShard, cfg Config, seed uint64) *producer {
	p := &producer{
		cl:   cl,
		st:   st,
		lat:  lat,
		size: cfg.RecordSize,
		fill: cfg.Codec != "none",
		rng:  rand.NewPCG(seed, st.runID),
	}
	if cfg.Rate > 0 {
		p.interval = time.Duration(float64(time.Second) * float64(cfg.Producers) / cfg.Rate)
	}
	p.pool.New = func() any { return &kgo.Record{Value: make([]byte, p.size)} }
	return p
}

// loop produces until stop is closed or ctx is done. Records already
// buffered are left to the client: the caller flushes it. ctx is handed to
// Produce, so cancelling it also fails buffered records (where kgo can do
// so safely); closing stop does not.
func (p *producer) loop(ctx context.Context, stop <-chan struct{}) {
	var timer *time.Timer
	if p.interval > 0 {
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	next := time.Now()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		if p.interval > 0 {
			now := time.Now()
			if next.Before(now.Add(-maxCatchUp)) {
				next = now
			}
			if wait := next.Sub(now); wait > 0 {
				timer.Reset(wait)
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
			next = next.Add(p.interval)
		}
		r := p.pool.Get().(*kgo.Record)
		if p.fill {
			fillHex(r.Value[headerSize:], p.rng)
		}
		putHeader(r.Value, p.st.now(), p.st.runID)
		p.st.sent.Add(1)
		// Produce blocks while the client holds MaxBufferedRecords; that
		// wait counts in the record's produce latency, as it would for an
		// application.
		p.cl.Produce(ctx, r, p.promise)
	}
}

// promise records one record's outcome: its produce latency (promise time
// minus Produce call time, the send time in its header) and whether it
// counts in the window, then returns the record to the pool.
func (p *producer) promise(r *kgo.Record, err error) {
	now := p.st.now()
	sent, _ := readHeader(r.Value, p.st.runID)
	if err != nil {
		p.st.failed.Add(1)
		p.st.countError("produce", err)
	} else {
		n := int64(len(r.Value))
		p.st.acked.Add(1)
		p.st.ackedBytes.Add(n)
		if p.st.inWindow(now) {
			p.st.winAcked.Add(1)
			p.st.winAckedBytes.Add(n)
		}
		p.lat.record(time.Duration(now-sent), p.st.inWindow(sent))
	}
	*r = kgo.Record{Value: r.Value[:p.size]}
	p.pool.Put(r)
}
