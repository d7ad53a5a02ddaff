package fetch

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// pending is a Fetch running on its own goroutine.
type pending struct {
	start time.Time
	done  chan struct{}
	resp  *kmsg.FetchResponse
	took  time.Duration
}

func (e *env) goFetch(ctx context.Context, req *kmsg.FetchRequest) *pending {
	p := &pending{start: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.resp = e.h.Fetch(ctx, req)
		p.took = time.Since(p.start)
	}()
	return p
}

func (p *pending) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// TestFetchLongPoll runs in a synctest bubble: time is fake and advances
// only when every goroutine of the test is blocked, so waits are exact and
// cost no real time.
func TestFetchLongPoll(t *testing.T) {
	one := func(tb testing.TB) []byte { return makeBatch(tb, batch.CodecNone, 100, 1, 2) }
	size := int32(len(one(t)))

	for _, tc := range []struct {
		name     string
		cfg      Config
		minBytes int32
		maxWait  int32 // ms
		// during runs while the fetch waits; cancel cancels its ctx.
		during   func(e *env, _ *pending, cancel context.CancelFunc)
		deaf     bool // commits are not signalled
		took     time.Duration
		batches  int
		hwm      int64
		firstErr int16
	}{
		{
			name: "wakes on a commit", minBytes: 1, maxWait: 10_000,
			during:  func(e *env, _ *pending, _ context.CancelFunc) { e.commit("t", 0, commitOpts{}, one(e.tb)) },
			took:    0,
			batches: 1, hwm: 2,
		},
		{
			name: "waits for min_bytes across commits", minBytes: size + 1, maxWait: 10_000,
			during: func(e *env, f *pending, _ context.CancelFunc) {
				e.commit("t", 0, commitOpts{}, one(e.tb))
				synctest.Wait()
				if f.finished() {
					e.tb.Error("answered with less than min_bytes")
				}
				time.Sleep(time.Second)
				e.commit("t", 0, commitOpts{}, one(e.tb))
			},
			took:    time.Second,
			batches: 2, hwm: 4,
		},
		{
			name: "a commit elsewhere does not answer; max_wait does", minBytes: 1, maxWait: 500,
			during:  func(e *env, _ *pending, _ context.CancelFunc) { e.commit("t", 1, commitOpts{}, one(e.tb)) },
			took:    500 * time.Millisecond,
			batches: 0, hwm: 0,
		},
		{
			name: "max_wait capped by Config.MaxWait", cfg: Config{MaxWait: 2 * time.Second},
			minBytes: 1, maxWait: 60_000,
			took: 2 * time.Second,
		},
		{
			name: "answers what is there at max_wait", minBytes: 10 * size, maxWait: 3000,
			during:  func(e *env, _ *pending, _ context.CancelFunc) { e.commit("t", 0, commitOpts{}, one(e.tb)) },
			took:    3 * time.Second,
			batches: 1, hwm: 2,
		},
		{
			name: "looks a last time at max_wait", minBytes: 1, maxWait: 3000, deaf: true,
			during: func(e *env, _ *pending, _ context.CancelFunc) {
				e.commit("t", 0, commitOpts{}, one(e.tb)) // not signalled
			},
			took:    3 * time.Second,
			batches: 1, hwm: 2,
		},
		{
			name: "ctx cancelled: answers at once", minBytes: 1, maxWait: 10_000,
			during: func(e *env, _ *pending, cancel context.CancelFunc) {
				time.Sleep(time.Second)
				cancel()
			},
			took: time.Second,
		},
		{
			name: "max_wait 0 answers at once", minBytes: 1, maxWait: 0,
			took: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, tc.cfg)
				e.coord.createTopic("t", 2)
				e.coord.mu.deaf = tc.deaf
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				req := e.fetchReq(16, 0, fp{topic: "t"})
				req.MinBytes, req.MaxWaitMillis = tc.minBytes, tc.maxWait
				f := e.goFetch(ctx, req)
				synctest.Wait()
				if tc.during != nil {
					if f.finished() {
						t.Fatal("answered before anything happened")
					}
					tc.during(e, f, cancel)
				}
				<-f.done
				if f.took != tc.took {
					t.Errorf("answered after %v, want %v", f.took, tc.took)
				}
				p := flat(f.resp)[0]
				if p.ErrorCode != 0 || p.HighWatermark != tc.hwm || len(decodeBatches(t, p.RecordBatches)) != tc.batches {
					t.Errorf("error %d, hwm %d, %d batches; want 0, %d, %d",
						p.ErrorCode, p.HighWatermark, len(decodeBatches(t, p.RecordBatches)), tc.hwm, tc.batches)
				}
			})
		})
	}
}

// TestFetchLongPollErrorAnswersAtOnce: a partition with an error answers
// the fetch without waiting, as Kafka does.
func TestFetchLongPollErrorAnswersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, Config{})
		e.coord.createTopic("t", 2)
		req := e.fetchReq(16, 0, fp{topic: "t", partition: 0}, fp{topic: "t", partition: 1, offset: 5})
		req.MinBytes, req.MaxWaitMillis = 1, 10_000
		start := time.Now()
		resp := e.h.Fetch(t.Context(), req)
		if took := time.Since(start); took != 0 {
			t.Errorf("answered after %v", took)
		}
		if ps := flat(resp); ps[0].ErrorCode != 0 || ps[1].ErrorCode == 0 {
			t.Errorf("errors %d %d", ps[0].ErrorCode, ps[1].ErrorCode)
		}
	})
}
