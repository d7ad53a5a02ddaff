// Package objstoretest is the conformance suite every objstore.Store backend
// must pass (Dir, Memory, and S3 against a real S3-compatible server): one
// definition of the contract, so that code tested against the in-memory fake
// behaves the same in production. Memory, that fake, lives here too: the
// stages' tests use it, the sidecar never does.
//
// The suite pins only what callers rely on (objstore.Store's documentation):
// atomic, durable Put; ranged reads that are all or an error and report the
// object's size (DESIGN §The read contract); ErrNotExist;
// idempotent Delete; ordered, prefix-filtered List; key validation;
// cancellation; safety under concurrency. It does not rely on overwriting a
// key, which callers never do (SPEC §7).
package objstoretest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/objstore"
)

// Run runs the suite as subtests of t. newStore returns an empty store for
// one subtest; it may register cleanups with t. Subtests do not run in
// parallel with each other, so a backend with shared state (a bucket) may
// hand every subtest the same empty store if it empties it in a cleanup.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutRead", testPutRead},
		{"ReadRanges", testReadRanges},
		{"ReadReportsSize", testReadReportsSize},
		{"ReadMissing", testReadMissing},
		{"EmptyObject", testEmptyObject},
		{"LargeObject", testLargeObject},
		{"BuffersNotRetained", testBuffersNotRetained},
		{"Delete", testDelete},
		{"List", testList},
		{"KeysNeedingEscapes", testKeysNeedingEscapes},
		{"ListStopsAtFnError", testListStopsAtFnError},
		{"ListDeleteDuringList", testListDeleteDuringList},
		{"InvalidKeys", testInvalidKeys},
		{"ContextCancelled", testContextCancelled},
		{"Concurrent", testConcurrent},
		{"PutIsAtomic", testPutIsAtomic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

// payload returns n deterministic pseudo-random bytes.
func payload(seed uint64, n int) []byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	b := make([]byte, n)
	_, _ = rand.NewChaCha8(s).Read(b) // never fails
	return b
}

func mustPut(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
}

// readAll reads the whole object with one ReadRange of size+1 bytes.
func readAll(t *testing.T, s objstore.Store, key string, size int) []byte {
	t.Helper()
	p := make([]byte, size+1)
	n, got, err := s.ReadRange(t.Context(), key, 0, p)
	if err != nil || n != size || got != int64(size) {
		t.Fatalf("ReadRange(%q, 0, %d bytes) = %d, size %d, %v; want %d, size %d, nil", key, len(p), n, got, err, size, size)
	}
	return p[:n]
}

func listAll(t *testing.T, s objstore.Store, prefix string) []objstore.ObjectInfo {
	t.Helper()
	var out []objstore.ObjectInfo
	if err := s.List(t.Context(), prefix, func(oi objstore.ObjectInfo) error {
		out = append(out, oi)
		return nil
	}); err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return out
}

func testPutRead(t *testing.T, s objstore.Store) {
	data := payload(1, 1000)
	mustPut(t, s, "obj/a", data)
	if got := readAll(t, s, "obj/a", len(data)); !bytes.Equal(got, data) {
		t.Fatal("object read back differs from what was put")
	}
	// An exact-size read ends at the object's end: no sentinel, the size.
	p := make([]byte, len(data))
	n, size, err := s.ReadRange(t.Context(), "obj/a", 0, p)
	if n != len(data) || size != int64(len(data)) || err != nil {
		t.Fatalf("exact-size ReadRange = %d, size %d, %v; want %d, size %d, nil", n, size, err, len(data), len(data))
	}
	if !bytes.Equal(p, data) {
		t.Fatal("exact-size read differs")
	}
}

func testReadRanges(t *testing.T, s objstore.Store) {
	const size = 4096
	data := payload(2, size)
	mustPut(t, s, "ranges", data)
	tests := []struct {
		name  string
		off   int64
		len   int
		wantN int // min(len, size−off), never less without an error
	}{
		{"first byte", 0, 1, 1},
		{"head", 0, 100, 100},
		{"middle", 1000, 1234, 1234},
		{"tail exact", size - 100, 100, 100},
		{"last byte", size - 1, 1, 1},
		{"past end, short", size - 10, 100, 10},
		{"at end", size, 10, 0},
		{"beyond end", size + 1000, 10, 0},
		{"zero length", 100, 0, 0},
		{"zero length at end", size, 0, 0},
		{"zero length beyond end", size + 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := make([]byte, tt.len)
			for i := range p {
				p[i] = 0xa5
			}
			n, gotSize, err := s.ReadRange(t.Context(), "ranges", tt.off, p)
			if err != nil || n != tt.wantN || gotSize != size {
				t.Fatalf("ReadRange(%d, %d bytes) = %d, size %d, %v; want %d, size %d, nil", tt.off, tt.len, n, gotSize, err, tt.wantN, size)
			}
			if want := data[min(tt.off, size):][:n]; !bytes.Equal(p[:n], want) {
				t.Fatalf("bytes at %d differ", tt.off)
			}
			for _, b := range p[n:] {
				if b != 0xa5 {
					t.Fatal("ReadRange wrote past the n bytes it returned")
				}
			}
		})
	}
	t.Run("negative offset", func(t *testing.T) {
		n, size, err := s.ReadRange(t.Context(), "ranges", -1, make([]byte, 1))
		if err == nil || n != 0 || size != 0 {
			t.Fatalf("ReadRange at -1 = %d, size %d, %v; want 0, 0 and an error", n, size, err)
		}
	})
}

// testReadReportsSize: every read reports the object's size, whatever the
// range: the caller never has to infer the end from a short read.
func testReadReportsSize(t *testing.T, s objstore.Store) {
	for _, size := range []int{1, 7, 1000, 64 << 10} {
		key := fmt.Sprintf("size/%d", size)
		mustPut(t, s, key, payload(uint64(size), size))
		for _, off := range []int64{0, int64(size) / 2, int64(size) - 1, int64(size), int64(size) + 5} {
			for _, l := range []int{0, 1, size, size + 1} {
				n, got, err := s.ReadRange(t.Context(), key, off, make([]byte, l))
				want := int(min(int64(l), max(int64(size)-off, 0)))
				if err != nil || got != int64(size) || n != want {
					t.Errorf("%s: ReadRange(%d, %d bytes) = %d, size %d, %v; want %d, size %d, nil", key, off, l, n, got, err, want, size)
				}
			}
		}
	}
}

func testReadMissing(t *testing.T, s objstore.Store) {
	mustPut(t, s, "present/x", []byte("x"))
	for _, key := range []string{"absent", "present/y", "present/x/below", "present"} {
		for _, l := range []int{10, 0} {
			n, size, err := s.ReadRange(t.Context(), key, 0, make([]byte, l))
			if n != 0 || size != 0 || !errors.Is(err, objstore.ErrNotExist) || errors.Is(err, io.EOF) {
				t.Errorf("ReadRange(%q, %d bytes) = %d, size %d, %v; want 0, 0, ErrNotExist", key, l, n, size, err)
			}
		}
	}
}

func testEmptyObject(t *testing.T, s objstore.Store) {
	mustPut(t, s, "empty", nil)
	for _, l := range []int{1, 0} {
		n, size, err := s.ReadRange(t.Context(), "empty", 0, make([]byte, l))
		if n != 0 || size != 0 || err != nil {
			t.Fatalf("ReadRange(empty, %d bytes) = %d, size %d, %v; want 0, size 0, nil", l, n, size, err)
		}
	}
	got := listAll(t, s, "empty")
	if len(got) != 1 || got[0].Key != "empty" || got[0].Size != 0 {
		t.Fatalf("List(empty) = %+v; want one object of size 0", got)
	}
}

func testLargeObject(t *testing.T, s objstore.Store) {
	const size = 20 << 20
	data := payload(3, size)
	mustPut(t, s, "large/obj", data)
	if got := readAll(t, s, "large/obj", size); !bytes.Equal(got, data) {
		t.Fatal("large object read back differs")
	}
	for _, r := range []struct{ off, n int }{{0, 1 << 20}, {size/2 - 3, 5 << 20}, {size - 7, 7}} {
		p := make([]byte, r.n)
		if n, got, err := s.ReadRange(t.Context(), "large/obj", int64(r.off), p); n != r.n || got != size || err != nil {
			t.Fatalf("ReadRange(%d, %d bytes) = %d, size %d, %v", r.off, r.n, n, got, err)
		}
		if !bytes.Equal(p, data[r.off:r.off+r.n]) {
			t.Fatalf("range [%d, %d) differs", r.off, r.off+r.n)
		}
	}
	if got := listAll(t, s, "large/"); len(got) != 1 || got[0].Size != size {
		t.Fatalf("List(large/) = %+v; want one object of %d bytes", got, size)
	}
}

func testBuffersNotRetained(t *testing.T, s objstore.Store) {
	data := payload(4, 100)
	orig := slices.Clone(data)
	mustPut(t, s, "owned", data)
	clear(data) // the caller may reuse its buffer once Put returns
	got := readAll(t, s, "owned", len(orig))
	if !bytes.Equal(got, orig) {
		t.Fatal("object changed when the caller reused the buffer given to Put")
	}
	clear(got)
	if again := readAll(t, s, "owned", len(orig)); !bytes.Equal(again, orig) {
		t.Fatal("object changed when the caller modified a buffer filled by ReadRange")
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	mustPut(t, s, "del/a", []byte("a"))
	mustPut(t, s, "del/b", []byte("b"))
	ctx := t.Context()
	if err := s.Delete(ctx, "del/a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, _, err := s.ReadRange(ctx, "del/a", 0, make([]byte, 1)); !errors.Is(err, objstore.ErrNotExist) {
		t.Fatalf("ReadRange after Delete: %v; want ErrNotExist", err)
	}
	if err := s.Delete(ctx, "del/a"); err != nil {
		t.Fatalf("second Delete: %v; want nil (idempotent)", err)
	}
	if err := s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete of a never-existing key: %v; want nil", err)
	}
	if got := listAll(t, s, "del/"); len(got) != 1 || got[0].Key != "del/b" {
		t.Fatalf("List after Delete = %+v; want only del/b", got)
	}
	if got := readAll(t, s, "del/b", 1); string(got) != "b" {
		t.Fatal("Delete affected another object")
	}
}

func testList(t *testing.T, s objstore.Store) {
	// Keys chosen so that lexical key order differs from a naive directory
	// walk ('.' < '/' < '0'), plus keys outside the prefixes and bytes
	// beyond ASCII.
	objects := map[string]int{
		"p/a.b":        1,
		"p/a/x":        22,
		"p/a/y/z":      3,
		"p/a0":         44,
		"p/b":          5,
		"p/ü-ünicode":  6,
		"p/with space": 7,
		"pz":           8,
		"q/z":          9,
	}
	keys := make([]string, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	start := time.Now()
	for _, k := range keys {
		mustPut(t, s, k, payload(5, objects[k]))
	}
	slices.Sort(keys)
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"p", keys[:len(keys)-1]},
		{"p/", []string{"p/a.b", "p/a/x", "p/a/y/z", "p/a0", "p/b", "p/with space", "p/ü-ünicode"}},
		{"p/a", []string{"p/a.b", "p/a/x", "p/a/y/z", "p/a0"}},
		{"p/a/", []string{"p/a/x", "p/a/y/z"}},
		{"p/a/x", []string{"p/a/x"}},
		{"q/z", []string{"q/z"}},
		{"q/z/", nil},
		{"nothing", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("prefix=%q", tt.prefix), func(t *testing.T) {
			got := listAll(t, s, tt.prefix)
			gotKeys := make([]string, len(got))
			for i, oi := range got {
				gotKeys[i] = oi.Key
				if oi.Size != int64(objects[oi.Key]) {
					t.Errorf("%s: Size = %d, want %d", oi.Key, oi.Size, objects[oi.Key])
				}
				// Allow for coarse clocks (S3 has 1 s resolution) and skew.
				if oi.LastModified.Before(start.Add(-time.Minute)) || oi.LastModified.After(time.Now().Add(time.Minute)) {
					t.Errorf("%s: LastModified = %v, want about %v", oi.Key, oi.LastModified, start)
				}
			}
			if !slices.Equal(gotKeys, tt.want) {
				t.Errorf("keys = %q\nwant   %q", gotKeys, tt.want)
			}
		})
	}
}

// testKeysNeedingEscapes uses keys with characters that URLs and request
// signatures encode specially (S3 keys travel in the request path).
func testKeysNeedingEscapes(t *testing.T, s objstore.Store) {
	keys := []string{"esc/a+b", "esc/100%", "esc/q?x=1&y=2", "esc/frag#ment", "esc/tilde~*'()!$,;:@",
		"esc/ü/ß", "esc/%2F", "esc/sp ace/+"}
	for i, k := range keys {
		mustPut(t, s, k, payload(uint64(100+i), 10+i))
	}
	for i, k := range keys {
		if got := readAll(t, s, k, 10+i); !bytes.Equal(got, payload(uint64(100+i), 10+i)) {
			t.Errorf("%q: read back differs", k)
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	got := listAll(t, s, "esc/")
	gotKeys := make([]string, len(got))
	for i, oi := range got {
		gotKeys[i] = oi.Key
	}
	if !slices.Equal(gotKeys, want) {
		t.Errorf("List = %q\nwant   %q", gotKeys, want)
	}
	for _, k := range keys {
		if err := s.Delete(t.Context(), k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
	if got := listAll(t, s, "esc/"); len(got) != 0 {
		t.Errorf("%d objects left after deleting all", len(got))
	}
}

func testListStopsAtFnError(t *testing.T, s objstore.Store) {
	for _, k := range []string{"s/1", "s/2", "s/3"} {
		mustPut(t, s, k, []byte(k))
	}
	errStop := errors.New("stop here")
	calls := 0
	err := s.List(t.Context(), "s/", func(oi objstore.ObjectInfo) error {
		calls++
		if oi.Key == "s/2" {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 2 {
		t.Fatalf("List = %v after %d calls; want fn's error after 2 calls", err, calls)
	}
}

func testListDeleteDuringList(t *testing.T, s objstore.Store) {
	// The orphan scan deletes objects from inside List's callback.
	for i := range 20 {
		mustPut(t, s, fmt.Sprintf("scan/%02d", i), []byte{byte(i)})
	}
	n := 0
	if err := s.List(t.Context(), "scan/", func(oi objstore.ObjectInfo) error {
		n++
		return s.Delete(t.Context(), oi.Key)
	}); err != nil {
		t.Fatalf("List: %v", err)
	}
	if n != 20 {
		t.Fatalf("List visited %d objects, want 20", n)
	}
	if got := listAll(t, s, "scan/"); len(got) != 0 {
		t.Fatalf("%d objects left after deleting all", len(got))
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := t.Context()
	for _, key := range []string{"", "/abs", "trailing/", "a//b", "..", "../escape", "a/../../escape",
		"a/./b", ".", "nul\x00byte", `back\slash`, string(make([]byte, objstore.MaxKeyBytes+1))} {
		if err := s.Put(ctx, key, []byte("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v; want ErrInvalidKey", key, err)
		}
		if _, _, err := s.ReadRange(ctx, key, 0, make([]byte, 1)); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("ReadRange(%q) = %v; want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v; want ErrInvalidKey", key, err)
		}
	}
	if got := listAll(t, s, ""); len(got) != 0 {
		t.Fatalf("invalid Puts stored objects: %+v", got)
	}
}

func testContextCancelled(t *testing.T, s objstore.Store) {
	mustPut(t, s, "ctx/present", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Put(ctx, "ctx/new", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put = %v; want context.Canceled", err)
	}
	if n, size, err := s.ReadRange(ctx, "ctx/present", 0, make([]byte, 1)); n != 0 || size != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("ReadRange = %d, size %d, %v; want 0, 0, context.Canceled", n, size, err)
	}
	if err := s.Delete(ctx, "ctx/present"); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete = %v; want context.Canceled", err)
	}
	if err := s.List(ctx, "", func(objstore.ObjectInfo) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("List = %v; want context.Canceled", err)
	}
	// The cancelled Put left nothing and the cancelled Delete deleted nothing.
	if got := listAll(t, s, "ctx/"); len(got) != 1 || got[0].Key != "ctx/present" {
		t.Fatalf("after cancelled calls List = %+v; want only ctx/present", got)
	}
}

func testConcurrent(t *testing.T, s objstore.Store) {
	const (
		writers = 8
		perW    = 8
	)
	var wg sync.WaitGroup
	errs := make(chan error, writers*perW*2)
	for w := range writers {
		wg.Go(func() {
			for i := range perW {
				key := fmt.Sprintf("conc/%d/%d", w, i)
				data := payload(uint64(w*100+i), 1000+w*i)
				if err := s.Put(context.Background(), key, data); err != nil {
					errs <- err
					return
				}
				// Read back our object and another writer's, which may or
				// may not exist yet but is never partial.
				for _, k := range []string{key, fmt.Sprintf("conc/%d/%d", (w+1)%writers, i)} {
					p := make([]byte, 5000)
					n, size, err := s.ReadRange(context.Background(), k, 0, p)
					if errors.Is(err, objstore.ErrNotExist) && k != key {
						continue
					}
					if err != nil || int64(n) != size {
						errs <- fmt.Errorf("ReadRange(%s) = %d, size %d, %v", k, n, size, err)
						continue
					}
					var ww, ii int
					fmt.Sscanf(k, "conc/%d/%d", &ww, &ii)
					if !bytes.Equal(p[:n], payload(uint64(ww*100+ii), 1000+ww*ii)) {
						errs <- fmt.Errorf("ReadRange(%s): wrong bytes", k)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := listAll(t, s, "conc/"); len(got) != writers*perW {
		t.Fatalf("List found %d objects, want %d", len(got), writers*perW)
	}
}

// testPutIsAtomic reads an object while it is being put: every read sees
// ErrNotExist or the whole object, never a prefix of it.
func testPutIsAtomic(t *testing.T, s objstore.Store) {
	const size = 4 << 20
	for round := range 3 {
		key := fmt.Sprintf("atomic/%d", round)
		data := payload(uint64(round), size)
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(done)
			if err := s.Put(context.Background(), key, data); err != nil {
				t.Errorf("Put: %v", err)
			}
		})
		for range 2 {
			wg.Go(func() {
				p := make([]byte, size+1)
				for {
					select {
					case <-done:
						return
					default:
					}
					n, got, err := s.ReadRange(context.Background(), key, 0, p)
					if errors.Is(err, objstore.ErrNotExist) {
						continue
					}
					if err != nil || n != size || got != size || !bytes.Equal(p[:n], data) {
						t.Errorf("ReadRange during Put = %d, size %d, %v; want the whole object or ErrNotExist", n, got, err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
}
