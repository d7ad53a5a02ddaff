package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/batchtest"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// clusterFileSets are TestCluster's settings for SharedFileDeletion: the
// least orphan grace period (a file of several owners is deleted no sooner
// after its commit), released objects deleted 2 s after the last owner
// released them (passes every second), an orphan scan every 2 s, and no
// consolidation (its default min age, 5 min, is shorter than the wait: it
// would move the live batch out of the shared object and release it).
var clusterFileSets = []string{
	"diskless.consolidation.enable=false",
	"diskless.coordinator.orphan.scan.grace.period.ms=600000",
	"diskless.file.deletion.delay.ms=2000",
	"diskless.coordinator.orphan.scan.interval.ms=2000",
}

// clusterFileGrace is diskless.coordinator.orphan.scan.grace.period.ms in
// clusterFileSets.
const clusterFileGrace = 10 * time.Minute

// sharedFiles is SharedFileDeletion's state between its two halves: two
// WAL objects, each written by one produce request holding batches of two
// shards hosted by different sidecars, lower < higher.
//
//   - kept holds offset 0 of partitions pLow (shard lower) and pHigh
//     (shard higher);
//   - control, committed after it, holds offset 1 of pLow and offset 0 of
//     pControl (shard higher).
//
// DeleteRecords then released every batch of control and lower's batch of
// kept: higher still has a live batch in kept.
type sharedFiles struct {
	topic                 string
	tid                   diskless.TopicID
	lower, higher         int32
	pLow, pHigh, pControl int32
	kept, control         string
	committed             time.Time // before kept's commit
	value                 []byte    // pHigh's record in kept
}

// startSharedFiles is SharedFileDeletion's first half, run before
// TestCluster's other subtests so that most of the orphan grace period
// (which a file of several owners waits for after its commit) passes
// while they run.
func startSharedFiles(t *testing.T, cl *sidecarCluster) *sharedFiles {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	f := &sharedFiles{topic: "cluster-shared-files"}
	const partitions = 24
	createTopic(t, ctx, cl.scs[1], f.topic, partitions, nil)
	var ok bool
	for !ok {
		if f.tid, ok = topicOf(ctx, cl.scs[1], f.topic); !ok {
			if ctx.Err() != nil {
				t.Fatalf("topic %s not in Metadata", f.topic)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	byShard := map[int32][]int32{}
	for p := range int32(partitions) {
		sh := diskless.ShardFor(f.tid, p, clusterShards)
		byShard[sh] = append(byShard[sh], p)
	}
	// Two shards on different sidecars, the higher with two partitions.
	f.lower, f.higher = -1, -1
	for lo := range int32(clusterShards) {
		for hi := lo + 1; hi < clusterShards && f.lower < 0; hi++ {
			hl, hh := cl.hostOf(int(lo)), cl.hostOf(int(hi))
			if len(byShard[lo]) > 0 && len(byShard[hi]) > 1 && hl != nil && hh != nil && hl != hh {
				f.lower, f.higher = lo, hi
			}
		}
	}
	if f.lower < 0 {
		t.Fatalf("no two shards of %s on different sidecars (partitions by shard %v)", f.topic, byShard)
	}
	f.pLow, f.pHigh, f.pControl = byShard[f.lower][0], byShard[f.higher][0], byShard[f.higher][1]
	t.Logf("shard %d (partition %d) on %s, shard %d (partitions %d, %d) on %s", f.lower, f.pLow, cl.hostOf(int(f.lower)).Addr,
		f.higher, f.pHigh, f.pControl, cl.hostOf(int(f.higher)).Addr)

	// One produce request each, through the third sidecar when there is
	// one: one WAL object each, committed to both owners over the RPCs.
	via := cl.hostingNeither(f.lower, f.higher)
	rc := via.DialRaw()
	f.value = []byte("kept-high-0")
	f.committed = time.Now()
	produceShared(t, rc, f.topic, map[int32][]byte{
		f.pLow:  batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("kept-low", 1)...),
		f.pHigh: batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Record{Value: f.value}),
	}, map[int32]int64{f.pLow: 0, f.pHigh: 0})
	produceShared(t, rc, f.topic, map[int32][]byte{
		f.pLow:     batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("control-low", 1)...),
		f.pControl: batchtest.Make(batchtest.Plain(time.Now().UnixMilli()), batchtest.Values("control-high", 1)...),
	}, map[int32]int64{f.pLow: 1, f.pControl: 0})

	pc := peer.NewClient(peer.ClientConfig{})
	defer pc.Close()
	keyOf := func(p int32, offset int64) string {
		return cl.objectOf(ctx, pc, f.tid, p, offset)
	}
	f.kept, f.control = keyOf(f.pLow, 0), keyOf(f.pLow, 1)
	if k := keyOf(f.pHigh, 0); k != f.kept || f.kept == f.control {
		t.Fatalf("partition %d offset 0 in %s, partition %d offset 0 in %s, partition %d offset 1 in %s: want the first two in one object, the third in another",
			f.pLow, f.kept, f.pHigh, k, f.pLow, f.control)
	}
	if k := keyOf(f.pControl, 0); k != f.control {
		t.Fatalf("partition %d offset 0 in %s, want %s with partition %d offset 1", f.pControl, k, f.control, f.pLow)
	}
	f.deleteRecords(t, ctx, cl, map[int32]int64{f.pLow: 2, f.pControl: 1})
	t.Logf("objects %s (kept: shard %d released, shard %d live) and %s (control: both released)", f.kept, f.lower, f.higher, f.control)
	return f
}

// hostingNeither returns a sidecar hosting neither shard a nor b when
// there is one, else sidecar 1.
func (sc *sidecarCluster) hostingNeither(a, b int32) *Sidecar {
	via := sc.scs[1]
	for _, s := range sc.scs {
		if s != sc.hostOf(int(a)) && s != sc.hostOf(int(b)) {
			via = s
		}
	}
	return via
}

// produceShared sends one Produce request with a batch per partition and
// checks each is stored at its base offset.
func produceShared(t *testing.T, rc *RawConn, topic string, batches map[int32][]byte, bases map[int32]int64) {
	t.Helper()
	resp := rc.Request(produceRequestTo(topic, batches)).(*kmsg.ProduceResponse)
	for _, tr := range resp.Topics {
		for _, p := range tr.Partitions {
			if p.ErrorCode != 0 || p.BaseOffset != bases[p.Partition] {
				t.Fatalf("produce to partition %d: error %d, base offset %d; want %d", p.Partition, p.ErrorCode, p.BaseOffset, bases[p.Partition])
			}
		}
	}
}

// objectOf returns the key of the object holding offset of partition p
// of topic tid, from FindBatches of the partition's shard host.
func (sc *sidecarCluster) objectOf(ctx context.Context, pc *peer.Client, tid diskless.TopicID, p int32, offset int64) string {
	t := sc.t
	shard := diskless.ShardFor(tid, p, clusterShards)
	host := sc.hostOf(int(shard))
	if host == nil {
		t.Fatalf("shard %d not hosted", shard)
	}
	fb := rpcmsg.NewFindBatchesRequest()
	fb.TimeoutMs, fb.ShardID = 5000, shard
	fb.Partitions = []rpcmsg.FindBatchesPartition{{TopicID: tid, Partition: p, Offset: offset, MaxBytes: 1 << 20}}
	resp, err := pc.Request(ctx, host.Addr, fb)
	mustNoErr(t, fmt.Sprintf("FindBatches of partition %d", p), err)
	fr := resp.(*rpcmsg.FindBatchesResponse)
	if fr.ErrorCode != 0 || fr.Partitions[0].ErrorCode != 0 || len(fr.Partitions[0].Runs) == 0 {
		t.Fatalf("FindBatches of partition %d at %d: %+v", p, offset, fr)
	}
	r := fr.Partitions[0].Runs[0]
	if r.BaseOffset > offset || r.LastOffset < offset {
		t.Fatalf("FindBatches of partition %d at %d: a run of %d–%d", p, offset, r.BaseOffset, r.LastOffset)
	}
	return fr.Objects[r.ObjectIndex].ObjectKey
}

// deleteRecords moves the log starts of f's partitions (DeleteRecords).
func (f *sharedFiles) deleteRecords(t *testing.T, ctx context.Context, cl *sidecarCluster, to map[int32]int64) {
	t.Helper()
	var offs kadm.Offsets
	for p, o := range to {
		offs.Add(kadm.Offset{Topic: f.topic, Partition: p, At: o})
	}
	dr, err := kadm.NewClient(cl.scs[1].Client()).DeleteRecords(ctx, offs)
	mustNoErr(t, "DeleteRecords", err)
	for p, o := range to {
		if r, ok := dr.Lookup(f.topic, p); !ok || r.Err != nil || r.LowWatermark != o {
			t.Fatalf("DeleteRecords of partition %d to %d: %+v", p, o, r)
		}
	}
}

// fileStates returns what shard's host answers DescribeFiles of keys,
// asking again while the shard is between hosts (the shared Kafka's
// leaders move when other tests kill brokers).
func (sc *sidecarCluster) fileStates(ctx context.Context, pc *peer.Client, shard int32, keys ...string) []diskless.FileState {
	t := sc.t
	for {
		why := ""
		if host := sc.hostOf(int(shard)); host == nil {
			why = "not hosted"
		} else {
			df := rpcmsg.NewDescribeFilesRequest()
			df.ShardID, df.ObjectKeys = shard, keys
			resp, err := pc.Request(ctx, host.Addr, df)
			if err == nil {
				var out []diskless.FileState
				for _, fl := range resp.(*rpcmsg.DescribeFilesResponse).Files {
					if fl.ErrorCode != 0 {
						err = fmt.Errorf("%s: %w", fl.ObjectKey, kerr.ErrorForCode(fl.ErrorCode))
						break
					}
					out = append(out, diskless.FileState(fl.State))
				}
				if err == nil {
					return out
				}
			}
			if !kerr.IsRetriable(err) && !errors.Is(err, kerr.NotCoordinator) && !errors.Is(err, kerr.CoordinatorLoadInProgress) {
				t.Fatalf("DescribeFiles of shard %d on %s: %v", shard, host.Addr, err)
			}
			why = err.Error()
		}
		if ctx.Err() != nil {
			t.Fatalf("DescribeFiles of shard %d: %s", shard, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stored reports whether key is in the bucket (versitygw's directory).
func (sc *sidecarCluster) stored(key string) bool {
	keys, _ := walObjectKeys(sc.t, sc.s3)
	return slices.Contains(keys, key)
}

// testSharedFileDeletion is SharedFileDeletion's second half (TestCluster).
func testSharedFileDeletion(t *testing.T, cl *sidecarCluster, f *sharedFiles) {
	ctx := testCtx(t, clusterFileGrace+5*time.Minute)
	cl.waitSettled()
	pc := peer.NewClient(peer.ClientConfig{})
	defer pc.Close()
	if hl, hh := cl.hostOf(int(f.lower)), cl.hostOf(int(f.higher)); hl == hh {
		// Their metadata partitions' leaders moved (other tests kill
		// the shared Kafka's brokers): the deleter asks on its own
		// sidecar now, through the same router.
		t.Logf("shards %d and %d both on %s now", f.lower, f.higher, hl.Addr)
	}

	// The control object goes once the grace period has passed since its
	// commit; kept, committed before it, was due as early — but for shard
	// higher's live batch, which lower's host learns of only by asking
	// higher's (DescribeFiles over the RPC).
	if !cl.stored(f.kept) || !cl.stored(f.control) {
		t.Fatalf("before the grace period: kept stored %v, control stored %v", cl.stored(f.kept), cl.stored(f.control))
	}
	for cl.stored(f.control) {
		if ctx.Err() != nil {
			t.Fatalf("the control object %s (every batch released) still stored %v after its commit", f.control, time.Since(f.committed).Round(time.Second))
		}
		time.Sleep(500 * time.Millisecond)
	}
	goneAfter := time.Since(f.committed)
	if goneAfter < clusterFileGrace {
		t.Fatalf("the control object, of two owners, deleted %v after its commit, within the grace period", goneAfter.Round(time.Millisecond))
	}
	// One more pass of the deleter (every second) for good measure.
	time.Sleep(3 * time.Second)
	if !cl.stored(f.kept) {
		t.Fatalf("object %s deleted while shard %d (on another sidecar) has a live batch in it", f.kept, f.higher)
	}
	if st := cl.fileStates(ctx, pc, f.lower, f.kept, f.control); st[0] != diskless.FileReleased || st[1] != diskless.FileClosed {
		t.Fatalf("shard %d: kept %v, control %v; want released, closed", f.lower, st[0], st[1])
	}
	if st := cl.fileStates(ctx, pc, f.higher, f.kept, f.control); st[0] != diskless.FileLive || st[1] != diskless.FileClosed {
		t.Fatalf("shard %d: kept %v, control %v; want live, closed", f.higher, st[0], st[1])
	}
	// Readable, through a sidecar hosting neither shard when there is one.
	via := cl.hostingNeither(f.lower, f.higher)
	r := fetchRaw(t, via.DialRaw(), f.topic, f.pHigh, 0, 1<<20, 0)
	if bases, _ := batchesIn(t, r.RecordBatches); r.ErrorCode != 0 || !slices.Equal(bases, []int64{0}) || !bytes.Contains(r.RecordBatches, f.value) {
		t.Fatalf("fetch of partition %d at 0: error %d, batches %v; want its record %q", f.pHigh, r.ErrorCode, bases, f.value)
	}
	t.Logf("control object deleted %v after its commit; the shared one kept while shard %d's batch lives, and read", goneAfter.Round(time.Second), f.higher)

	// The last live batch goes: the object goes within the deletion delay
	// (2 s) and a pass or two.
	f.deleteRecords(t, ctx, cl, map[int32]int64{f.pHigh: 1})
	released := time.Now()
	for cl.stored(f.kept) {
		if time.Since(released) > 30*time.Second {
			t.Fatalf("object %s still stored %v after its last batch was deleted", f.kept, time.Since(released).Round(time.Millisecond))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the shared object deleted %v after its last batch", time.Since(released).Round(time.Millisecond))
	for _, sh := range []int32{f.lower, f.higher} {
		for ctx.Err() == nil && cl.fileStates(ctx, pc, sh, f.kept)[0] != diskless.FileClosed {
			time.Sleep(100 * time.Millisecond)
		}
		if st := cl.fileStates(ctx, pc, sh, f.kept)[0]; st != diskless.FileClosed {
			t.Fatalf("shard %d: the deleted object %v, want closed", sh, st)
		}
	}

	// One orphan scan per cluster: only shard 0's host scans, while
	// shard 0 stays where it is.
	for attempt := 0; ; attempt++ {
		scans := map[int32]float64{}
		for id, s := range cl.scs {
			scans[id] = metricValueOf(t, s, "diskless_orphan_scans_total")
		}
		owner, ownerID := cl.hostOf(0), int32(-1)
		for id, s := range cl.scs {
			if s == owner {
				ownerID = id
			}
		}
		if ownerID < 0 {
			t.Fatalf("shard 0 not hosted")
		}
		waitMetric(t, ctx, owner, "diskless_orphan_scans_total", scans[ownerID]+2)
		if cl.hostOf(0) != owner && attempt < 3 {
			continue // moved meanwhile: its new host scans from now on
		}
		for id, s := range cl.scs {
			if n := metricValueOf(t, s, "diskless_orphan_scans_total"); id != ownerID && n != scans[id] {
				t.Fatalf("sidecar %d, not hosting shard 0, ran %v orphan scans while sidecar %d ran two", id, n-scans[id], ownerID)
			}
		}
		t.Logf("two orphan scans on sidecar %d (hosting shard 0), none on the others", ownerID)
		return
	}
}
