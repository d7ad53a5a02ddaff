package objstore_test

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// counts is a sparse view of S3Stats.Requests: "operation/outcome" → n.
type counts map[string]int64

func statsOf(st *objstore.S3Stats) counts {
	c := counts{}
	for op := range objstore.NumS3Ops {
		for out := range objstore.NumS3Outcomes {
			if n := st.Requests[op][out].Load(); n != 0 {
				c[op.String()+"/"+out.String()] = n
			}
		}
	}
	return c
}

// attemptLog collects what S3Config.OnAttempt receives.
type attemptLog struct {
	mu       sync.Mutex
	counts   counts
	untimed  int // attempts without a positive duration
	attempts int
}

func (l *attemptLog) record(a objstore.S3Attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[a.Op.String()+"/"+a.Outcome.String()]++
	l.attempts++
	if a.Duration <= 0 {
		l.untimed++
	}
}

// TestS3RequestMetrics drives the store through versitygw and the fault
// proxy and pins S3Stats exactly: every HTTP attempt counted once, by
// operation and outcome, SDK retries and ReadAt's own retries included;
// and OnAttempt receives the same attempts, each timed.
func TestS3RequestMetrics(t *testing.T) {
	const part = objstore.MinS3PartSize
	small := randomBytes(1000)
	large := randomBytes(3*part + 7) // 4 parts
	e := newS3Env(t)
	// The objects read below, put by another store, so that each case's
	// store starts at zero and with no connection open: net/http resends
	// a GET by itself, unseen by the SDK, when a reused connection breaks
	// before the answer.
	const obj = "metrics/obj"
	if err := e.store(t, objstore.S3Config{}).Put(t.Context(), obj, large); err != nil {
		t.Fatal(err)
	}
	put := func(data []byte) func(*testing.T, *objstore.S3) error {
		return func(t *testing.T, s *objstore.S3) error { return s.Put(t.Context(), "metrics/"+t.Name(), data) }
	}
	read := func(t *testing.T, s *objstore.S3) error {
		p := make([]byte, 600_000)
		_, err := s.ReadAt(t.Context(), obj, p, 300_000)
		return err
	}
	tests := []struct {
		name    string
		cfg     objstore.S3Config
		rules   []*s3fault.Rule
		run     func(*testing.T, *objstore.S3) error
		wantErr bool
		want    counts // every count that is not zero
	}{
		{name: "SlowDown on PutObject 3 times", cfg: objstore.S3Config{MaxAttempts: 4},
			rules: []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 3, Fault: s3fault.SlowDown()}},
			run:   put(small),
			want:  counts{"PutObject/throttled": 3, "PutObject/ok": 1}},
		{name: "multipart upload", run: put(large),
			want: counts{"CreateMultipartUpload/ok": 1, "UploadPart/ok": 4, "CompleteMultipartUpload/ok": 1}},
		{name: "a part fails with 500 once",
			rules: []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 2, Times: 1, Fault: s3fault.InternalError()}},
			run:   put(large),
			want:  counts{"CreateMultipartUpload/ok": 1, "UploadPart/ok": 4, "UploadPart/server_error": 1, "CompleteMultipartUpload/ok": 1}},
		{name: "a part always fails: aborted", cfg: objstore.S3Config{Concurrency: 1},
			rules:   []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 3, Fault: s3fault.InternalError()}},
			run:     put(large),
			wantErr: true,
			want:    counts{"CreateMultipartUpload/ok": 1, "UploadPart/ok": 2, "UploadPart/server_error": 3, "AbortMultipartUpload/ok": 1}},
		{name: "access denied",
			rules:   []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.Error(403, "AccessDenied")}},
			run:     put(small),
			wantErr: true,
			want:    counts{"PutObject/client_error": 1}},
		{name: "no answer within the request timeout", cfg: objstore.S3Config{RequestTimeout: time.Second},
			rules: []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.Stall()}},
			run:   put(small),
			want:  counts{"PutObject/timeout": 1, "PutObject/ok": 1}},
		{name: "connection reset on GET",
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.Reset()}},
			run:   read,
			want:  counts{"GetObject/network": 1, "GetObject/ok": 1}},
		{name: "GET body cut",
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.TruncateBody(100_000)}},
			run:   read,
			want:  counts{"GetObject/network": 1, "GetObject/ok": 1}},
		{name: "a well-formed answer shorter than its range", // ReadAt rejects it and asks again
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.ShortBody(100_000)}},
			run:   read,
			want:  counts{"GetObject/network": 1, "GetObject/ok": 1}},
		{name: "a missing bucket is a client error", // a HEAD's 404 carries no NoSuchBucket code
			rules:   []*s3fault.Rule{{Kind: s3fault.Other, Fault: s3fault.Error(404, "NoSuchBucket")}},
			run:     func(t *testing.T, s *objstore.S3) error { return s.Check(t.Context()) },
			wantErr: true,
			want:    counts{"HeadBucket/client_error": 1}},
		{name: "GET body slower than the timeout", cfg: objstore.S3Config{RequestTimeout: time.Second},
			rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.SlowBody(256 << 10)}},
			run:   read,
			want:  counts{"GetObject/timeout": 1, "GetObject/ok": 1}},
		{name: "SlowDown on every GET", rules: []*s3fault.Rule{{Kind: s3fault.GetObject, Fault: s3fault.SlowDown()}},
			run:     read,
			wantErr: true,
			want:    counts{"GetObject/throttled": 3}},
		{name: "missing key and range past the end are answers",
			run: func(t *testing.T, s *objstore.S3) error {
				p := make([]byte, 10)
				if _, err := s.ReadAt(t.Context(), "metrics/missing", p, 0); err == nil {
					return fmt.Errorf("read of a missing key succeeded")
				}
				if _, err := s.ReadAt(t.Context(), "metrics/missing", nil, 0); err == nil {
					return fmt.Errorf("empty read of a missing key succeeded")
				}
				if n, err := s.ReadAt(t.Context(), obj, p, int64(len(large))); n != 0 || err == nil {
					return fmt.Errorf("read past the end = %d, %v", n, err)
				}
				return nil
			},
			want: counts{"GetObject/ok": 2, "HeadObject/ok": 1}},
		{name: "the other operations",
			run: func(t *testing.T, s *objstore.S3) error {
				if err := s.Check(t.Context()); err != nil {
					return err
				}
				if err := s.List(t.Context(), "metrics/none/", func(objstore.ObjectInfo) error { return nil }); err != nil {
					return err
				}
				if err := s.Delete(t.Context(), "metrics/none/x"); err != nil {
					return err
				}
				_, err := s.AbortStaleUploads(t.Context(), "metrics/none/", time.Hour)
				return err
			},
			want: counts{"HeadBucket/ok": 1, "ListObjectsV2/ok": 1, "DeleteObject/ok": 1, "ListMultipartUploads/ok": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &attemptLog{counts: counts{}}
			cfg := tt.cfg
			cfg.PartSize = part
			cfg.OnAttempt = log.record
			s := e.store(t, quick(cfg))
			e.proxy.Clear()
			for _, r := range tt.rules {
				e.proxy.Add(r)
			}
			err := tt.run(t, s)
			e.proxy.Clear()
			if (err != nil) != tt.wantErr {
				t.Fatalf("error: %v, want one: %v", err, tt.wantErr)
			}
			if got := statsOf(s.Stats()); !maps.Equal(got, tt.want) {
				t.Errorf("S3Stats = %v, want %v", got, tt.want)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if !maps.Equal(log.counts, tt.want) || log.untimed != 0 {
				t.Errorf("OnAttempt saw %v (%d of %d without a duration), want %v", log.counts, log.untimed, log.attempts, tt.want)
			}
		})
	}
}
