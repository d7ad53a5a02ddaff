package cache_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
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
// object's first n bytes there, a size and err.
type rigged struct {
	*store
	answer atomic.Pointer[riggedAnswer]
}

type riggedAnswer struct {
	off int64
	n   int
	// end is the size answered, as bytes past off; −1: the object's own.
	end int64
	err error
}

func (r *rigged) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	if a := r.answer.Load(); a != nil && a.off == off {
		n, size, _ := r.store.ReadRange(ctx, key, off, p[:min(a.n, len(p))])
		if a.end >= 0 {
			size = off + a.end
		}
		return n, size, a.err
	}
	return r.store.ReadRange(ctx, key, off, p)
}

// TestStoreErrorsAreNotTheEnd: the end of an object is learnt only from
// the size a successful read reports. A failed read, with or without
// bytes and whatever size it claims, and an answer that breaks the read
// contract (other than the bytes its size implies, without an error) fail
// the read, cache no block and mark no block as the last: once the store
// behaves, reads across the block boundary load the block and return every
// byte.
func TestStoreErrorsAreNotTheEnd(t *testing.T) {
	const B = 16
	tests := []struct {
		name string
		n    int   // bytes the rigged read returns
		end  int64 // its size, as bytes past the offset; −1: the real one
		err  error
	}{
		{"failure wrapping io.EOF", 0, 0, fmt.Errorf("objstore: read obj: Get \"…\": %w", io.EOF)},
		{"failure after some bytes, claiming the end there", 5, 5, io.ErrUnexpectedEOF},
		{"failure with every byte", 8, -1, errors.New("connection reset")},
		{"fewer bytes than the size says, no error", 5, -1, nil},
		{"more bytes than the size says, no error", 8, 3, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &rigged{store: newStore()}
			obj := object(9, 3*B+4)
			s.put(t, "obj", obj)
			c := newCache(t, cache.Config{BlockBytes: B}, s)
			if err := readAt(t.Context(), c, "obj", make([]byte, B), 0); err != nil {
				t.Fatalf("read(block 0) = %v", err)
			}
			s.answer.Store(&riggedAnswer{off: B, n: tt.n, end: tt.end, err: tt.err})
			p := make([]byte, 8)
			if err := readAt(t.Context(), c, "obj", p, B-4); err == nil {
				t.Fatal("read across the boundary succeeded; want an error")
			}
			if got := c.Stats().BytesCached.Load(); got != B {
				t.Fatalf("%d bytes cached, want block 0 only", got)
			}

			s.answer.Store(nil)
			s.takeReads()
			if err := readAt(t.Context(), c, "obj", p, B-4); err != nil || !bytes.Equal(p, obj[B-4:B+4]) {
				t.Fatalf("read across the boundary after the fault = %v; want 8 bytes", err)
			}
			if got := s.takeReads(); len(got) != 1 || got[0] != (readCall{"obj", B, B}) {
				t.Fatalf("store reads %v, want one of block 1", got)
			}
			wantEnd(t, "read across the end", readAt(t.Context(), c, "obj", p, 3*B))
		})
	}

	// Bypassed reads (data older than the cache's reach) take the same
	// care: neither a failure, with or without every byte, nor a broken
	// answer is a success or a short object.
	for _, tt := range tests {
		t.Run("bypass, "+tt.name, func(t *testing.T) {
			s := &rigged{store: newStore()}
			obj := object(10, 3*B)
			s.put(t, "obj", obj)
			clk := &clock{}
			c := newCache(t, cache.Config{BlockBytes: B, MaxBytes: B, Now: clk.now}, s)
			clk.set(1000)
			c.Put("new", object(11, B)) // the cache is full, its reach 1000 ms
			ns := []int{tt.n}
			if tt.err != nil {
				ns = append(ns, 8)
			}
			for _, n := range ns {
				s.answer.Store(&riggedAnswer{off: 2, n: n, end: tt.end, err: tt.err})
				rs := []cache.Range{{Off: 2, P: make([]byte, 8)}}
				if err := c.ReadRanges(t.Context(), cache.Object{Key: "obj", WrittenMs: 500}, rs, nil); err == nil {
					t.Fatalf("bypassed ReadRanges with %d bytes succeeded; want an error", n)
				}
			}
			if got := c.Stats().BypassReads.Load(); got != int64(len(ns)) {
				t.Fatalf("%d bypassed reads, want %d", got, len(ns))
			}
		})
	}
}

// TestS3AnswersWithoutLength runs the cache over the S3 store and
// versitygw, with GETs answered chunked (no Content-Length), with fewer
// bytes than their Content-Range says, or not at all: reads across a block
// boundary and up to the object's end return the right bytes, and a read
// across the end fails as the object's end (chunked), or they all fail,
// but not as the object's end; no end is remembered falsely, so once the
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
			if err := readAt(t.Context(), c, "obj", p, 0); err != nil {
				t.Fatalf("read(block 0) = %v", err)
			}
			reads := []struct {
				name string
				off  int64
				end  bool // the object ends 10 bytes in
			}{
				{"across the boundary of blocks 0 and 1", B - 50, false},
				{"across the end", size - 10, true},
				{"up to the end", size - 100, false},
			}
			check := func(t *testing.T, fails bool) {
				t.Helper()
				for _, r := range reads {
					err := readAt(t.Context(), c, "obj", p, r.off)
					switch {
					case fails:
						if err == nil || (r.end && errors.Is(err, io.ErrUnexpectedEOF) && strings.Contains(err.Error(), "object ends")) {
							t.Errorf("read %s = %v; want a failure, not the object's end", r.name, err)
						}
					case r.end:
						if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), fmt.Sprintf("object ends at %d", size)) {
							t.Errorf("read %s = %v; want the object's end at %d", r.name, err, size)
						}
					case err != nil || !bytes.Equal(p, obj[r.off:r.off+100]):
						t.Errorf("read %s = %v; want its 100 bytes", r.name, err)
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
