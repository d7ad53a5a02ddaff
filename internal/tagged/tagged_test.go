package tagged

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
)

// TestEach: fields are given in order with their bytes, a field's error
// stops the read, a truncated section shows in Ok and a truncated field
// is not given.
func TestEach(t *testing.T) {
	// Two fields: tag 0 {0xaa}, tag 3 {0x01, 0x02}; then a trailing byte.
	b := []byte{2, 0, 1, 0xaa, 3, 2, 1, 2, 0xff}
	r := &kbin.Reader{Src: b}
	var got []string
	if err := Each(r, func(tag uint32, v []byte) error {
		got = append(got, string(rune('0'+tag))+":"+string(v))
		return nil
	}); err != nil || !r.Ok() {
		t.Fatalf("Each: %v, ok %v", err, r.Ok())
	}
	if want := []string{"0:\xaa", "3:\x01\x02"}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("fields %q, want %q", got, want)
	}
	if !bytes.Equal(r.Src, []byte{0xff}) {
		t.Fatalf("left %x, want ff", r.Src)
	}

	stop := errors.New("stop")
	calls := 0
	r = &kbin.Reader{Src: b}
	if err := Each(r, func(uint32, []byte) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Each with a failing field: %v after %d calls, want stop after 1", err, calls)
	}

	// The second field claims 2 bytes, 1 is there.
	r = &kbin.Reader{Src: []byte{2, 0, 1, 0xaa, 3, 2, 1}}
	calls = 0
	_ = Each(r, func(uint32, []byte) error { calls++; return nil })
	if r.Ok() || calls != 1 {
		t.Fatalf("truncated: ok %v after %d calls, want not ok after 1", r.Ok(), calls)
	}
}

// TestAppendOne: the head Each reads back, and AppendNone's empty section.
func TestAppendOne(t *testing.T) {
	dst := append(AppendOne([]byte{0x7f}, 200, 3), 1, 2, 3)
	// 0x7f kept; count 1; tag 200 as a uvarint (c8 01); size 3; bytes.
	if want := []byte{0x7f, 1, 0xc8, 1, 3, 1, 2, 3}; !bytes.Equal(dst, want) {
		t.Fatalf("AppendOne: %x, want %x", dst, want)
	}
	r := &kbin.Reader{Src: dst[1:]}
	var tag uint32
	var v []byte
	_ = Each(r, func(tg uint32, b []byte) error { tag, v = tg, b; return nil })
	if !r.Ok() || tag != 200 || !bytes.Equal(v, []byte{1, 2, 3}) || len(r.Src) != 0 {
		t.Fatalf("read back: tag %d, %x, ok %v, left %x", tag, v, r.Ok(), r.Src)
	}
	if got := AppendNone(nil); !bytes.Equal(got, []byte{0}) {
		t.Fatalf("AppendNone: %x", got)
	}
}

// TestAppend: a section of several fields in the order given, which Each
// reads back; no fields is AppendNone's empty section.
func TestAppend(t *testing.T) {
	dst := Append([]byte{0x7f}, Field{0, []byte{0xaa}}, Field{200, []byte{1, 2}})
	// 0x7f kept; count 2; tag 0, size 1, aa; tag 200 (c8 01), size 2, 01 02.
	if want := []byte{0x7f, 2, 0, 1, 0xaa, 0xc8, 1, 2, 1, 2}; !bytes.Equal(dst, want) {
		t.Fatalf("Append: %x, want %x", dst, want)
	}
	r := &kbin.Reader{Src: dst[1:]}
	var got []Field
	_ = Each(r, func(tag uint32, v []byte) error { got = append(got, Field{tag, v}); return nil })
	if !r.Ok() || len(got) != 2 || got[1].Tag != 200 || !bytes.Equal(got[1].Value, []byte{1, 2}) || len(r.Src) != 0 {
		t.Fatalf("read back: %v, ok %v, left %x", got, r.Ok(), r.Src)
	}
	if got := Append(nil); !bytes.Equal(got, AppendNone(nil)) {
		t.Fatalf("Append of no fields: %x", got)
	}
}
