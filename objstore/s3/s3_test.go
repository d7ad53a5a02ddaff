package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/internal/versitygw"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
)

// s3Env is a versitygw with one bucket, reached through a fault proxy.
type s3Env struct {
	gw     *versitygw.Server
	proxy  *s3fault.Proxy
	bucket string
}

var bucketSeq atomic.Int64

// newS3Env starts versitygw (skipping the test when it is not installed,
// unless SIDECAR_REQUIRE_INTEGRATION=1), creates a bucket and puts a fault
// proxy in front.
func newS3Env(t *testing.T) *s3Env {
	t.Helper()
	if testing.Short() {
		t.Skip("starts versitygw; skipped with -short")
	}
	return newS3EnvTB(t)
}

func newS3EnvTB(t testing.TB) *s3Env {
	t.Helper()
	gw := versitygw.Start(t)
	e := &s3Env{gw: gw, bucket: fmt.Sprintf("bucket-%d", bucketSeq.Add(1))}
	gw.CreateBucket(t, e.bucket)
	e.proxy = s3fault.Start(t, gw.Endpoint)
	return e
}

// store returns an S3 store on the environment's bucket through the proxy;
// cfg's Bucket, Endpoint, PathStyle, Region and Credentials are filled in.
func (e *s3Env) store(t *testing.T, cfg s3.Config) *s3.Store {
	t.Helper()
	return e.storeTB(t, cfg)
}

func (e *s3Env) storeTB(t testing.TB, cfg s3.Config) *s3.Store {
	t.Helper()
	if cfg.Bucket == "" {
		cfg.Bucket = e.bucket
	}
	cfg.Endpoint = e.proxy.URL
	cfg.PathStyle = true
	cfg.Region = versitygw.Region
	cfg.Credentials = credentials.NewStaticCredentialsProvider(versitygw.AccessKey, versitygw.SecretKey, "")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestS3Conformance runs the conformance suite against versitygw, each
// subtest under its own key prefix (so the store starts empty), and again
// at the root of a fresh bucket per subtest.
func TestS3Conformance(t *testing.T) {
	e := newS3Env(t)
	t.Run("prefix", func(t *testing.T) {
		n := 0
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			n++
			s := e.store(t, s3.Config{Prefix: fmt.Sprintf("conformance/%d", n)})
			s.SetListPageSize(3) // every List of more than 3 keys paginates
			return s
		})
	})
	t.Run("bucket root", func(t *testing.T) {
		objstoretest.Run(t, func(t *testing.T) objstore.Store {
			bucket := fmt.Sprintf("root-%d", bucketSeq.Add(1))
			e.gw.CreateBucket(t, bucket)
			return e.store(t, s3.Config{Bucket: bucket})
		})
	})
}

// quick fills in short backoffs so that retry tests do not wait.
func quick(cfg s3.Config) s3.Config {
	if cfg.InitialBackoff == 0 {
		cfg.InitialBackoff, cfg.MaxBackoff = 2*time.Millisecond, 10*time.Millisecond
	}
	return cfg
}

func (e *s3Env) noOpenUploads(t *testing.T) {
	t.Helper()
	if ups := e.gw.OpenUploads(t, e.bucket, ""); len(ups) != 0 {
		t.Fatalf("%d multipart uploads left open, e.g. %s", len(ups), aws.ToString(ups[0].Key))
	}
}

func readBack(t *testing.T, s objstore.Store, key string, want []byte) {
	t.Helper()
	p := make([]byte, len(want)+1)
	n, size, err := s.ReadRange(t.Context(), key, 0, p)
	if err != nil || n != len(want) || size != int64(len(want)) || !bytes.Equal(p[:n], want) {
		t.Fatalf("ReadRange(%s) = %d bytes, size %d, %v; want the %d bytes put", key, n, size, err, len(want))
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{byte(n), byte(n >> 8), byte(n >> 16)}).Read(b)
	return b
}

// TestS3PutCounts pins the requests a Put costs: one PUT up to the part
// size, a multipart upload of ceil(size/part) parts above it; no HEAD, since
// the store's checksum in the answer verifies the object. PutWhole (whole)
// sends one PUT whatever the size.
func TestS3PutCounts(t *testing.T) {
	e := newS3Env(t)
	const part = s3.MinPartSize
	s := e.store(t, s3.Config{PartSize: part, Concurrency: 3})
	// single puts objects up to 2 parts and a bit as one PutObject, as the
	// sidecar does for a file of the buffer plus one request.
	single := e.store(t, s3.Config{PartSize: part, SinglePutMaxBytes: 2*part + 1000, Concurrency: 3})
	tests := []struct {
		single, whole                  bool
		size                           int
		puts, creates, parts, complete int64
	}{
		{false, false, 0, 1, 0, 0, 0},
		{false, false, 1000, 1, 0, 0, 0},
		{false, false, part - 1, 1, 0, 0, 0},
		{false, false, part, 1, 0, 0, 0},
		{false, false, part + 1, 0, 1, 2, 1},
		{false, false, 4*part + 123, 0, 1, 5, 1},
		{true, false, part + 1, 1, 0, 0, 0},
		{true, false, 2*part + 1000, 1, 0, 0, 0},
		{true, false, 2*part + 1001, 0, 1, 3, 1},
		{false, true, 1000, 1, 0, 0, 0},
		{false, true, 4*part + 123, 1, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/single=%v/whole=%v", tt.size, tt.single, tt.whole), func(t *testing.T) {
			s := s
			if tt.single {
				s = single
			}
			put := s.Put
			if tt.whole {
				put = s.PutWhole
			}
			e.proxy.ResetCounts()
			key := fmt.Sprintf("counts/%d-%v-%v", tt.size, tt.single, tt.whole)
			data := randomBytes(tt.size)
			if err := put(t.Context(), key, data); err != nil {
				t.Fatal(err)
			}
			c := e.proxy.Counts()
			got := [5]int64{c[s3fault.PutObject], c[s3fault.CreateMultipartUpload], c[s3fault.UploadPart], c[s3fault.CompleteMultipartUpload], c[s3fault.HeadObject]}
			if want := [5]int64{tt.puts, tt.creates, tt.parts, tt.complete, 0}; got != want {
				t.Fatalf("(PUT, Create, UploadPart, Complete, HEAD) = %v, want %v (all: %v)", got, want, c)
			}
			readBack(t, s, key, data)
		})
	}
	e.noOpenUploads(t)
}

// TestS3PutFaults injects faults between the store and versitygw and
// checks what Put makes of them: retried requests, aborted uploads, errors
// marked permanent or not, and the requests it cost.
func TestS3PutFaults(t *testing.T) {
	const part = s3.MinPartSize
	small := randomBytes(1000)
	large := randomBytes(3*part + 7) // 4 parts
	tests := []struct {
		name      string
		data      []byte
		rules     []*s3fault.Rule
		cfg       s3.Config
		wantErr   bool // else the object must be stored
		permanent bool
		counts    map[s3fault.Kind]int64 // exact counts, when given
		minCounts map[s3fault.Kind]int64
	}{
		{name: "SlowDown twice, then stored", data: small,
			rules:  []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 2, Fault: s3fault.SlowDown()}},
			counts: map[s3fault.Kind]int64{s3fault.PutObject: 3}},
		{name: "SlowDown on every attempt", data: small, wantErr: true,
			rules:  []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.SlowDown()}},
			counts: map[s3fault.Kind]int64{s3fault.PutObject: 3}},
		{name: "connection reset, then stored", data: small,
			rules:  []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.Reset()}},
			counts: map[s3fault.Kind]int64{s3fault.PutObject: 2}},
		{name: "no answer within the request timeout, then stored", data: small,
			cfg:    s3.Config{RequestTimeout: time.Second},
			rules:  []*s3fault.Rule{{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.Stall()}},
			counts: map[s3fault.Kind]int64{s3fault.PutObject: 2}},
		{name: "access denied is permanent", data: small, wantErr: true, permanent: true,
			rules:  []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.Error(403, "AccessDenied")}},
			counts: map[s3fault.Kind]int64{s3fault.PutObject: 1}},
		{name: "stored checksum differs", data: small, wantErr: true,
			rules: []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.SetHeader("X-Amz-Checksum-Crc32c", "AAAAAA==")}}},
		{name: "no checksum in the answer: size checked with HEAD", data: small,
			rules:  []*s3fault.Rule{{Kind: s3fault.PutObject, Fault: s3fault.SetHeader("X-Amz-Checksum-Crc32c", "")}},
			counts: map[s3fault.Kind]int64{s3fault.PutObject: 1, s3fault.HeadObject: 1}},
		{name: "part 2 fails once, then stored", data: large,
			rules:  []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 2, Times: 1, Fault: s3fault.InternalError()}},
			counts: map[s3fault.Kind]int64{s3fault.CreateMultipartUpload: 1, s3fault.UploadPart: 5, s3fault.CompleteMultipartUpload: 1}},
		{name: "part 3 always fails: aborted", data: large, wantErr: true,
			rules:     []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 3, Fault: s3fault.InternalError()}},
			counts:    map[s3fault.Kind]int64{s3fault.CreateMultipartUpload: 1, s3fault.CompleteMultipartUpload: 0, s3fault.AbortMultipartUpload: 1},
			minCounts: map[s3fault.Kind]int64{s3fault.UploadPart: 3}},
		{name: "part reset mid-upload, then stored", data: large,
			rules: []*s3fault.Rule{{Kind: s3fault.UploadPart, PartNumber: 1, Times: 1, Fault: s3fault.Reset()}}},
		{name: "Complete fails once, then stored", data: large,
			rules:  []*s3fault.Rule{{Kind: s3fault.CompleteMultipartUpload, Times: 1, Fault: s3fault.SlowDown()}},
			counts: map[s3fault.Kind]int64{s3fault.UploadPart: 4, s3fault.CompleteMultipartUpload: 2, s3fault.AbortMultipartUpload: 0}},
		{name: "Complete always fails: aborted", data: large, wantErr: true,
			rules:  []*s3fault.Rule{{Kind: s3fault.CompleteMultipartUpload, Fault: s3fault.InternalError()}},
			counts: map[s3fault.Kind]int64{s3fault.CompleteMultipartUpload: 3, s3fault.AbortMultipartUpload: 1}},
		{name: "Complete's answer lost", data: large,
			// The retried Complete finds the upload completed (or gone):
			// either stored, or an error the caller retries; never open.
			rules: []*s3fault.Rule{{Kind: s3fault.CompleteMultipartUpload, Times: 1, Fault: s3fault.LoseAnswer()}}},
		{name: "Create's answer lost: the orphan upload is aborted", data: large,
			rules:  []*s3fault.Rule{{Kind: s3fault.CreateMultipartUpload, Times: 1, Fault: s3fault.LoseAnswer()}},
			counts: map[s3fault.Kind]int64{s3fault.CreateMultipartUpload: 2, s3fault.ListMultipartUploads: 1, s3fault.AbortMultipartUpload: 1}},
		{name: "abort fails at first, retried", data: large, wantErr: true,
			rules: []*s3fault.Rule{
				{Kind: s3fault.UploadPart, PartNumber: 2, Fault: s3fault.Error(400, "InvalidPart")},
				{Kind: s3fault.AbortMultipartUpload, Times: 2, Fault: s3fault.SlowDown()},
			},
			counts: map[s3fault.Kind]int64{s3fault.AbortMultipartUpload: 3}},
	}
	e := newS3Env(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.PartSize, cfg.Concurrency = part, 2
			cfg.Prefix = fmt.Sprintf("faults/%d", i)
			s := e.store(t, quick(cfg))
			e.proxy.Clear()
			e.proxy.ResetCounts()
			for _, r := range tt.rules {
				e.proxy.Add(r)
			}
			err := s.Put(t.Context(), "obj", tt.data)
			e.proxy.Clear()
			counts := e.proxy.Counts()
			t.Logf("requests: %v; Put: %v", counts, err)
			switch {
			case tt.wantErr && err == nil:
				t.Fatal("Put succeeded")
			case !tt.wantErr && err != nil && tt.name != "Complete's answer lost":
				t.Fatalf("Put: %v", err)
			case errors.Is(err, objstore.ErrPermanent) != tt.permanent:
				t.Fatalf("Put = %v; ErrPermanent: %v, want %v", err, errors.Is(err, objstore.ErrPermanent), tt.permanent)
			}
			for k, want := range tt.counts {
				if counts[k] != want {
					t.Errorf("%s requests: %d, want %d", k, counts[k], want)
				}
			}
			for k, want := range tt.minCounts {
				if counts[k] < want {
					t.Errorf("%s requests: %d, want at least %d", k, counts[k], want)
				}
			}
			if err == nil {
				readBack(t, s, "obj", tt.data)
			} else if err := s.Put(t.Context(), "obj", tt.data); err != nil {
				t.Fatalf("Put again without faults: %v", err)
			}
			e.noOpenUploads(t)
		})
	}
}

// TestS3PutCancelledMidUpload cancels a multipart Put while a part hangs:
// Put returns the ctx's error, and the upload is aborted all the same.
func TestS3PutCancelledMidUpload(t *testing.T) {
	e := newS3Env(t)
	s := e.store(t, quick(s3.Config{PartSize: s3.MinPartSize}))
	stall := e.proxy.Add(&s3fault.Rule{Kind: s3fault.UploadPart, PartNumber: 2, Fault: s3fault.Stall()})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for stall.Fired() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	err := s.Put(ctx, "cancelled", randomBytes(2*s3.MinPartSize+1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put = %v, want context.Canceled", err)
	}
	// One abort per upload created is the quiet case; on a loaded machine an
	// attempt of CreateMultipartUpload or of the abort can time out and be
	// retried (the sweep then aborts the upload an earlier attempt left), so
	// what must hold is: Put aborted, and no upload is left open.
	if got := e.proxy.Count(s3fault.AbortMultipartUpload); got == 0 {
		t.Errorf("no abort (requests: %v), want the upload aborted", e.proxy.Counts())
	}
	e.noOpenUploads(t)
}

// TestS3ReadFaults: a GET failing in its headers or its body is retried
// for the missing bytes; persistent failures end in an error that is not
// ErrNotExist.
func TestS3ReadFaults(t *testing.T) {
	e := newS3Env(t)
	s := e.store(t, quick(s3.Config{RequestTimeout: time.Second}))
	data := randomBytes(1 << 20)
	if err := s.Put(t.Context(), "read/obj", data); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		rule    *s3fault.Rule
		wantErr bool
		gets    int64
	}{
		{"no fault", nil, false, 1},
		{"SlowDown once", &s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.SlowDown()}, false, 2},
		{"reset once", &s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.Reset()}, false, 2},
		{"body cut once", &s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.TruncateBody(100_000)}, false, 2},
		{"body ended early once", &s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.EndBodyEarly(100_000)}, false, 2},
		{"stalled once", &s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.Stall()}, false, 2},
		{"body slower than the timeout once", &s3fault.Rule{Kind: s3fault.GetObject, Times: 1, Fault: s3fault.SlowBody(256 << 10)}, false, 2},
		{"SlowDown always", &s3fault.Rule{Kind: s3fault.GetObject, Fault: s3fault.SlowDown()}, true, 3},
		{"body cut always", &s3fault.Rule{Kind: s3fault.GetObject, Fault: s3fault.TruncateBody(1000)}, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.proxy.Clear()
			e.proxy.ResetCounts()
			if tt.rule != nil {
				e.proxy.Add(tt.rule)
			}
			p := make([]byte, 600_000)
			n, size, err := s.ReadRange(t.Context(), "read/obj", 300_000, p)
			e.proxy.Clear()
			if got := e.proxy.Count(s3fault.GetObject); got != tt.gets {
				t.Errorf("%d GETs, want %d", got, tt.gets)
			}
			if tt.wantErr {
				if err == nil || errors.Is(err, io.EOF) || errors.Is(err, objstore.ErrNotExist) || errors.Is(err, objstore.ErrPermanent) {
					t.Fatalf("ReadRange = %d, %v; want a transient error", n, err)
				}
				return
			}
			if err != nil || n != len(p) || size != int64(len(data)) || !bytes.Equal(p, data[300_000:900_000]) {
				t.Fatalf("ReadRange = %d, size %d, %v; want the %d bytes", n, size, err, len(p))
			}
		})
	}
}

// TestS3ReadReframedAnswers: a GET answered without Content-Length
// (chunked), or with fewer bytes than its Content-Range announces, or not
// at all, never reads as the end of the object: ReadRange returns the
// bytes in the middle of the object, the bytes up to its real end with its
// size, and an error that does not wrap io.EOF when the bytes do not come.
// A 416 is answered with a HEAD for the size.
func TestS3ReadReframedAnswers(t *testing.T) {
	e := newS3Env(t)
	s := e.store(t, quick(s3.Config{RequestTimeout: time.Second}))
	const size = 1 << 20
	data := randomBytes(size)
	if err := s.Put(t.Context(), "reframed/obj", data); err != nil {
		t.Fatal(err)
	}
	const (
		all     = iota // the bytes of [off, min(off+len, size)), and size
		failure        // a transient error
	)
	tests := []struct {
		name        string
		fault       s3fault.Fault
		times       int // 0: every GET
		off, len    int64
		want        int
		gets, heads int64
	}{
		{"chunked, mid-object", s3fault.Chunked(), 0, 300_000, 600_000, all, 1, 0},
		{"chunked, across the end", s3fault.Chunked(), 0, size - 1000, 5000, all, 1, 0},
		{"chunked, up to the end", s3fault.Chunked(), 0, size - 1000, 1000, all, 1, 0},
		{"chunked, past the end", s3fault.Chunked(), 0, size, 10, all, 1, 1},
		{"short body once, mid-object", s3fault.ShortBody(100_000), 1, 300_000, 600_000, all, 2, 0},
		{"empty body once, mid-object", s3fault.ShortBody(0), 1, 300_000, 600_000, all, 2, 0},
		{"short body once, across the end", s3fault.ShortBody(10), 1, size - 1000, 5000, all, 2, 0},
		{"empty body once, across the end", s3fault.ShortBody(0), 1, size - 1000, 5000, all, 2, 0},
		{"short body always, mid-object", s3fault.ShortBody(100_000), 0, 300_000, 600_000, failure, 3, 0},
		{"empty body always, mid-object", s3fault.ShortBody(0), 0, 300_000, 600_000, failure, 3, 0},
		{"empty body always, across the end", s3fault.ShortBody(0), 0, size - 1000, 5000, failure, 3, 0},
		{"hang up always", s3fault.Hangup(), 0, 300_000, 600_000, failure, -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.proxy.Clear()
			e.proxy.ResetCounts()
			e.proxy.Add(&s3fault.Rule{Kind: s3fault.GetObject, Times: tt.times, Fault: tt.fault})
			p := make([]byte, tt.len)
			n, gotSize, err := s.ReadRange(t.Context(), "reframed/obj", tt.off, p)
			e.proxy.Clear()
			// net/http resends a GET once by itself when a reused
			// connection is closed before the answer: no count for those.
			if got := e.proxy.Count(s3fault.GetObject); tt.gets >= 0 && got != tt.gets {
				t.Errorf("%d GETs, want %d", got, tt.gets)
			}
			if got := e.proxy.Count(s3fault.HeadObject); got != tt.heads {
				t.Errorf("%d HEADs, want %d", got, tt.heads)
			}
			end := min(tt.off+tt.len, size)
			switch tt.want {
			case all:
				if err != nil || int64(n) != end-tt.off || gotSize != size || !bytes.Equal(p[:n], data[tt.off:end]) {
					t.Fatalf("ReadRange = %d, size %d, %v; want the %d bytes of [%d, %d), size %d", n, gotSize, err, end-tt.off, tt.off, end, size)
				}
			case failure:
				if err == nil || errors.Is(err, io.EOF) || errors.Is(err, objstore.ErrNotExist) || errors.Is(err, objstore.ErrPermanent) {
					t.Fatalf("ReadRange = %d, %v; want a transient error, not (wrapping) io.EOF", n, err)
				}
				if n != 0 || gotSize != 0 {
					t.Fatalf("ReadRange = %d, size %d with an error; want 0, 0", n, gotSize)
				}
			}
		})
	}
}

// TestS3Check: Check finds a missing bucket (permanent) and a working one.
func TestS3Check(t *testing.T) {
	e := newS3Env(t)
	if err := e.store(t, s3.Config{}).Check(t.Context()); err != nil {
		t.Fatalf("Check: %v", err)
	}
	err := e.store(t, s3.Config{Bucket: "no-such-bucket"}).Check(t.Context())
	if !errors.Is(err, objstore.ErrPermanent) {
		t.Fatalf("Check of a missing bucket = %v, want ErrPermanent", err)
	}
	err = e.store(t, s3.Config{Bucket: "no-such-bucket"}).Put(t.Context(), "x", []byte("x"))
	if !errors.Is(err, objstore.ErrPermanent) {
		t.Fatalf("Put into a missing bucket = %v, want ErrPermanent", err)
	}
}

// TestS3AbortStaleUploads: uploads older than the cutoff under the prefix
// are aborted, younger ones and others kept.
func TestS3AbortStaleUploads(t *testing.T) {
	e := newS3Env(t)
	s := e.store(t, s3.Config{Prefix: "p"})
	cl := e.gw.Client(t)
	for _, k := range []string{"p/wal/a", "p/wal/b", "p/other/c", "elsewhere/d"} {
		if _, err := cl.CreateMultipartUpload(t.Context(), &awss3.CreateMultipartUploadInput{Bucket: aws.String(e.bucket), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.AbortStaleUploads(t.Context(), "wal/", time.Hour); n != 0 || err != nil {
		t.Fatalf("AbortStaleUploads(1h) = %d, %v; want 0 (all are young)", n, err)
	}
	time.Sleep(1100 * time.Millisecond) // S3 times have 1 s resolution
	if n, err := s.AbortStaleUploads(t.Context(), "wal/", time.Second); n != 2 || err != nil {
		t.Fatalf("AbortStaleUploads = %d, %v; want 2", n, err)
	}
	var left []string
	for _, u := range e.gw.OpenUploads(t, e.bucket, "") {
		left = append(left, aws.ToString(u.Key))
	}
	slices.Sort(left)
	if want := []string{"elsewhere/d", "p/other/c"}; !slices.Equal(left, want) {
		t.Fatalf("open uploads %q, want %q", left, want)
	}
}

// TestS3ConfigValidate names the key of every invalid field.
func TestS3ConfigValidate(t *testing.T) {
	tests := []struct {
		cfg s3.Config
		key string
	}{
		{s3.Config{}, "diskless.storage.s3.bucket"},
		{s3.Config{Bucket: "a/b"}, "diskless.storage.s3.bucket"},
		{s3.Config{Bucket: "b", Prefix: "../x"}, "diskless.storage.s3.prefix"},
		{s3.Config{Bucket: "b", Prefix: "/x"}, "diskless.storage.s3.prefix"},
		{s3.Config{Bucket: "b", Endpoint: "localhost:9000"}, "diskless.storage.s3.endpoint"},
		{s3.Config{Bucket: "b", PartSize: s3.MinPartSize - 1}, "diskless.upload.part.bytes"},
		{s3.Config{Bucket: "b", Concurrency: -1}, "diskless.upload.concurrency"},
		{s3.Config{Bucket: "b", RequestTimeout: -1}, "diskless.storage.s3.request.timeout.ms"},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.key) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tt.cfg, err, tt.key)
		}
	}
	if err := (s3.Config{Bucket: "b", Prefix: "a/b/"}).Validate(); err != nil {
		t.Errorf("a trailing / in the prefix: %v", err)
	}
}

// TestS3StaleUploadSweepRetries: when the store throttles the start-up
// sweep of stale multipart uploads, SweepStaleUploads returns the error and
// retries in the background until the uploads are aborted; with the fault
// never lifting it stops after its attempts; Close stops it at once.
func TestS3StaleUploadSweepRetries(t *testing.T) {
	e := newS3Env(t)
	cl := e.gw.Client(t)
	open := func(keys ...string) {
		for _, k := range keys {
			if _, err := cl.CreateMultipartUpload(t.Context(), &awss3.CreateMultipartUploadInput{Bucket: aws.String(e.bucket), Key: aws.String(k)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	openUnder := func(prefix string) int {
		n := 0
		for _, u := range e.gw.OpenUploads(t, e.bucket, "") {
			if strings.HasPrefix(aws.ToString(u.Key), prefix) {
				n++
			}
		}
		return n
	}
	open("a/wal/1", "a/wal/2", "b/wal/1", "c/wal/1")
	time.Sleep(1100 * time.Millisecond) // S3 times have 1 s resolution

	t.Run("throttled, then lifted", func(t *testing.T) {
		s := e.store(t, s3.Config{Prefix: "a", MaxAttempts: 1})
		s.SetStaleSweepRetries(10, 5*time.Millisecond, 20*time.Millisecond)
		e.proxy.ResetCounts()
		rule := e.proxy.Add(&s3fault.Rule{Kind: s3fault.ListMultipartUploads, Times: 3, Fault: s3fault.SlowDown()})
		defer e.proxy.Clear()
		if n, err := s.SweepStaleUploads(t.Context(), "wal/", time.Second); err == nil || n != 0 {
			t.Fatalf("first attempt = %d, %v; want the throttling error", n, err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for openUnder("a/wal/") > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d stale uploads still open after 20 s (%d faults fired)", openUnder("a/wal/"), rule.Fired())
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rule.Fired() != 3 {
			t.Fatalf("%d throttled lists, want 3", rule.Fired())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		s := e.store(t, s3.Config{Prefix: "b", MaxAttempts: 1})
		s.SetStaleSweepRetries(4, time.Millisecond, 2*time.Millisecond)
		e.proxy.ResetCounts()
		e.proxy.Add(&s3fault.Rule{Kind: s3fault.ListMultipartUploads, Fault: s3fault.SlowDown()})
		defer e.proxy.Clear()
		if _, err := s.SweepStaleUploads(t.Context(), "wal/", time.Second); err == nil {
			t.Fatal("first attempt succeeded through a throttling store")
		}
		deadline := time.Now().Add(10 * time.Second)
		for e.proxy.Count(s3fault.ListMultipartUploads) < 4 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // time for a fifth attempt, which must not come
		if n := e.proxy.Count(s3fault.ListMultipartUploads); n != 4 {
			t.Fatalf("%d list attempts, want 4", n)
		}
		s.Close() // the goroutine has ended; Close returns
		if openUnder("b/wal/") != 1 {
			t.Fatal("the upload went away through a throttling store")
		}
	})
	t.Run("stopped by Close", func(t *testing.T) {
		s := e.store(t, s3.Config{Prefix: "c", MaxAttempts: 1})
		s.SetStaleSweepRetries(10, time.Hour, time.Hour)
		e.proxy.Add(&s3fault.Rule{Kind: s3fault.ListMultipartUploads, Fault: s3fault.SlowDown()})
		defer e.proxy.Clear()
		if _, err := s.SweepStaleUploads(t.Context(), "wal/", time.Second); err == nil {
			t.Fatal("first attempt succeeded through a throttling store")
		}
		done := make(chan struct{})
		go func() { s.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not stop the background sweep")
		}
	})
}
