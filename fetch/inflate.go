package fetch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/diskless-sidecar/sidecar/internal/batch"
)

// Streaming decompression for timestamp lookups. Produce checks only batch
// headers (SPEC §2), so a stored batch of max.message.bytes may decompress
// to gigabytes; a lookup must neither hold its output nor let the codec
// allocate by what the batch claims. Every codec is read as a stream whose
// working set is bounded by a constant or by the compressed batch, never by
// the decompressed size, and a timedReader bounds how long a lookup may
// decompress (Config.MaxScanTime): the output is never held, so its size
// costs time only.
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
//     first bytes and is checked before allocating, against
//     batch.MaxSnappyExpansion times the block: a raw block's buffer is at most
//     that times the compressed batch (max.message.bytes).

// zstdMaxWindow is the largest zstd window (history the decoder allocates
// before the first byte) a lookup accepts. 8 MiB is the window of zstd
// levels up to 19 (windowLog 23) and of the Go encoder's default; Kafka
// clients default to level 3 (2 MiB or less). Only the "ultra" levels 20–22
// of a streaming encoder declare more; such batches get CORRUPT_MESSAGE on a
// timestamp lookup (Fetch serves them untouched).
const zstdMaxWindow = 8 << 20

// errTooLarge is the root of the errors for a batch a lookup refuses to
// decompress: a zstd window over zstdMaxWindow.
var errTooLarge = errors.New("fetch: batch too large to decompress for a lookup")

// errScanTime is the error of a timedReader read past its deadline: the
// lookup has spent Config.MaxScanTime decompressing.
var errScanTime = errors.New("fetch: lookup out of decompression time")

// decompressed returns a stream of src, a records section compressed with
// codec (batch.Codec*), and a release for the codec's resources. The
// stream's working set is bounded by a constant (the zstd window at most)
// or, for a raw snappy block, by batch.MaxSnappyExpansion × len(src), whatever
// it decompresses to. Errors: errTooLarge (wrapped), or the codec's for a
// bad header or an unknown codec.
func decompressed(codec int8, src []byte) (io.Reader, func(), error) {
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
		return batch.NewSnappyReader(src), func() {}, nil
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

// timedReader passes r through until deadline; a Read at or after it
// fails with errScanTime. Each Read of r is one buffer's worth (a scan
// buffer, a codec block), so the deadline is overrun by at most one.
type timedReader struct {
	r        io.Reader
	deadline time.Time
}

func (t *timedReader) Read(p []byte) (int, error) {
	if !time.Now().Before(t.deadline) {
		return 0, errScanTime
	}
	return t.r.Read(p)
}
