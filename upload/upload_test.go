package upload_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
	"github.com/diskless-sidecar/sidecar/upload"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var _ upload.Putter = objstore.Store(nil)

// recorder stands in for time: it records the waits Upload asks for and
// returns at once, or runs onSleep if set.
type recorder struct {
	mu      sync.Mutex
	waits   []time.Duration
	onSleep func(ctx context.Context) error
}

func (r *recorder) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	if r.onSleep != nil {
		return r.onSleep(ctx)
	}
	return ctx.Err()
}

func identity(d time.Duration) time.Duration { return d }

var quiet = slog.New(slog.DiscardHandler)

// newUploader returns an uploader over a fresh Memory store whose first
// `fail` puts fail with errors "put 1", "put 2", ...
func newUploader(t *testing.T, cfg upload.Config, fail int) (*upload.Uploader, *objstoretest.Memory, *recorder) {
	t.Helper()
	m := objstoretest.NewMemory()
	var n int
	var mu sync.Mutex
	m.SetFault(func(_ context.Context, op objstoretest.Op, _ string) error {
		mu.Lock()
		defer mu.Unlock()
		if op != objstoretest.OpPut {
			return nil
		}
		n++
		if n <= fail {
			return fmt.Errorf("put %d: %w", n, errTransient)
		}
		return nil
	})
	rec := &recorder{}
	u, err := upload.New(cfg, m, upload.WithSleep(rec.sleep), upload.WithJitter(identity), upload.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	return u, m, rec
}

var errTransient = errors.New("transient")

func readObject(t *testing.T, m *objstoretest.Memory, key string, size int) []byte {
	t.Helper()
	p := make([]byte, size+1)
	n, got, err := m.ReadRange(t.Context(), key, 0, p)
	if err != nil || int64(n) != got {
		t.Fatalf("ReadRange(%s) = %d, size %d, %v", key, n, got, err)
	}
	return p[:n]
}

func checkStats(t *testing.T, s *upload.Stats, attempts, retries, uploads, failures, bytes int64) {
	t.Helper()
	got := [5]int64{s.Attempts.Load(), s.Retries.Load(), s.Uploads.Load(), s.Failures.Load(), s.BytesUploaded.Load()}
	want := [5]int64{attempts, retries, uploads, failures, bytes}
	if got != want {
		t.Errorf("stats (attempts, retries, uploads, failures, bytes) = %v, want %v", got, want)
	}
}

func TestUploadSucceedsAfterFailures(t *testing.T) {
	cfg := upload.Config{MaxAttempts: 8, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	ms := time.Millisecond
	tests := []struct {
		name      string
		failures  int
		wantWaits []time.Duration
	}{
		{"first try", 0, nil},
		{"after one failure", 1, []time.Duration{100 * ms}},
		{"after three failures", 3, []time.Duration{100 * ms, 200 * ms, 400 * ms}},
		{"on the last attempt", 7, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms, 1000 * ms}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, m, rec := newUploader(t, cfg, tt.failures)
			data := []byte("the object bytes")
			key, err := u.Upload(t.Context(), data)
			if err != nil {
				t.Fatalf("Upload: %v", err)
			}
			if got := readObject(t, m, key, len(data)); string(got) != string(data) {
				t.Fatalf("stored %q, want %q", got, data)
			}
			if fmt.Sprint(rec.waits) != fmt.Sprint(tt.wantWaits) {
				t.Errorf("waits = %v, want %v", rec.waits, tt.wantWaits)
			}
			n := int64(tt.failures)
			checkStats(t, u.Stats(), n+1, n, 1, 0, int64(len(data)))
		})
	}
}

func TestUploadGivesUpAfterMaxAttempts(t *testing.T) {
	u, m, rec := newUploader(t, upload.Config{MaxAttempts: 3}, 100)
	key, err := u.Upload(t.Context(), []byte("x"))
	if !errors.Is(err, errTransient) || !strings.Contains(err.Error(), "put 3") {
		t.Fatalf("Upload = %v; want the third (last) attempt's error", err)
	}
	if !strings.HasPrefix(key, "wal/") {
		t.Errorf("key %q returned with the error is not the attempted key", key)
	}
	if got := m.Count(objstoretest.OpPut); got != 3 {
		t.Errorf("%d puts, want 3", got)
	}
	if len(rec.waits) != 2 {
		t.Errorf("%d waits, want 2 (none after the last attempt)", len(rec.waits))
	}
	checkStats(t, u.Stats(), 3, 2, 0, 1, 0)
}

func TestUploadEveryAttemptSendsSameKeyAndBytes(t *testing.T) {
	type call struct {
		key  string
		data []byte
	}
	var calls []call
	put := putterFunc(func(_ context.Context, key string, data []byte) error {
		calls = append(calls, call{key, data})
		if len(calls) < 4 {
			return errTransient
		}
		return nil
	})
	u, err := upload.New(upload.Config{}, put, upload.WithSleep(func(context.Context, time.Duration) error { return nil }), upload.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("0123456789")
	key, err := u.Upload(t.Context(), data)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		if c.key != key || &c.data[0] != &data[0] || len(c.data) != len(data) {
			t.Errorf("attempt %d: key %q, %d bytes at %p; want %q, %d bytes at %p (the whole object again)",
				i+1, c.key, len(c.data), &c.data[0], key, len(data), &data[0])
		}
	}
}

type putterFunc func(ctx context.Context, key string, data []byte) error

func (f putterFunc) Put(ctx context.Context, key string, data []byte) error { return f(ctx, key, data) }

func (f putterFunc) Delete(context.Context, string) error { return nil }

func TestUploadStopsWhenContextDone(t *testing.T) {
	t.Run("before the first attempt", func(t *testing.T) {
		u, m, _ := newUploader(t, upload.Config{}, 0)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := u.Upload(ctx, []byte("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Upload = %v, want context.Canceled", err)
		}
		if got := m.Count(objstoretest.OpPut); got != 0 {
			t.Errorf("%d puts, want 0", got)
		}
		checkStats(t, u.Stats(), 0, 0, 0, 1, 0)
	})
	t.Run("during the backoff", func(t *testing.T) {
		u, m, rec := newUploader(t, upload.Config{}, 100)
		ctx, cancel := context.WithCancel(t.Context())
		rec.onSleep = func(ctx context.Context) error {
			if len(rec.waits) == 2 {
				cancel()
			}
			return ctx.Err()
		}
		_, err := u.Upload(ctx, []byte("x"))
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errTransient) {
			t.Fatalf("Upload = %v; want context.Canceled and the last attempt's error", err)
		}
		if got := m.Count(objstoretest.OpPut); got != 2 {
			t.Errorf("%d puts, want 2", got)
		}
	})
	t.Run("during an attempt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		put := putterFunc(func(actx context.Context, _ string, _ []byte) error {
			cancel()
			return errors.New("connection reset") // not a ctx error
		})
		u, err := upload.New(upload.Config{}, put, upload.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		_, err = u.Upload(ctx, []byte("x"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Upload = %v; want context.Canceled", err)
		}
		checkStats(t, u.Stats(), 1, 0, 0, 1, 0)
	})
}

// TestUploadAttemptTimeout runs on synctest's fake clock, with the real
// sleep and jitter: an attempt that hangs is cut off after AttemptTimeout
// and retried, within the backoff bounds.
func TestUploadAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := objstoretest.NewMemory()
		var hung int
		m.SetFault(func(ctx context.Context, _ objstoretest.Op, _ string) error {
			if hung < 2 {
				hung++
				<-ctx.Done() // a hung connection
				return ctx.Err()
			}
			return nil
		})
		cfg := upload.Config{AttemptTimeout: 5 * time.Second, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
			HedgeDisabled: true}
		u, err := upload.New(cfg, m, upload.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := u.Upload(t.Context(), []byte("x")); err != nil {
			t.Fatalf("Upload: %v", err)
		}
		elapsed := time.Since(start)
		// Two timeouts plus two waits of at most 100 ms and 200 ms.
		if lo, hi := 10*time.Second, 10*time.Second+300*time.Millisecond; elapsed < lo || elapsed > hi {
			t.Errorf("took %v on the fake clock, want within [%v, %v]", elapsed, lo, hi)
		}
		checkStats(t, u.Stats(), 3, 2, 1, 0, 1)
	})
}

func TestUploadKeys(t *testing.T) {
	tests := []struct {
		prefix string
		re     string
	}{
		{"", `^wal/[0-9a-f]{32}$`},
		{"cluster-1/wal", `^cluster-1/wal/[0-9a-f]{32}$`},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			u, m, _ := newUploader(t, upload.Config{Prefix: tt.prefix}, 0)
			re := regexp.MustCompile(tt.re)
			const n = 1000
			seen := make(map[string]bool, n)
			for range n {
				key, err := u.Upload(t.Context(), nil)
				if err != nil {
					t.Fatal(err)
				}
				if !re.MatchString(key) {
					t.Fatalf("key %q does not match %s", key, tt.re)
				}
				if seen[key] {
					t.Fatalf("key %q reused", key)
				}
				seen[key] = true
			}
			var listed int
			if err := m.List(t.Context(), "", func(objstore.ObjectInfo) error { listed++; return nil }); err != nil || listed != n {
				t.Fatalf("store holds %d objects (%v), want %d", listed, err, n)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     upload.Config
		wantKey string // "" means valid
	}{
		{"zero is all defaults", upload.Config{}, ""},
		{"explicit", upload.Config{Prefix: "a/b", MaxAttempts: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, AttemptTimeout: time.Second}, ""},
		{"initial above default max raises max", upload.Config{InitialBackoff: 5 * time.Second}, ""},
		{"prefix leading slash", upload.Config{Prefix: "/wal"}, "diskless.object.key.prefix"},
		{"prefix trailing slash", upload.Config{Prefix: "wal/"}, "diskless.object.key.prefix"},
		{"prefix dotdot", upload.Config{Prefix: "../wal"}, "diskless.object.key.prefix"},
		{"negative attempts", upload.Config{MaxAttempts: -1}, "diskless.upload.max.attempts"},
		{"negative backoff", upload.Config{InitialBackoff: -time.Second}, "diskless.upload.retry.backoff.ms"},
		{"max below initial", upload.Config{InitialBackoff: time.Second, MaxBackoff: time.Millisecond}, "diskless.upload.retry.backoff.max.ms"},
		{"negative timeout", upload.Config{AttemptTimeout: -1}, "diskless.upload.attempt.timeout.ms"},
		{"hedge cap alone below the default floor", upload.Config{HedgeMaxDelay: 20 * time.Millisecond}, ""},
		{"hedge percentile low", upload.Config{HedgePercentile: 49}, "diskless.upload.hedge.percentile"},
		{"hedge percentile high", upload.Config{HedgePercentile: 100}, "diskless.upload.hedge.percentile"},
		{"hedge floor negative", upload.Config{HedgeMinDelay: -time.Millisecond}, "diskless.upload.hedge.min.delay.ms"},
		{"hedge floor under 1 ms", upload.Config{HedgeMinDelay: time.Microsecond}, "diskless.upload.hedge.min.delay.ms"},
		{"hedge cap below floor", upload.Config{HedgeMinDelay: time.Second, HedgeMaxDelay: 500 * time.Millisecond}, "diskless.upload.hedge.max.delay.ms"},
		{"hedge budget negative", upload.Config{HedgeMaxPercent: -1}, "diskless.upload.hedge.max.percent"},
		{"hedge budget over 100", upload.Config{HedgeMaxPercent: 101}, "diskless.upload.hedge.max.percent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tt.wantKey)
			}
			if _, err := upload.New(tt.cfg, objstoretest.NewMemory()); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

// BenchmarkUpload measures the uploader's own cost per object (key, timer,
// counters) over a store that does nothing; it is independent of the
// object's size, so it reports no bytes/s.
func BenchmarkUpload(b *testing.B) {
	u, err := upload.New(upload.Config{}, putterFunc(func(context.Context, string, []byte) error { return nil }))
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 8<<20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.Upload(b.Context(), data); err != nil {
			b.Fatal(err)
		}
	}
}
