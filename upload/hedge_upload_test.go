package upload_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
	"github.com/diskless-sidecar/sidecar/upload"
)

// step is how one Put of a scriptStore behaves, on synctest's clock: it
// answers after took (err, or nil having stored the object), or ctx's
// error if ctx ends first; with storedAtOnce the object is stored when the
// Put starts, whatever the answer (a store that acted and whose answer is
// slow or lost).
type step struct {
	took         time.Duration
	err          error
	storedAtOnce bool
}

// scriptStore is a Memory whose i-th Put behaves as script[i] (the last
// step repeats).
type scriptStore struct {
	*objstoretest.Memory
	script []step

	mu   sync.Mutex
	keys []string // the keys of the Puts, in call order
}

func newScriptStore(script ...step) *scriptStore {
	return &scriptStore{Memory: objstoretest.NewMemory(), script: script}
}

func (s *scriptStore) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	st := s.script[min(len(s.keys), len(s.script)-1)]
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	if st.storedAtOnce {
		if err := s.Memory.Put(context.Background(), key, data); err != nil {
			return err
		}
	}
	t := time.NewTimer(st.took)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	if st.err != nil || st.storedAtOnce {
		return st.err
	}
	return s.Memory.Put(ctx, key, data)
}

func (s *scriptStore) putKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys)
}

// stored lists the store's keys.
func (s *scriptStore) stored(t *testing.T) []string {
	t.Helper()
	var keys []string
	if err := s.List(context.Background(), "", func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// hedgeStats are the hedging counters: hedges, wins, deletes, delete
// failures.
func hedgeStats(s *upload.Stats) [4]int64 {
	return [4]int64{s.Hedges.Load(), s.HedgeWins.Load(), s.HedgeDeletes.Load(), s.HedgeDeleteFailures.Load()}
}

var errSlowDown = errors.New("503 SlowDown")

// TestUploadHedge runs scripted stores on synctest's clock: which attempt
// wins, when Upload returns, which keys are left in the store once Close
// has waited for the losers, and the counters.
func TestUploadHedge(t *testing.T) {
	const hour = time.Hour
	ms := time.Millisecond
	tests := []struct {
		name   string
		cfg    upload.Config
		warmup []step // uploads made first, to fill the window of durations
		script []step
		// what the scripted upload shows
		took        time.Duration // Upload's time on the fake clock
		winner      int           // index of the Put whose key Upload returns
		puts        int
		storedPuts  []int    // the Puts whose keys the store holds after Close
		stats       [4]int64 // hedgeStats, over the scripted upload only
		deletes     int64    // Deletes sent to the store
		attemptsAll int64    // Stats.Attempts over the scripted upload
	}{
		{
			// The first PUT's answer is held (the object is stored); with no
			// durations known the hedge starts at the cap, 1 s, and wins; the
			// first attempt is cancelled and its object deleted.
			name:   "a stalled first attempt: the hedge wins",
			script: []step{{took: hour, storedAtOnce: true}, {took: 100 * ms}},
			took:   1100 * ms, winner: 1, puts: 2, storedPuts: []int{1},
			stats: [4]int64{1, 1, 1, 0}, deletes: 1, attemptsAll: 2,
		},
		{
			// The hedge's answer is held; the first attempt answers at 1.5 s
			// and wins; the hedge's stored object is deleted.
			name:   "the first attempt wins: the hedge's object deleted",
			script: []step{{took: 1500 * ms}, {took: hour, storedAtOnce: true}},
			took:   1500 * ms, winner: 0, puts: 2, storedPuts: []int{0},
			stats: [4]int64{1, 0, 1, 0}, deletes: 1, attemptsAll: 2,
		},
		{
			// 16 uploads of 200 ms set the delay to their p90, 200 ms; a slow
			// one is hedged then, not at the cap.
			name:   "the delay follows recent durations",
			warmup: slices.Repeat([]step{{took: 200 * ms}}, 16),
			script: []step{{took: 10 * time.Second}, {took: 200 * ms}},
			took:   400 * ms, winner: 1, puts: 2, storedPuts: []int{1},
			stats: [4]int64{1, 1, 1, 0}, deletes: 1, attemptsAll: 2,
		},
		{
			// Both fail (the first at 1.5 s, the hedge at 2 s): the object is
			// tried again under the first key after the backoff, unhedged
			// (one hedge per object); the hedge's key is deleted.
			name:   "both fail: a retry under the first key",
			script: []step{{took: 1500 * ms, err: errSlowDown}, {took: time.Second, err: errSlowDown}, {took: 50 * ms}},
			took:   2000*ms + 100*ms + 50*ms, winner: 0, puts: 3, storedPuts: []int{0},
			stats: [4]int64{1, 0, 1, 0}, deletes: 1, attemptsAll: 3,
		},
		{
			// The first attempt fails at 300 ms, before the hedge delay: it is
			// retried as before, and the retry is hedged when slow.
			name:   "a fast failure is retried, the retry hedged",
			script: []step{{took: 300 * ms, err: errSlowDown}, {took: hour}, {took: 100 * ms}},
			took:   300*ms + 100*ms + time.Second + 100*ms, winner: 2, puts: 3, storedPuts: []int{2},
			stats: [4]int64{1, 1, 1, 0}, deletes: 1, attemptsAll: 3,
		},
		{
			name:   "hedging off",
			cfg:    upload.Config{HedgeDisabled: true},
			script: []step{{took: 5 * time.Second}, {took: 100 * ms}},
			took:   5 * time.Second, winner: 0, puts: 1, storedPuts: []int{0},
			stats: [4]int64{0, 0, 0, 0}, deletes: 0, attemptsAll: 1,
		},
		{
			name:   "a floor above the cap's default",
			cfg:    upload.Config{HedgeMinDelay: 3 * time.Second, HedgeMaxDelay: 3 * time.Second},
			script: []step{{took: hour}, {took: 100 * ms}},
			took:   3100 * ms, winner: 1, puts: 2, storedPuts: []int{1},
			stats: [4]int64{1, 1, 1, 0}, deletes: 1, attemptsAll: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScriptStore(append(slices.Clone(tt.warmup), tt.script...)...)
				u, err := upload.New(tt.cfg, s, upload.WithLogger(quiet), upload.WithJitter(identity))
				if err != nil {
					t.Fatal(err)
				}
				for range tt.warmup {
					if _, err := u.Upload(t.Context(), []byte("warm")); err != nil {
						t.Fatal(err)
					}
				}
				u.Close()
				before := s.stored(t)
				h0, a0, d0 := hedgeStats(u.Stats()), u.Stats().Attempts.Load(), s.Count(objstoretest.OpDelete)

				data := []byte("the object")
				start := time.Now()
				key, err := u.Upload(t.Context(), data)
				took := time.Since(start)
				if err != nil {
					t.Fatalf("Upload: %v", err)
				}
				u.Close() // the losers' clean-up
				keys := s.putKeys()[len(tt.warmup):]
				if len(keys) != tt.puts {
					t.Fatalf("%d puts (%v), want %d", len(keys), keys, tt.puts)
				}
				if key != keys[tt.winner] {
					t.Errorf("Upload returned %s, want put %d's key %s (puts %v)", key, tt.winner, keys[tt.winner], keys)
				}
				if took != tt.took {
					t.Errorf("Upload took %v on the fake clock, want %v", took, tt.took)
				}
				var want []string
				for _, i := range tt.storedPuts {
					want = append(want, keys[i])
				}
				got := slices.DeleteFunc(s.stored(t), func(k string) bool { return slices.Contains(before, k) })
				if !slices.Equal(got, want) {
					t.Errorf("store holds %v after Close, want %v (puts %v)", got, want, keys)
				}
				if string(readObject(t, s.Memory, key, len(data))) != string(data) {
					t.Errorf("the returned key does not hold the object")
				}
				h := hedgeStats(u.Stats())
				for i := range h {
					h[i] -= h0[i]
				}
				if h != tt.stats {
					t.Errorf("hedges, wins, deletes, delete failures = %v, want %v", h, tt.stats)
				}
				if d := s.Count(objstoretest.OpDelete) - d0; d != tt.deletes {
					t.Errorf("%d deletes, want %d", d, tt.deletes)
				}
				if a := u.Stats().Attempts.Load() - a0; a != tt.attemptsAll {
					t.Errorf("%d attempts, want %d", a, tt.attemptsAll)
				}
			})
		})
	}
}

// TestUploadHedgeDeleteFails: a loser whose Delete fails is counted and
// left to the orphan scan; Upload's answer does not wait for it.
func TestUploadHedgeDeleteFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScriptStore(step{took: time.Hour, storedAtOnce: true}, step{took: 100 * time.Millisecond})
		s.SetFault(func(_ context.Context, op objstoretest.Op, _ string) error {
			if op == objstoretest.OpDelete {
				return errSlowDown
			}
			return nil
		})
		u, err := upload.New(upload.Config{}, s, upload.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		key, err := u.Upload(t.Context(), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		u.Close()
		if got := hedgeStats(u.Stats()); got != [4]int64{1, 1, 0, 1} {
			t.Errorf("hedges, wins, deletes, delete failures = %v, want [1 1 0 1]", got)
		}
		if got := s.stored(t); len(got) != 2 || !slices.Contains(got, key) {
			t.Errorf("store holds %v, want the winner %s and the loser", got, key)
		}
	})
}

// TestUploadHedgeBudget: uploads that are all slow are hedged at most
// HedgeMaxPercent per 100, plus the burst of 3.
func TestUploadHedgeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A Put alone (an upload's first attempt) takes 2 s, a Put beside
		// another (its hedge) 100 ms: without a budget every upload would
		// be hedged.
		m := objstoretest.NewMemory()
		var inflight sync.Mutex
		var n int
		store := putterFunc(func(ctx context.Context, key string, data []byte) error {
			inflight.Lock()
			n++
			took := 2 * time.Second
			if n > 1 {
				took = 100 * time.Millisecond
			}
			inflight.Unlock()
			defer func() { inflight.Lock(); n--; inflight.Unlock() }()
			select {
			case <-time.After(took):
				return m.Put(ctx, key, data)
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		u, err := upload.New(upload.Config{HedgeMaxPercent: 10}, store, upload.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		const uploads = 200
		for range uploads {
			if _, err := u.Upload(t.Context(), []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		u.Close()
		hedges, wins := u.Stats().Hedges.Load(), u.Stats().HedgeWins.Load()
		if lo, hi := int64(uploads*10/100), int64(3+uploads*10/100); hedges < lo || hedges > hi || wins != hedges {
			t.Fatalf("%d hedges (%d won) over %d slow uploads, want within [%d, %d], all won", hedges, wins, uploads, lo, hi)
		}
	})
}
