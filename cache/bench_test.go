package cache_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/objstore"
)

// BenchmarkCacheHit measures reads served entirely from cached blocks at the
// default block size: the lookup, LRU update and copy.
func BenchmarkCacheHit(b *testing.B) {
	const objSize = 8 << 20
	c, err := cache.New(cache.Config{}, objstore.NewMemory())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Put("wal/obj", make([]byte, objSize))
	for _, size := range []int{4 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("read=%dKiB", size>>10), func(b *testing.B) {
			p := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				if _, err := c.ReadAt(context.Background(), "wal/obj", p, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(size) + 4093) % (objSize - int64(size)) // unaligned, sometimes spanning
			}
		})
		b.Run(fmt.Sprintf("read=%dKiB/parallel", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				p := make([]byte, size)
				off := int64(0)
				for pb.Next() {
					if _, err := c.ReadAt(context.Background(), "wal/obj", p, off); err != nil {
						b.Fatal(err)
					}
					off = (off + int64(size) + 4093) % (objSize - int64(size))
				}
			})
		})
	}
}

// BenchmarkCacheMiss measures the cache's own cost of a miss (goroutine,
// block allocation, insertion, eviction) over an in-memory store, reading
// each 4 MiB block once.
func BenchmarkCacheMiss(b *testing.B) {
	s := objstore.NewMemory()
	const objSize = 64 << 20
	if err := s.Put(context.Background(), "wal/obj", make([]byte, objSize)); err != nil {
		b.Fatal(err)
	}
	c, err := cache.New(cache.Config{MaxBytes: cache.DefaultBlockBytes}, s) // every read misses
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p := make([]byte, 4<<10)
	b.SetBytes(cache.DefaultBlockBytes)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		if _, err := c.ReadAt(context.Background(), "wal/obj", p, off); err != nil {
			b.Fatal(err)
		}
		off = (off + cache.DefaultBlockBytes) % objSize
	}
}
