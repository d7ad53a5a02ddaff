package fetch

// A corrupt answer from the store never poisons the cache (issue 9, defect
// 1): the real fetch handler over a real coordinator and the real block
// cache, over an in-memory store that corrupts answers on demand and over
// the local directory store, whose files the tests damage and restore.
// These tests use only the packages' constructors and Fetch, so that they
// run unchanged against the code before verification.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/cache"
	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/objstore"
	"github.com/diskless-sidecar/sidecar/objstore/objstoretest"
)

// flipStore is a store whose next answers covering byte at of key get
// that byte flipped (the store's own bytes stay good), as a bit flip on the
// wire or a bad disk sector read would.
type flipStore struct {
	objstore.Store
	mu    sync.Mutex
	key   string
	at    int64
	times int // answers left to corrupt; −1: every one
}

func (s *flipStore) corrupt(key string, at int64, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key, s.at, s.times = key, at, times
}

func (s *flipStore) ReadRange(ctx context.Context, key string, off int64, p []byte) (int, int64, error) {
	n, size, err := s.Store.ReadRange(ctx, key, off, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.times != 0 && key == s.key && off <= s.at && s.at < off+int64(n) {
		p[s.at-off] ^= 0x40
		if s.times > 0 {
			s.times--
		}
	}
	return n, size, err
}

// corruptEnv is one sidecar's read path over store: 4 partitions of topic
// "t", each with one batch of 5 records in one object another sidecar
// uploaded (so the cache is cold, as after a restart).
type corruptEnv struct {
	h     *Handler
	cache *cache.Cache
	coord *coordinator.Coordinator
	key   string
	obj   []byte
	// at are the byte offsets of the partitions' batches in the object.
	at [4]int64
}

func newCorruptEnv(t *testing.T, store objstore.Store, logAppendTime bool) *corruptEnv {
	t.Helper()
	c, err := coordinator.Open(coordinator.Config{
		NumShards: 1, Logger: discardLogger, SnapshotIntervalRecords: -1,
		RetentionCheckInterval: -1, OrphanScanInterval: -1, OpenLog: new(metalogtest.Memory).Open,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	configs := map[string]string{}
	tsType := batch.TimestampCreateTime
	if logAppendTime {
		configs["message.timestamp.type"] = "LogAppendTime"
		tsType = batch.TimestampLogAppendTime
	}
	top, err := c.CreateTopic(context.Background(), "t", 4, configs)
	if err != nil {
		t.Fatal(err)
	}
	e := &corruptEnv{coord: c, key: "wal/0001"}
	now := time.Now().UnixMilli()
	req := &diskless.CommitFileRequest{ObjectKey: e.key, ObjectFormat: diskless.ObjectFormatWriteAheadMultiSegment, OwnerIDs: []int32{0}}
	for p := range int32(4) {
		b := makeBatch(t, batch.CodecNone, 100, now, now+1, now+2, now+3, now+4)
		e.at[p] = int64(len(e.obj))
		req.Batches = append(req.Batches, diskless.CommitBatch{
			TopicID: top.ID, Partition: p, Magic: 2, ByteOffset: int32(len(e.obj)), ByteSize: int32(len(b)),
			LastOffsetDelta: 4, BatchMaxTimestamp: batch.Header(b).MaxTimestamp(), TimestampType: tsType,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LastSequence: -1,
		})
		e.obj = append(e.obj, b...)
	}
	req.FileSize = int64(len(e.obj))
	if err := store.Put(context.Background(), e.key, e.obj); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitFile(context.Background(), 0, req); err != nil {
		t.Fatal(err)
	}
	if e.cache, err = cache.New(cache.Config{}, store); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cache.Close() })
	if e.h, err = New(Config{Logger: discardLogger}, c, e.cache); err != nil {
		t.Fatal(err)
	}
	return e
}

// fetch fetches partitions from offset 0 (v16, by topic id, no wait).
func (e *corruptEnv) fetch(t *testing.T, parts ...int32) []*kmsg.FetchResponseTopicPartition {
	t.Helper()
	top, _ := e.coord.Topic("t")
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxBytes, req.SessionEpoch = 16, 50<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = top.ID
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return flat(e.h.Fetch(context.Background(), req))
}

// good checks that p answered without error with its one batch, a valid
// CRC and the records the producer sent (the bytes after the header, which
// the fetch does not rewrite).
func (e *corruptEnv) good(t *testing.T, what string, p *kmsg.FetchResponseTopicPartition) {
	t.Helper()
	if p.ErrorCode != 0 {
		t.Fatalf("%s: partition %d answered error %d", what, p.Partition, p.ErrorCode)
	}
	h, n, err := batch.Parse(p.RecordBatches)
	if err != nil || n != len(p.RecordBatches) {
		t.Fatalf("%s: partition %d: %d bytes that are not one batch (%v)", what, p.Partition, len(p.RecordBatches), err)
	}
	if h.ComputeCRC() != h.CRC() {
		t.Fatalf("%s: partition %d: batch with a bad CRC served", what, p.Partition)
	}
	at := e.at[p.Partition]
	if want := e.obj[at+batch.HeaderSize : at+int64(n)]; !bytes.Equal(p.RecordBatches[batch.HeaderSize:], want) {
		t.Fatalf("%s: partition %d: records differ from the producer's", what, p.Partition)
	}
}

// TestCorruptAnswerNotCached is defect 1: one answer of the store with a
// byte flipped in partition 1's batch, then good answers. Every fetch of
// partition 1, the first included, succeeds with the producer's bytes, on
// CreateTime and LogAppendTime topics; the other partitions are not
// affected.
func TestCorruptAnswerNotCached(t *testing.T) {
	for _, lat := range []bool{false, true} {
		t.Run(fmt.Sprintf("LogAppendTime=%v", lat), func(t *testing.T) {
			store := &flipStore{Store: objstoretest.NewMemory()}
			e := newCorruptEnv(t, store, lat)
			store.corrupt(e.key, e.at[1]+batch.HeaderSize+3, 1) // inside the first record
			for i, p := range e.fetch(t, 0, 1, 2, 3) {
				e.good(t, "first fetch", p)
				if p.Partition != int32(i) {
					t.Fatalf("partition %d at %d", p.Partition, i)
				}
			}
			for i := range 10 {
				e.good(t, fmt.Sprintf("fetch %d of partition 1", i+2), e.fetch(t, 1)[0])
			}
		})
	}
}

// TestPersistentCorruptionCachesNothing: while every answer is corrupt,
// partition 1 answers CORRUPT_MESSAGE (each time read again, never served
// from a cached bad block), partition 0 is served; once the store answers
// right, partition 1 is served.
func TestPersistentCorruptionCachesNothing(t *testing.T) {
	for _, lat := range []bool{false, true} {
		t.Run(fmt.Sprintf("LogAppendTime=%v", lat), func(t *testing.T) {
			store := &flipStore{Store: objstoretest.NewMemory()}
			e := newCorruptEnv(t, store, lat)
			store.corrupt(e.key, e.at[1]+batch.HeaderSize+3, -1)
			for range 3 {
				ps := e.fetch(t, 0, 1)
				e.good(t, "while corrupt", ps[0])
				if ps[1].ErrorCode != kerr.CorruptMessage.Code {
					t.Fatalf("partition 1 while every answer is corrupt: error %d, %d bytes; want CORRUPT_MESSAGE",
						ps[1].ErrorCode, len(ps[1].RecordBatches))
				}
			}
			store.corrupt("", 0, 0)
			e.good(t, "after the store recovered", e.fetch(t, 1)[0])
		})
	}
}

// TestFileStoreCorruptionNotCached is defect 1 on the local directory
// store: the object's file damaged (a byte flipped, then cut short) and
// restored. While damaged, partition 1 answers CORRUPT_MESSAGE (flipped)
// or KAFKA_STORAGE_ERROR (truncated: the object is shorter than its
// commit says); once the file is restored every partition is served —
// neither a bad block nor a false end of the object stays cached.
func TestFileStoreCorruptionNotCached(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(obj []byte, at [4]int64) []byte
		errc   *kerr.Error
		parts  []int32 // partitions fetched while damaged
	}{
		{"byte flipped", func(obj []byte, at [4]int64) []byte {
			b := bytes.Clone(obj)
			b[at[1]+batch.HeaderSize+3] ^= 0x40
			return b
		}, kerr.CorruptMessage, []int32{1}},
		{"truncated in partition 1", func(obj []byte, at [4]int64) []byte {
			return bytes.Clone(obj[:at[1]+10])
		}, kerr.KafkaStorageError, []int32{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir, err := objstore.NewDir(root)
			if err != nil {
				t.Fatal(err)
			}
			e := newCorruptEnv(t, dir, false)
			path := filepath.Join(root, filepath.FromSlash(e.key))
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the object's file: %v", err)
			}
			if err := os.WriteFile(path, tc.damage(e.obj, e.at), 0o644); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				for _, p := range e.fetch(t, tc.parts...) {
					if p.ErrorCode != tc.errc.Code {
						t.Fatalf("partition %d while the file is damaged: error %d; want %s", p.Partition, p.ErrorCode, tc.errc.Message)
					}
				}
			}
			if err := os.WriteFile(path, e.obj, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, p := range e.fetch(t, 0, 1, 2, 3) {
				e.good(t, "after the file was restored", p)
			}
		})
	}
}
