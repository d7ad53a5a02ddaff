package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/fetch"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

const (
	fetchFiles         = 1000
	fetchBatchesPerObj = 1000 // fetchFiles × this = 1M batches in one partition
	fetchBatchBytes    = 1 << 10
	fetchMaxBytes      = 1 << 20
)

// fetchFixture builds a coordinator whose one partition holds 1M batches
// of 1 KiB in 1000 objects, and a fetch handler over it reading through a
// warm block cache.
func fetchFixture(b *testing.B, logAppendTime bool) (*fetch.Handler, diskless.Topic, []byte) {
	var obj []byte
	one := batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: make([]byte, fetchBatchBytes-80)})
	for range fetchBatchesPerObj {
		obj = append(obj, one...)
	}
	c, err := coordinator.Open(coordinator.Config{NumShards: 1, Logger: quiet, SnapshotIntervalRecords: -1,
		OpenLog: (&metalogtest.Memory{Discard: true}).Open})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	configs := map[string]string{}
	tsType := batch.TimestampCreateTime
	if logAppendTime {
		configs["message.timestamp.type"] = "LogAppendTime"
		tsType = batch.TimestampLogAppendTime
	}
	t, err := c.CreateTopic(context.Background(), "fetch", 1, configs)
	if err != nil {
		b.Fatal(err)
	}
	h := batch.Header(one)
	req := &diskless.CommitFileRequest{ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment,
		FileSize: int64(len(obj)), OwnerIDs: []int32{0}, Batches: make([]diskless.CommitBatch, fetchBatchesPerObj)}
	for i := range req.Batches {
		req.Batches[i] = diskless.CommitBatch{TopicID: t.ID, Magic: 2, ByteOffset: int32(i * len(one)), ByteSize: int32(len(one)),
			LastOffsetDelta: h.LastOffsetDelta(), BatchMaxTimestamp: h.MaxTimestamp(), TimestampType: tsType,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1}
	}
	for f := range fetchFiles {
		req.ObjectKey = fmt.Sprintf("wal/%08d", f)
		if _, err := c.CommitFile(context.Background(), 0, req); err != nil {
			b.Fatal(err)
		}
	}
	// Every object is the template: the index (1M batches) is real, and the
	// block cache holds each key's blocks as sub-slices of one template
	// buffer (Put does not copy), so the benchmark measures planning, the
	// cache's hit path and rewriting, not memory bandwidth over a GiB of
	// objects. Put blocks are this sidecar's own uploads: never read from
	// the store, they need no verification (DESIGN §Fetch step 3).
	cc, err := cache.New(cache.Config{MaxBytes: fetchFiles * cache.DefaultBlockBytes}, objstoretest.NewMemory())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	for f := range fetchFiles {
		cc.Put(fmt.Sprintf("wal/%08d", f), obj)
	}
	fh, err := fetch.New(fetch.Config{Logger: quiet, ReadConcurrency: 1}, c, cc)
	if err != nil {
		b.Fatal(err)
	}
	return fh, t, obj
}

// BenchmarkFetch measures a Fetch of up to 1 MiB from a random offset of a
// partition indexed by 1M batches: the coordinator lookup (binary search,
// budget), the read from the block cache (hits) into the response buffer
// and the header rewrite of the ~1000 batches returned; on LogAppendTime topics the rewrite also verifies
// and recomputes each CRC. floor-copy copies the same number of bytes.
func BenchmarkFetch(b *testing.B) {
	for _, lat := range []bool{false, true} {
		name := "CreateTime"
		if lat {
			name = "LogAppendTime"
		}
		b.Run(name, func(b *testing.B) {
			fh, t, obj := fetchFixture(b, lat)
			hwm := int64(fetchFiles * fetchBatchesPerObj)
			r := rand.New(rand.NewPCG(1, 2))
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.ReplicaID, req.MaxBytes, req.SessionEpoch = 16, -1, fetchMaxBytes, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.TopicID = t.ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = fetchMaxBytes, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			b.Run("fetch", func(b *testing.B) {
				var served int64
				b.ReportAllocs()
				for b.Loop() {
					req.Topics[0].Partitions[0].FetchOffset = r.Int64N(hwm - 2000)
					resp := fh.Fetch(context.Background(), req)
					p := &resp.Topics[0].Partitions[0]
					if p.ErrorCode != 0 || len(p.RecordBatches) < fetchMaxBytes/2 {
						b.Fatalf("error %d, %d bytes", p.ErrorCode, len(p.RecordBatches))
					}
					served += int64(len(p.RecordBatches))
				}
				b.SetBytes(served / int64(b.N))
			})
			b.Run("floor-copy", func(b *testing.B) {
				dst := make([]byte, fetchMaxBytes)
				b.SetBytes(fetchMaxBytes)
				b.ReportAllocs()
				for b.Loop() {
					copy(dst, obj[:fetchMaxBytes])
				}
			})
		})
	}
}

// BenchmarkCacheHit reads 1 MiB of a 8 MiB object from a warm block cache
// (4 MiB blocks, the default), beside its floor, a copy of the same bytes.
func BenchmarkCacheHit(b *testing.B) {
	obj := make([]byte, 8<<20)
	for i := range obj {
		obj[i] = byte(i)
	}
	c, err := cache.New(cache.Config{}, objstoretest.NewMemory())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Put("wal/obj", obj)
	buf := make([]byte, 1<<20)
	b.Run("hit", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		rs := []cache.Range{{P: buf}}
		for i := 0; b.Loop(); i++ {
			rs[0].Off = int64(i%7) << 20
			if err := c.ReadRanges(context.Background(), cache.Object{Key: "wal/obj", WrittenMs: -1}, rs, nil); err != nil {
				b.Fatal(err)
			}
		}
		if st := c.Stats(); st.StoreReads.Load() != 0 {
			b.Fatalf("%d store reads: the cache was not warm", st.StoreReads.Load())
		}
	})
	b.Run("floor-copy", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			off := (i % 7) << 20
			copy(buf, obj[off:])
		}
	})
}
