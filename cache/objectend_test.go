package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/internal/versitygw"
	"github.com/diskless-sidecar/sidecar/objstore/s3"
)

// rigged is a store whose read at one offset gives a set answer: the
// object's first n bytes there, and err.
type rigged struct {
	*store
	answer atomic.Pointer[riggedAnswer]
}

type riggedAnswer struct {
	off int64
	n   int
	err error
}

func (r *rigged) ReadAt(ctx context.Context, key string, p []byte, off int64) (int, error) {
	if a := r.answer.Load(); a != nil && a.off == off {
		n, _ := r.store.ReadAt(ctx, key, p[:min(a.n, len(p))], off)
		return n, a.err
	}
	return r.store.ReadAt(ctx, key, p, off)
}

// TestReaderErrorsAreNotTheEnd: only the reader's bare io.EOF marks the
// object's end. A failure that wraps io.EOF, or io.ErrUnexpectedEOF, with
// or without bytes, fails the read with an error that does not match
// io.EOF, caches no short block and marks no block as the last: once the
// reader behaves, reads across the block boundary load the block and
// return every byte.
func TestReaderErrorsAreNotTheEnd(t *testing.T) {
	const B = 16
	tests := []struct {
		name string
		n    int // bytes the failing read returns
		err  error
	}{
		{"wrapped io.EOF", 0, fmt.Errorf("objstore: read obj: Get \"…\": %w", io.EOF)},
		{"wrapped io.EOF after some bytes", 5, fmt.Errorf("body: %w", io.EOF)},
		{"io.ErrUnexpectedEOF after some bytes", 5, io.ErrUnexpectedEOF},
		{"wrapped io.ErrUnexpectedEOF", 0, fmt.Errorf("body: %w", io.ErrUnexpectedEOF)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &rigged{store: newStore()}
			obj := object(9, 3*B+4)
			s.put(t, "obj", obj)
			c := newCache(t, cache.Config{BlockBytes: B}, s)
			if n, err := c.ReadAt(t.Context(), "obj", make([]byte, B), 0); n != B || err != nil {
				t.Fatalf("ReadAt(block 0) = %d, %v", n, err)
			}
			s.answer.Store(&riggedAnswer{off: B, n: tt.n, err: tt.err})
			p := make([]byte, 8)
			if n, err := c.ReadAt(t.Context(), "obj", p, B-4); err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("ReadAt across the boundary = %d, %v; want an error not matching io.EOF", n, err)
			}
			rs := []cache.Range{{Off: B - 4, P: make([]byte, 8)}}
			if err := c.ReadRanges(t.Context(), "obj", -1, rs); err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("ReadRanges across the boundary = %v; want an error not matching io.EOF", err)
			}
			if got := c.Stats().BytesCached.Load(); got != B {
				t.Fatalf("%d bytes cached, want block 0 only", got)
			}

			s.answer.Store(nil)
			s.takeReads()
			if n, err := c.ReadAt(t.Context(), "obj", p, B-4); n != 8 || err != nil || !bytes.Equal(p, obj[B-4:B+4]) {
				t.Fatalf("ReadAt across the boundary after the fault = %d, %v; want 8 bytes", n, err)
			}
			if got := s.takeReads(); len(got) != 1 || got[0] != (readCall{"obj", B, B}) {
				t.Fatalf("store reads %v, want one of block 1", got)
			}
			if n, err := c.ReadAt(t.Context(), "obj", p, 3*B); n != 4 || err != io.EOF || !bytes.Equal(p[:4], obj[3*B:]) {
				t.Fatalf("ReadAt across the end = %d, %v; want 4, io.EOF", n, err)
			}
		})
	}

	// Bypassed reads (data older than the cache's reach) take the same
	// care: a failure wrapping io.EOF is not a short object, nor, with
	// every byte, a success.
	for _, tt := range tests {
		t.Run("bypass, "+tt.name, func(t *testing.T) {
			s := &rigged{store: newStore()}
			obj := object(10, 3*B)
			s.put(t, "obj", obj)
			clk := &clock{}
			c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: B, Now: clk.now}, s)
			clk.set(1000)
			c.Put("new", object(11, B)) // the cache is full, its reach 1000 ms
			for _, n := range []int{tt.n, 8} {
				s.answer.Store(&riggedAnswer{off: 2, n: n, err: tt.err})
				rs := []cache.Range{{Off: 2, P: make([]byte, 8)}}
				if err := c.ReadRanges(t.Context(), "obj", 500, rs); err == nil || errors.Is(err, io.EOF) {
					t.Fatalf("bypassed ReadRanges with %d bytes = %v; want an error not matching io.EOF", n, err)
				}
			}
			if got := c.Stats().BypassReads.Load(); got != 2 {
				t.Fatalf("%d bypassed reads, want 2", got)
			}
		})
	}
}

// TestS3AnswersWithoutLength runs the cache over the S3 store and
// versitygw, with GETs answered chunked (no Content-Length), with fewer
// bytes than their Content-Range says, or not at all: reads across a block
// boundary and across the object's end return the right bytes (chunked) or
// an error that is not io.EOF; no end is remembered falsely, so once the
// store behaves the same reads are right, at one GET per block that
// failed.
func TestS3AnswersWithoutLength(t *testing.T) {
	if testing.Short() {
		t.Skip("starts versitygw; skipped with -short")
	}
	gw := versitygw.Start(t)
	gw.CreateBucket(t, "cache")
	proxy := s3fault.Start(t, gw.Endpoint)
	st, err := s3.New(context.Background(), s3.Config{
		Bucket: "cache", Endpoint: proxy.URL, PathStyle: true, Region: versitygw.Region,
		Credentials:    credentials.NewStaticCredentialsProvider(versitygw.AccessKey, versitygw.SecretKey, ""),
		InitialBackoff: 2 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, RequestTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	const (
		B    = 64 << 10
		size = 3*B + 1000 // blocks 0–2 whole, block 3 short
	)
	obj := object(12, size)
	if err := st.Put(t.Context(), "obj", obj); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		fault s3fault.Fault
		fails bool
	}{
		{"chunked", s3fault.Chunked(), false},
		{"short body", s3fault.ShortBody(100), true}, // 3 attempts: 300 bytes of each block
		{"empty body", s3fault.ShortBody(0), true},
		{"hang up", s3fault.Hangup(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, cache.Config{BlockBytes: B}, st)
			p := make([]byte, 100)
			if n, err := c.ReadAt(t.Context(), "obj", p, 0); n != 100 || err != nil {
				t.Fatalf("ReadAt(block 0) = %d, %v", n, err)
			}
			reads := []struct {
				name string
				off  int64
				want int   // bytes
				eof  error // nil or io.EOF
			}{
				{"across the boundary of blocks 0 and 1", B - 50, 100, nil},
				{"across the end", size - 10, 10, io.EOF},
			}
			check := func(t *testing.T, fails bool) {
				t.Helper()
				for _, r := range reads {
					n, err := c.ReadAt(t.Context(), "obj", p, r.off)
					if fails {
						if err == nil || errors.Is(err, io.EOF) {
							t.Errorf("ReadAt %s = %d, %v; want an error not matching io.EOF", r.name, n, err)
						}
						continue
					}
					if n != r.want || err != r.eof || !bytes.Equal(p[:n], obj[r.off:r.off+int64(n)]) {
						t.Errorf("ReadAt %s = %d, %v; want %d bytes, %v", r.name, n, err, r.want, r.eof)
					}
				}
			}
			proxy.Add(&s3fault.Rule{Kind: s3fault.GetObject, Fault: tt.fault})
			check(t, tt.fails)
			proxy.Clear()
			proxy.ResetCounts()
			check(t, false)
			wantGets := int64(0) // blocks 1 and 3 cached under the fault
			if tt.fails {
				wantGets = 2 // loaded now, as they failed before
			}
			if got := proxy.Count(s3fault.GetObject); got != wantGets {
				t.Errorf("%d GETs once the store behaves, want %d", got, wantGets)
			}
		})
	}
}
