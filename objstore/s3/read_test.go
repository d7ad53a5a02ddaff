package s3

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"
)

// body is a response body: data, then err (io.EOF for a proper end).
func body(data []byte, err error) io.Reader {
	return io.MultiReader(bytes.NewReader(data), &errReader{err})
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// object is the bytes of a 120-byte object.
var object = func() []byte {
	b := make([]byte, 120)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// wantRead checks n, size, err against wantN bytes of object at off, the
// size wantSize (−1: the answer did not say) and wantErr: nil, or an error
// wrapping wantErr and not io.EOF; or, if other, any error that wraps
// neither io.EOF nor io.ErrUnexpectedEOF.
func wantRead(t *testing.T, p []byte, off int64, n int, size int64, err error, wantN int, wantSize int64, wantErr error, other bool) {
	t.Helper()
	switch {
	case n != wantN || (n > 0 && !bytes.Equal(p[:n], object[off:off+int64(n)])):
		t.Fatalf("read %d bytes (%v), want %d of the object", n, err, wantN)
	case other && (err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		t.Fatalf("err %v, want another error", err)
	case !other && wantErr == nil && err != nil:
		t.Fatalf("err %v, want nil", err)
	case !other && wantErr != nil && !errors.Is(err, wantErr):
		t.Fatalf("err %v, want %v", err, wantErr)
	case errors.Is(err, io.EOF):
		t.Fatalf("err %v wraps io.EOF", err)
	case err == nil && size != wantSize:
		t.Fatalf("size %d, want %d", size, wantSize)
	}
}

// TestReadRange: a ranged answer is complete when it holds the bytes asked
// or reaches the object's size in its Content-Range, and states that size
// (−1 for "*"); a short body, a missing Content-Length and a range short of
// the bytes asked are not.
func TestReadRange(t *testing.T) {
	const off = 100
	i64 := func(v int64) *int64 { return &v }
	tests := []struct {
		name     string
		cr       string
		length   *int64
		body     io.Reader
		wantN    int
		wantSize int64
		wantErr  error
		other    bool // another error: bad or misplaced Content-Range, a reset
	}{
		{"mid-object", "bytes 100-109/120", i64(10), body(object[100:110], io.EOF), 10, 120, nil, false},
		{"mid-object, no Content-Length", "bytes 100-109/120", nil, body(object[100:110], io.EOF), 10, 120, nil, false},
		{"up to the end", "bytes 100-109/110", nil, body(object[100:110], io.EOF), 10, 110, nil, false},
		{"across the end", "bytes 100-104/105", nil, body(object[100:105], io.EOF), 5, 105, nil, false},
		{"unknown size, all asked", "bytes 100-109/*", nil, body(object[100:110], io.EOF), 10, -1, nil, false},
		{"more sent than asked", "bytes 100-114/120", nil, body(object[100:115], io.EOF), 10, 120, nil, false},
		{"empty body", "bytes 100-109/120", nil, body(nil, io.EOF), 0, 0, io.ErrUnexpectedEOF, false},
		{"empty body at the end", "bytes 100-109/110", nil, body(nil, io.EOF), 0, 0, io.ErrUnexpectedEOF, false},
		{"short body", "bytes 100-109/120", nil, body(object[100:104], io.EOF), 4, 0, io.ErrUnexpectedEOF, false},
		{"broken body", "bytes 100-109/120", i64(10), body(object[100:103], io.ErrUnexpectedEOF), 3, 0, io.ErrUnexpectedEOF, false},
		{"reset body", "bytes 100-109/120", i64(10), body(object[100:103], syscall.ECONNRESET), 3, 0, syscall.ECONNRESET, false},
		{"Content-Length below the range", "bytes 100-109/120", i64(4), body(object[100:104], io.EOF), 0, 0, io.ErrUnexpectedEOF, false},
		{"range short of the asked, not the end", "bytes 100-104/120", nil, body(object[100:105], io.EOF), 5, 0, io.ErrUnexpectedEOF, false},
		{"range short of the asked, unknown size", "bytes 100-104/*", nil, body(object[100:105], io.EOF), 5, 0, io.ErrUnexpectedEOF, false},
		{"range elsewhere", "bytes 101-110/120", nil, body(object[101:111], io.EOF), 0, 0, nil, true},
		{"range past its size", "bytes 100-120/120", nil, body(object[100:120], io.EOF), 0, 0, nil, true},
		{"range backwards", "bytes 100-99/120", nil, body(nil, io.EOF), 0, 0, nil, true},
		{"unsatisfied range", "bytes */120", nil, body(nil, io.EOF), 0, 0, nil, true},
		{"other unit", "items 100-109/120", nil, body(object[100:110], io.EOF), 0, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := make([]byte, 10)
			n, size, err := readRange(tt.body, tt.cr, tt.length, p, off)
			wantRead(t, p, off, n, size, err, tt.wantN, tt.wantSize, tt.wantErr, tt.other)
		})
	}
}

// TestReadWhole: an answer that ignored the range is the whole object; it
// ends at its Content-Length, or where a framed body ends; a framed body
// read only in part does not say the size.
func TestReadWhole(t *testing.T) {
	size := int64(len(object))
	tests := []struct {
		name     string
		sized    bool // Content-Length: the object's size
		framed   bool
		cut      int   // bytes of the object in the body; 0: all
		end      error // how the body ends
		off      int64
		wantN    int
		wantSize int64
		wantErr  error
	}{
		{"sized, mid-object", true, false, 0, io.EOF, 100, 10, size, nil},
		{"sized, up to the end", true, false, 0, io.EOF, 110, 10, size, nil},
		{"sized, across the end", true, false, 0, io.EOF, 115, 5, size, nil},
		{"sized, past the end", true, false, 0, io.EOF, 130, 0, size, nil},
		{"sized, short body", true, false, 117, io.EOF, 115, 2, 0, io.ErrUnexpectedEOF},
		{"sized, broken", true, false, 117, io.ErrUnexpectedEOF, 115, 2, 0, io.ErrUnexpectedEOF},
		{"chunked, mid-object", false, true, 0, io.EOF, 100, 10, -1, nil},
		{"chunked, across the end", false, true, 0, io.EOF, 115, 5, size, nil},
		{"chunked, past the end", false, true, 0, io.EOF, 130, 0, size, nil},
		{"chunked, broken", false, true, 117, io.ErrUnexpectedEOF, 115, 2, 0, io.ErrUnexpectedEOF},
		{"chunked, broken before off", false, true, 0, io.ErrUnexpectedEOF, 130, 0, 0, io.ErrUnexpectedEOF},
		{"unframed", false, false, 0, io.EOF, 100, 0, 0, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var length *int64
			if tt.sized {
				length = &size
			}
			data := object
			if tt.cut > 0 {
				data = object[:tt.cut]
			}
			p := make([]byte, 10)
			n, gotSize, err := readWhole(body(data, tt.end), length, tt.framed, p, tt.off)
			wantRead(t, p, tt.off, n, gotSize, err, tt.wantN, tt.wantSize, tt.wantErr, false)
		})
	}
}
