package fetch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Streaming decompression for timestamp lookups. Produce checks only batch
// headers (SPEC §2), so a stored batch of max.message.bytes may decompress
// to gigabytes; a lookup must neither hold its output nor let the codec
// allocate by what the batch claims. Every codec is read as a stream whose
// working set is bounded by a constant or by the compressed batch, never by
// the decompressed size, and a budgetReader bounds how much is decompressed
// (Config.MaxDecompressedBytes).
//
//   - gzip (RFC 1952, multistream): a 32 KiB window.
//   - lz4 (LZ4 frame format): a block's buffers, at most 4 MiB each.
//   - zstd (RFC 8878): the frame's window, which the decoder allocates up
//     front; frames declaring more than zstdMaxWindow are refused.
//   - snappy: Kafka carries either one raw snappy block (franz-go's
//     single-batch path, librdkafka) or xerial framing (the Java client,
//     franz-go's merged batches): a 16-byte header (magic "\x82SNAPPY\x00",
//     version, compatible version) then chunks, each a big-endian uint32
//     length and a raw snappy block. A raw block is not streamable: it is
//     decoded whole, per chunk for xerial. A block's decoded length is in its
//     first bytes and is checked before allocating: against what the budget
//     has left, and against maxSnappyExpansion times the block.

// zstdMaxWindow is the largest zstd window (history the decoder allocates
// before the first byte) a lookup accepts. 8 MiB is the window of zstd
// levels up to 19 (windowLog 23) and of the Go encoder's default; Kafka
// clients default to level 3 (2 MiB or less). Only the "ultra" levels 20–22
// of a streaming encoder declare more; such batches get CORRUPT_MESSAGE on a
// timestamp lookup (Fetch serves them untouched).
const zstdMaxWindow = 8 << 20

// maxSnappyExpansion bounds how much larger than its encoding a snappy block
// may decode to: the densest element is a 3-byte copy of 64 bytes (21.3×).
// A block that claims more is not snappy.
const maxSnappyExpansion = 22

// errTooLarge is the root of the errors for a batch a lookup refuses to
// decompress: past the lookup's budget, or a zstd window over zstdMaxWindow.
var errTooLarge = errors.New("fetch: batch too large to decompress for a lookup")

// decompressed returns a stream of src, a records section compressed with
// codec (batch.Codec*), and a release for the codec's resources; limit is the
// lookup's remaining budget, which bounds the snappy blocks decoded whole.
// The caller reads at most limit bytes (budgetReader). Errors: errTooLarge
// (wrapped), or the codec's for a bad header or an unknown codec.
func decompressed(codec int8, src []byte, limit int64) (io.Reader, func(), error) {
	// A bytes.Reader, not a bytes.Buffer: given a buffer, the zstd decoder
	// decodes it whole into memory.
	in := bytes.NewReader(src)
	switch codec {
	case batch.CodecGzip:
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { _ = zr.Close() }, nil
	case batch.CodecSnappy:
		return newSnappyReader(src, limit), func() {}, nil
	case batch.CodecLZ4:
		zr := lz4.NewReader(in) // one block at a time, no goroutines (concurrency 1 by default)
		return zr, func() { zr.Reset(nil) }, nil
	case batch.CodecZstd:
		// Refuse a first frame whose window is too large here, where it is
		// not confused with a corrupt one; the decoder refuses later ones.
		var fh zstd.Header
		if fh.Decode(src) == nil {
			window := fh.WindowSize
			if fh.SingleSegment {
				window = fh.FrameContentSize // the whole content is the window
			}
			if window > zstdMaxWindow {
				return nil, nil, fmt.Errorf("%w: zstd window of %d bytes, over %d", errTooLarge, window, zstdMaxWindow)
			}
		}
		zr, err := zstd.NewReader(in,
			zstd.WithDecoderConcurrency(1), // decode on the caller's goroutine
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow),
			zstd.WithDecoderMaxMemory(zstdMaxWindow), // in streaming, also a window cap
		)
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zstdReader{zr}, zr.Close, nil
	default:
		return nil, nil, fmt.Errorf("unknown compression codec %d", codec)
	}
}

// zstdReader reports a later frame whose window is over zstdMaxWindow as
// errTooLarge. (The decoder's error for that also covers a block larger
// than a small window, which is corrupt: the answer is CORRUPT_MESSAGE
// either way, only the warning differs.)
type zstdReader struct{ d *zstd.Decoder }

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		err = fmt.Errorf("%w: zstd frame over the %d-byte window: %w", errTooLarge, zstdMaxWindow, err)
	}
	return n, err
}

// budgetReader passes r through until left bytes have been read; after
// that it fails with errTooLarge, unless r is at its end (io.EOF): a stream
// of exactly left bytes is read whole.
type budgetReader struct {
	r    io.Reader
	left int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left <= 0 {
		var one [1]byte
		switch _, err := io.ReadFull(b.r, one[:]); err {
		case io.EOF:
			return 0, io.EOF
		case nil:
			return 0, fmt.Errorf("%w: over MaxDecompressedBytes", errTooLarge)
		default:
			return 0, err
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// xerialMagic starts a xerial-framed snappy stream; the whole header is 16
// bytes (magic, then two big-endian int32 versions).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

// snappyReader streams a Kafka snappy records section: one raw block, or
// xerial chunks decoded one at a time into a reused buffer.
type snappyReader struct {
	src    []byte // blocks not decoded yet: the raw block, or xerial chunks
	xerial bool
	limit  int64  // what the budget leaves for blocks not decoded yet
	buf    []byte // the decoded block
	out    []byte // its unread part
	err    error  // sticky
}

func newSnappyReader(src []byte, limit int64) *snappyReader {
	// As franz-go and librdkafka decide: the magic and something after the
	// header (a raw block cannot start with 0x82 'S' and be that short).
	if len(src) > xerialHeaderSize && bytes.HasPrefix(src, xerialMagic) {
		return &snappyReader{src: src[xerialHeaderSize:], xerial: true, limit: limit}
	}
	return &snappyReader{src: src, limit: limit}
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
	case int64(n) > s.limit:
		return fmt.Errorf("%w: a snappy block of %d bytes over what MaxDecompressedBytes leaves (%d)", errTooLarge, n, s.limit)
	case n > maxSnappyExpansion*len(block):
		return fmt.Errorf("snappy: a %d-byte block claims %d bytes", len(block), n)
	}
	if s.buf, err = s2.Decode(s.buf[:0], block); err != nil {
		return fmt.Errorf("snappy: %w", err)
	}
	s.limit -= int64(n)
	s.out = s.buf
	return nil
}
