package metalog

import (
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

func TestDecodeFrameCorruption(t *testing.T) {
	body := []byte("\x01\x68\x00 a record body of some length")
	good := appendFrame(nil, body)
	mutate := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	cases := []struct {
		name    string
		frame   []byte
		wantErr error
	}{
		{"good", good, nil},
		{"empty", nil, errFrameShort},
		{"short header", good[:7], errFrameShort},
		{"short body", good[:len(good)-1], errFrameShort},
		{"zero length", mutate(func(b []byte) { binary.BigEndian.PutUint32(b, 0) }), errFrameLength},
		{"length above limit", mutate(func(b []byte) { binary.BigEndian.PutUint32(b, MaxRecordBytes+1) }), errFrameLength},
		{"length larger than data", mutate(func(b []byte) { binary.BigEndian.PutUint32(b, uint32(len(body)+1)) }), errFrameShort},
		{"length smaller than body", mutate(func(b []byte) { binary.BigEndian.PutUint32(b, uint32(len(body)-1)) }), errFrameCRC},
		{"bad crc", mutate(func(b []byte) { b[5] ^= 1 }), errFrameCRC},
		{"flipped body bit", mutate(func(b []byte) { b[len(b)-3] ^= 0x10 }), errFrameCRC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := decodeFrame(tc.frame)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err == nil && (n != len(good) || !reflect.DeepEqual(got, body)) {
				t.Fatalf("decoded %d bytes", n)
			}
		})
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, []byte("\x01\x68\x00 a record body")))
	f.Add(appendFrame(nil, []byte{0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		body, n, err := decodeFrame(b)
		if err != nil {
			return
		}
		if n > len(b) || n != frameHeaderSize+len(body) {
			t.Fatalf("frame size %d of %d bytes, body %d", n, len(b), len(body))
		}
		if again := appendFrame(nil, body); !reflect.DeepEqual(again, b[:n]) {
			t.Fatalf("re-encoded frame differs")
		}
	})
}
