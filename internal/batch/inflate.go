package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Streaming decompression for produce validation (SPEC §2): every codec is
// read as a stream whose working set is bounded by a constant or by the
// compressed batch, never by what it decompresses to, and the readers are
// pooled so that steady state allocates little per batch.
//
//   - gzip (RFC 1952): a 32 KiB window.
//   - lz4 (LZ4 frame format): one block's buffers, at most 4 MiB.
//   - zstd (RFC 8878): the frame's window, at most zstdMaxWindow.
//   - snappy: one raw block (franz-go, librdkafka) or xerial framing (the
//     Java client): a 16-byte header (magic "\x82SNAPPY\x00", two int32
//     versions), then chunks, each a big-endian uint32 length and a raw
//     block. A raw block is decoded whole (per chunk for xerial), after its
//     claimed length is checked against MaxSnappyExpansion times its size.

// zstdMaxWindow is the largest zstd window accepted: 128 MiB, the limit of
// the zstd-jni decoder Kafka uses (windowLog 27). The decoder allocates
// history as the frame fills it, so a frame smaller than its window costs
// its size only.
const zstdMaxWindow = 128 << 20

// MaxSnappyExpansion bounds how much larger than its encoding a snappy
// block may decode to: the densest element is a 3-byte copy of 64 bytes
// (21.3×).
const MaxSnappyExpansion = 22

// decompressor is one batch's decompressed records stream and the release
// that returns its codec's state to the pool.
type decompressor struct {
	r       io.Reader
	release func()
}

var (
	gzipPool = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4Pool  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstdPool = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1), // on the caller's goroutine
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(zstdMaxWindow),
		)
		if err != nil {
			panic("batch: zstd decoder options refused: " + err.Error())
		}
		return d
	}}
	snappyPool = sync.Pool{New: func() any { return new(snappyReader) }}
)

// newDecompressor returns a stream of src, a records section compressed
// with codec (Codec*). Errors: the codec's for a bad stream header.
func newDecompressor(codec int8, src []byte) (decompressor, error) {
	switch codec {
	case CodecGzip:
		zr := gzipPool.Get().(*gzip.Reader)
		if err := zr.Reset(bytes.NewReader(src)); err != nil {
			gzipPool.Put(zr)
			return decompressor{}, fmt.Errorf("gzip: %w", err)
		}
		return decompressor{zr, func() { gzipPool.Put(zr) }}, nil
	case CodecSnappy:
		sr := snappyPool.Get().(*snappyReader)
		sr.reset(src)
		return decompressor{sr, func() { sr.reset(nil); snappyPool.Put(sr) }}, nil
	case CodecLZ4:
		zr := lz4Pool.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(src))
		return decompressor{zr, func() { zr.Reset(nil); lz4Pool.Put(zr) }}, nil
	case CodecZstd:
		zr := zstdPool.Get().(*zstd.Decoder)
		// A bytes.Reader, not a bytes.Buffer: given a buffer, the decoder
		// decodes it whole into memory.
		if err := zr.Reset(bytes.NewReader(src)); err != nil {
			zstdPool.Put(zr)
			return decompressor{}, fmt.Errorf("zstd: %w", err)
		}
		return decompressor{zr, func() { _ = zr.Reset(nil); zstdPool.Put(zr) }}, nil
	}
	return decompressor{}, fmt.Errorf("batch: unknown compression codec %d", codec)
}

// xerialMagic starts a xerial-framed snappy stream of xerialHeaderSize
// header bytes.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// snappyReader streams a snappy records section: one raw block, or xerial
// chunks decoded one at a time into a reused buffer.
type snappyReader struct {
	src    []byte // blocks not decoded yet
	xerial bool
	buf    []byte // the decoded block
	out    []byte // its unread part
	err    error  // sticky
}

func (s *snappyReader) reset(src []byte) {
	s.src, s.out, s.err, s.xerial = src, nil, nil, false
	// As franz-go and librdkafka decide: the magic and something after the
	// header.
	if len(src) > xerialHeaderSize && bytes.HasPrefix(src, xerialMagic) {
		s.src, s.xerial = src[xerialHeaderSize:], true
	}
	if cap(s.buf) > 4<<20 {
		s.buf = nil // keep no huge block in the pool
	}
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.err = s.next()
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// NewSnappyReader returns a stream of src, a Kafka snappy records section:
// one raw block (franz-go, librdkafka) or xerial chunks (the Java client),
// each block decoded whole into a reused buffer after its claimed length
// is checked against MaxSnappyExpansion times its size. Read errors say
// "snappy: …" and what was wrong.
func NewSnappyReader(src []byte) io.Reader {
	s := new(snappyReader)
	s.reset(src)
	return s
}

// next decodes the next block into out, or returns io.EOF after the last.
func (s *snappyReader) next() error {
	if len(s.src) == 0 {
		return io.EOF
	}
	var block []byte
	if s.xerial {
		if len(s.src) < 4 {
			return errors.New("snappy: xerial chunk length truncated")
		}
		n := binary.BigEndian.Uint32(s.src)
		if uint64(n) > uint64(len(s.src)-4) {
			return fmt.Errorf("snappy: xerial chunk of %d bytes, %d left", n, len(s.src)-4)
		}
		block, s.src = s.src[4:4+n], s.src[4+n:]
	} else {
		block, s.src = s.src, nil
	}
	n, err := s2.DecodedLen(block)
	switch {
	case err != nil:
		return fmt.Errorf("snappy: %w", err)
	case n > MaxSnappyExpansion*len(block):
		return fmt.Errorf("snappy: a %d-byte block claims %d bytes", len(block), n)
	}
	if s.buf, err = s2.Decode(s.buf[:cap(s.buf)], block); err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	s.out = s.buf
	return nil
}
