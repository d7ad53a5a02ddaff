package cache_test

import (
	"context"
	"fmt"
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
				if err := c.ReadRanges(context.Background(), "wal/obj", -1, rs); err != nil {
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
					if err := c.ReadRanges(context.Background(), "wal/obj", -1, rs); err != nil {
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
		if err := c.ReadRanges(context.Background(), "wal/obj", -1, rs); err != nil {
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
			if err := c.ReadRanges(context.Background(), "wal/old", ms-1, rs); err != nil {
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
			if err := c.ReadRanges(context.Background(), "wal/old", ms-1, rs); err != nil {
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
