package cache_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// BenchmarkCacheHit measures reads served entirely from cached blocks at the
// default block size: the lookup, LRU update and copy. Each is one range of
// ReadRanges with no commit time (through the blocks).
func BenchmarkCacheHit(b *testing.B) {
	const objSize = 8 << 20
	c, err := cache.New(cache.Config{}, objstoretest.NewMemory())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Put("wal/obj", make([]byte, objSize))
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("read=%dKiB", size>>10), func(b *testing.B) {
			rs := []cache.Range{{P: make([]byte, size)}}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.ReadRanges(context.Background(), cache.Object{Key: "wal/obj", WrittenMs: -1}, rs, nil); err != nil {
					b.Fatal(err)
				}
				rs[0].Off = (rs[0].Off + int64(size) + 4093) % (objSize - int64(size)) // unaligned, sometimes spanning
			}
		})
		b.Run(fmt.Sprintf("read=%dKiB/parallel", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				rs := []cache.Range{{P: make([]byte, size)}}
				for pb.Next() {
					if err := c.ReadRanges(context.Background(), cache.Object{Key: "wal/obj", WrittenMs: -1}, rs, nil); err != nil {
						b.Fatal(err)
					}
					rs[0].Off = (rs[0].Off + int64(size) + 4093) % (objSize - int64(size))
				}
			})
		})
	}
}

// BenchmarkCacheMiss measures the cache's own cost of a miss (goroutine,
// block allocation, insertion, eviction) over an in-memory store, reading
// each 4 MiB block once.
func BenchmarkCacheMiss(b *testing.B) {
	s := objstoretest.NewMemory()
	const objSize = 64 << 20
	if err := s.Put(context.Background(), "wal/obj", make([]byte, objSize)); err != nil {
		b.Fatal(err)
	}
	c, err := cache.New(cache.Config{MaxBytes: cache.DefaultBlockBytes}, s) // every read misses
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	rs := []cache.Range{{P: make([]byte, 4<<10)}}
	b.SetBytes(cache.DefaultBlockBytes)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.ReadRanges(context.Background(), cache.Object{Key: "wal/obj", WrittenMs: -1}, rs, nil); err != nil {
			b.Fatal(err)
		}
		rs[0].Off = (rs[0].Off + cache.DefaultBlockBytes) % objSize
	}
}

// BenchmarkCacheBypass measures the cache's own cost of a read older than
// its reach (the decision under the lock, one ranged read straight into the
// caller's buffer, the counters) over an in-memory store, against the
// store read alone. One range is read straight into its buffer; several
// within a block of each other are read with one bounding read and copied.
func BenchmarkCacheBypass(b *testing.B) {
	s := objstoretest.NewMemory()
	const objSize = 8 << 20
	if err := s.Put(context.Background(), "wal/old", make([]byte, objSize)); err != nil {
		b.Fatal(err)
	}
	ms := int64(1_000_000)
	now := func() time.Time { return time.UnixMilli(ms) }
	c, err := cache.New(cache.Config{MaxBytes: 2 * cache.DefaultBlockBytes, Now: now}, s)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Put("wal/hot", make([]byte, 2*cache.DefaultBlockBytes)) // full, last used at ms
	const size = 1 << 20
	b.Run("one-range", func(b *testing.B) {
		rs := []cache.Range{{P: make([]byte, size)}}
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.ReadRanges(context.Background(), cache.Object{Key: "wal/old", WrittenMs: ms - 1}, rs, nil); err != nil {
				b.Fatal(err)
			}
			rs[0].Off = (rs[0].Off + size) % (objSize - size)
		}
	})
	b.Run("four-ranges", func(b *testing.B) {
		rs := make([]cache.Range, 4)
		for i := range rs {
			rs[i] = cache.Range{Off: int64(i) * size / 4, P: make([]byte, size/4)}
		}
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.ReadRanges(context.Background(), cache.Object{Key: "wal/old", WrittenMs: ms - 1}, rs, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor-store", func(b *testing.B) {
		p := make([]byte, size)
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.ReadRange(context.Background(), "wal/old", 0, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	if st := c.Stats(); st.Evictions.Load() != 0 || st.BypassReads.Load() == 0 {
		b.Fatalf("%d evictions, %d bypassed reads: the benchmark did not bypass", st.Evictions.Load(), st.BypassReads.Load())
	}
}

// crcChecker checks a range the way fetch's batch check costs: one
// CRC-32C pass over its bytes.
type crcChecker struct{ sum uint32 }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c *crcChecker) Check(_ int, p []byte) error {
	c.sum ^= crc32.Checksum(p, castagnoli)
	return nil
}

// BenchmarkCacheChecked measures reads with a Checker (as fetch reads):
// "first-read" loads each 4 MiB block from the in-memory store and checks
// the 1 MiB range read from it (verification on top of BenchmarkCacheMiss);
// "verified-hit" reads ranges already checked, which are not checked
// again, beside "unchecked-hit", the same hits read without a Checker.
func BenchmarkCacheChecked(b *testing.B) {
	const objSize, size = 16 << 20, 1 << 20
	s := objstoretest.NewMemory()
	if err := s.Put(context.Background(), "wal/obj", make([]byte, objSize)); err != nil {
		b.Fatal(err)
	}
	obj := cache.Object{Key: "wal/obj", Size: objSize, WrittenMs: -1}
	b.Run("first-read", func(b *testing.B) {
		c, err := cache.New(cache.Config{MaxBytes: cache.DefaultBlockBytes}, s) // every read misses
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		rs := []cache.Range{{P: make([]byte, size)}}
		ck := &crcChecker{}
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.ReadRanges(context.Background(), obj, rs, ck); err != nil {
				b.Fatal(err)
			}
			rs[0].Off = (rs[0].Off + cache.DefaultBlockBytes) % objSize
		}
	})
	c, err := cache.New(cache.Config{MaxBytes: objSize}, s)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ck := &crcChecker{}
	for off := int64(0); off < objSize; off += size { // load and check everything
		if err := c.ReadRanges(context.Background(), obj, []cache.Range{{Off: off, P: make([]byte, size)}}, ck); err != nil {
			b.Fatal(err)
		}
	}
	for _, checked := range []bool{true, false} {
		name, chk := "verified-hit", cache.Checker(ck)
		if !checked {
			name, chk = "unchecked-hit", nil
		}
		b.Run(name, func(b *testing.B) {
			rs := []cache.Range{{P: make([]byte, size)}}
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				if err := c.ReadRanges(context.Background(), obj, rs, chk); err != nil {
					b.Fatal(err)
				}
				rs[0].Off = (rs[0].Off + size + 4093) % (objSize - size)
			}
		})
	}
	if st := c.Stats(); st.StoreReads.Load() != objSize/cache.DefaultBlockBytes {
		b.Fatalf("%d store reads: hits were not hits", st.StoreReads.Load())
	}
}
