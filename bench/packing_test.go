package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/wal"
)

// fileBytes is the size of the file each packing case builds, the default
// diskless.append.buffer.max.bytes; a case with more partitions than fit
// grows the file to one batch per partition.
const fileBytes = 8 << 20

var (
	packPartitions = []int{1, 100, 1000}
	packBatchSizes = []struct {
		name string
		size int
	}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"1MiB", 1 << 20}}
)

// producedBatch builds a realistic idempotent batch of about size bytes:
// 16 records of incompressible-looking values, uncompressed, so that the
// CRC covers the whole size.
func producedBatch(size int, seed int) []byte {
	const records = 16
	recs := make([]batchtest.Record, records)
	per := max(size/records-24, 1)
	for i := range recs {
		v := make([]byte, per)
		for j := range v {
			v[j] = byte(seed*31 + i*7 + j*13)
		}
		recs[i] = batchtest.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}
	}
	return batchtest.Make(batchtest.Options{BaseTimestamp: time.Now().UnixMilli(), ProducerID: int64(seed), BaseSequence: 0}, recs...)
}

// packingInput returns the batches of one file, in arrival order,
// round-robin over partitions, and their total size.
func packingInput(partitions, size int) ([][]byte, int) {
	n := max(fileBytes/size, partitions)
	// One distinct batch per partition is enough: packing does not look
	// inside the records, and reusing buffers keeps setup memory small.
	distinct := make([][]byte, partitions)
	for p := range distinct {
		distinct[p] = producedBatch(size, p)
	}
	in := make([][]byte, n)
	total := 0
	for i := range in {
		in[i] = distinct[i%partitions]
		total += len(in[i])
	}
	return in, total
}

// BenchmarkPacking measures what the produce path does with a file's
// bytes — validate every batch (batch.ValidateProduce: header rules,
// CRC-32C and every record) and lay the file out as a WAL object (wal.Packer.Pack: group by
// partition, one copy) — beside its floors on the same bytes: a copy, a
// CRC-32C, and both. Packing reuses its output buffer and scratch, as the
// upload workers do, so steady state allocates nothing per batch.
func BenchmarkPacking(b *testing.B) {
	lim := batch.Limits{MaxBytes: 2 << 20, AllowZstd: true, CheckTimestamps: true}
	lim.MinTimestamp, lim.MaxTimestamp = batch.WindowMs(time.Now().UnixMilli(), 1<<40, 1<<40)
	for _, parts := range packPartitions {
		for _, bs := range packBatchSizes {
			b.Run(fmt.Sprintf("partitions=%d/batch=%s", parts, bs.name), func(b *testing.B) {
				benchPackingCase(b, lim, parts, bs.size)
			})
		}
	}
}

// benchPackingCase runs packing and its three floors on one file; the file
// is built here so that -bench filters skip the setup of other cases.
func benchPackingCase(b *testing.B, lim batch.Limits, parts, size int) {
	in, total := packingInput(parts, size)
	b.Run("pack", func(b *testing.B) {
		var (
			packer  wal.Packer
			entries = make([]wal.Entry, len(in))
			locs    = make([]wal.Location, len(in))
			out     = make([]byte, 0, total)
		)
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			for i, rec := range in {
				h, err := batch.ValidateProduce(rec, lim)
				if err != nil {
					b.Fatal(err)
				}
				entries[i] = wal.Entry{TopicID: [16]byte{byte(i % parts)}, Partition: int32(i % parts), Batch: h}
			}
			out = packer.Pack(out[:0], entries, locs)
		}
		b.ReportMetric(float64(len(in)), "batches/op")
	})
	b.Run("floor-copy", func(b *testing.B) {
		out := make([]byte, 0, total)
		b.SetBytes(int64(total))
		b.ReportAllocs()
		for b.Loop() {
			out = out[:0]
			for _, rec := range in {
				out = append(out, rec...)
			}
		}
	})
	b.Run("floor-crc", func(b *testing.B) {
		b.SetBytes(int64(total))
		b.ReportAllocs()
		var sum uint32
		for b.Loop() {
			for _, rec := range in {
				sum ^= batch.CRC(rec[21:])
			}
		}
		_ = sum
	})
	b.Run("floor-copy+crc", func(b *testing.B) {
		out := make([]byte, 0, total)
		b.SetBytes(int64(total))
		b.ReportAllocs()
		var sum uint32
		for b.Loop() {
			out = out[:0]
			for _, rec := range in {
				sum ^= batch.CRC(rec[21:])
				out = append(out, rec...)
			}
		}
		_ = sum
	})
}

// compressibleBatch builds a batch of 16 records of about size bytes before
// compression, values of JSON-like text (as event payloads are), compressed
// with codec.
func compressibleBatch(codec int8, size, seed int) []byte {
	const records = 16
	recs := make([]batchtest.Record, records)
	for i := range recs {
		var v []byte
		for j := 0; len(v) < size/records-24; j++ {
			v = fmt.Appendf(v, `{"user":%d,"event":"click","page":"/p/%d","ts":%d},`, seed*1000+i, (seed+i*j)%97, 1700000000000+int64(i*j))
		}
		recs[i] = batchtest.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}
	}
	return batchtest.Make(batchtest.Options{Codec: codec, BaseTimestamp: time.Now().UnixMilli(), ProducerID: int64(seed), BaseSequence: 0}, recs...)
}

// BenchmarkPackingCodecs measures what produce validation costs per codec
// (SPEC §2: every record is read, compressed batches decompressed as a
// stream): packing a file of 100 partitions' 16 KiB batches (before
// compression) as BenchmarkPacking's pack does, with validate alone beside
// it. Throughput counts the batch bytes as received (compressed); ratio is
// the compression ratio (uncompressed / compressed), so MB/s × ratio is
// the rate of records bytes read.
func BenchmarkPackingCodecs(b *testing.B) {
	lim := batch.Limits{MaxBytes: 2 << 20, AllowZstd: true, CheckTimestamps: true}
	lim.MinTimestamp, lim.MaxTimestamp = batch.WindowMs(time.Now().UnixMilli(), 1<<40, 1<<40)
	const parts, size = 100, 16 << 10
	for _, codec := range []int8{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		name := [...]string{"none", "gzip", "snappy", "lz4", "zstd"}[codec]
		distinct := make([][]byte, parts)
		plain := 0 // the distinct batches' bytes uncompressed
		for p := range distinct {
			distinct[p] = compressibleBatch(codec, size, p)
			plain += len(compressibleBatch(batch.CodecNone, size, p))
		}
		// As many batches as a file of fileBytes uncompressed holds.
		in := make([][]byte, fileBytes/size)
		total := 0
		for i := range in {
			in[i] = distinct[i%parts]
			total += len(in[i])
		}
		ratio := float64(plain) / float64(total/(len(in)/parts))
		b.Run("codec="+name+"/validate", func(b *testing.B) {
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for _, rec := range in {
					if _, err := batch.ValidateProduce(rec, lim); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(ratio, "ratio")
		})
		b.Run("codec="+name+"/pack", func(b *testing.B) {
			var (
				packer  wal.Packer
				entries = make([]wal.Entry, len(in))
				locs    = make([]wal.Location, len(in))
				out     = make([]byte, 0, total)
			)
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				for i, rec := range in {
					h, err := batch.ValidateProduce(rec, lim)
					if err != nil {
						b.Fatal(err)
					}
					entries[i] = wal.Entry{TopicID: [16]byte{byte(i % parts)}, Partition: int32(i % parts), Batch: h}
				}
				out = packer.Pack(out[:0], entries, locs)
			}
		})
	}
}
