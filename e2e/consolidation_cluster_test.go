package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/history"
	"github.com/diskless-sidecar/sidecar/peer"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
	"github.com/diskless-sidecar/sidecar/segment"
)

// walObjectKeys returns the keys of the WAL objects in st's bucket
// (snapshot objects of the Kafka metadata log and versitygw's own hidden
// directories aside; segment objects told apart by their trailer,
// segment.Is) and how many segment objects it holds.
func walObjectKeys(t *testing.T, st *S3Store) (wal []string, segments int) {
	t.Helper()
	root := filepath.Join(st.GW.Root, st.Bucket)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // deleted while listed
			}
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "snapshots") {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if segment.Is(b) {
			segments++
			return nil
		}
		rel, err := filepath.Rel(filepath.Join(root, st.Prefix), path)
		if err != nil {
			return err
		}
		wal = append(wal, filepath.ToSlash(rel))
		return nil
	})
	mustNoErr(t, "listing the bucket", err)
	return wal, segments
}

// hostOf returns the live sidecar hosting shard, or nil.
func (sc *sidecarCluster) hostOf(shard int) *Sidecar {
	for _, s := range sc.scs {
		if s.Alive() && sc.hostingNow(s)[shard] {
			return s
		}
	}
	return nil
}

// consolidatedNow reports, from the shards' hosts (DisklessFindBatches,
// DisklessDescribeFiles), whether every partition of topic up to end is
// in segment objects and no shard has live batches in any WAL object
// left in the bucket (each of them released, or closed, by a shard that
// knows it: the file lifecycle deletes them, a WAL object of several
// owners once the orphan grace period has passed since its commit). why
// says what is missing.
func (sc *sidecarCluster) consolidatedNow(ctx context.Context, pc *peer.Client, tid diskless.TopicID, partitions int32, end map[int32]int64) (ok bool, why string) {
	t := sc.t
	for p := range partitions {
		shard := diskless.ShardFor(tid, p, clusterShards)
		host := sc.hostOf(int(shard))
		if host == nil {
			return false, fmt.Sprintf("shard %d not hosted", shard)
		}
		fb := rpcmsg.NewFindBatchesRequest()
		fb.TimeoutMs, fb.ShardID = 5000, shard
		fb.Partitions = []rpcmsg.FindBatchesPartition{{TopicID: tid, Partition: p, Offset: 0, MaxBytes: 1 << 30}}
		resp, err := pc.Request(ctx, host.Addr, fb)
		if err != nil {
			return false, fmt.Sprintf("FindBatches of partition %d: %v", p, err)
		}
		fr := resp.(*rpcmsg.FindBatchesResponse)
		if fr.ErrorCode != 0 || fr.Partitions[0].ErrorCode != 0 {
			return false, fmt.Sprintf("FindBatches of partition %d: %+v", p, fr)
		}
		r := fr.Partitions[0]
		if r.HighWatermark < end[p] {
			t.Fatalf("partition %d: high watermark %d below the %d acknowledged", p, r.HighWatermark, end[p])
		}
		next := int64(0)
		for _, run := range r.Runs {
			if run.BaseOffset != next {
				t.Fatalf("partition %d: a run from %d after offset %d", p, run.BaseOffset, next-1)
			}
			if fr.Objects[run.ObjectIndex].ObjectFormat != 2 {
				return false, fmt.Sprintf("partition %d: offsets %d–%d in WAL object %s", p, run.BaseOffset, run.LastOffset, fr.Objects[run.ObjectIndex].ObjectKey)
			}
			next = run.LastOffset + 1
		}
		if next != r.HighWatermark {
			t.Fatalf("partition %d: runs end at %d, high watermark %d", p, next, r.HighWatermark)
		}
	}
	keys, _ := walObjectKeys(t, sc.s3)
	if len(keys) == 0 {
		return true, ""
	}
	released := make(map[string]bool)
	for shard := range clusterShards {
		host := sc.hostOf(shard)
		if host == nil {
			return false, fmt.Sprintf("shard %d not hosted", shard)
		}
		df := rpcmsg.NewDescribeFilesRequest()
		df.ShardID, df.ObjectKeys = int32(shard), keys
		resp, err := pc.Request(ctx, host.Addr, df)
		if err != nil {
			return false, fmt.Sprintf("DescribeFiles of shard %d: %v", shard, err)
		}
		for i, f := range resp.(*rpcmsg.DescribeFilesResponse).Files {
			switch {
			case f.ErrorCode != 0:
				return false, fmt.Sprintf("DescribeFiles of shard %d: %s: error %d", shard, keys[i], f.ErrorCode)
			case f.HasLiveBatches || f.State == int8(diskless.FileLive):
				return false, fmt.Sprintf("shard %d has live batches in WAL object %s", shard, keys[i])
			case f.State == int8(diskless.FileReleased) || f.State == int8(diskless.FileClosed):
				released[keys[i]] = true
			}
		}
	}
	// An object unknown to every shard holds nothing committed (a hedged
	// upload's loser not yet deleted, an upload whose commit failed): the
	// orphan scan's, not consolidation's.
	if n := len(keys) - len(released); n > 0 {
		t.Logf("%d of the %d WAL objects in the bucket known to no shard", n, len(keys))
	}
	return true, ""
}

// waitConsolidated waits until consolidatedNow holds and returns the
// WAL objects still stored (released, waiting for the file lifecycle)
// and the segment objects.
func (sc *sidecarCluster) waitConsolidated(ctx context.Context, pc *peer.Client, tid diskless.TopicID, partitions int32, end map[int32]int64) (wal, segments int) {
	sc.t.Helper()
	for {
		ok, why := sc.consolidatedNow(ctx, pc, tid, partitions, end)
		if ok {
			keys, segs := walObjectKeys(sc.t, sc.s3)
			return len(keys), segs
		}
		select {
		case <-ctx.Done():
			sc.t.Fatalf("not consolidated: %s", why)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// TestClusterConsolidation: consolidation in a cluster of three sidecars
// on the Kafka metadata log (diskless.metadata.log=kafka, six shards over
// the three) and one S3 bucket. Producers through every sidecar; each
// shard's owner consolidates its partitions: every partition's records
// end up in segment objects (FindBatches from the shard's host) and no
// shard has live batches in any WAL object left (DescribeFiles; the file
// lifecycle deletes them, one of several owners only once the orphan
// grace period has passed since its commit, at least 10 minutes, which
// TestSharedFileDeletion covers). Then the sidecar hosting the most
// shards is SIGKILLed, more records are produced through the others, and
// the shards' new owners consolidate them in turn. Every acknowledged
// record is read back once, at its offset, through two sidecars
// (internal/history), across the boundary between the two owners'
// segments.
func TestClusterConsolidation(t *testing.T) {
	t.Parallel()
	cl := startSidecarCluster(t, 3, consolidationSets...)
	ctx := testCtx(t, 8*time.Minute)
	const topic, partitions = "cons-cluster", 8
	resp, err := kadm.NewClient(cl.scs[1].Client()).CreateTopic(ctx, partitions, 1, nil, topic)
	mustNoErr(t, "CreateTopic", err)
	mustNoErr(t, "CreateTopic "+topic, resp.Err)
	tid := diskless.TopicID(resp.ID)
	pc := peer.NewClient(peer.ClientConfig{})
	defer pc.Close()
	h := history.New()
	produce := func(ids []int32, phase string, n int64) map[int32]int64 {
		t.Helper()
		var ps []*hproducer
		for _, id := range ids {
			ps = append(ps, startProducer(ctx, cl.scs[id], h, fmt.Sprintf("%s-p%d", phase, id), topic, partitions,
				kgo.RecordDeliveryTimeout(30*time.Second)))
		}
		for _, p := range ps {
			p.waitAcked(t, ctx, n)
		}
		for _, p := range ps {
			p.stopProducing()
		}
		ends, err := kadm.NewClient(cl.scs[ids[0]].Client()).ListEndOffsets(ctx, topic)
		mustNoErr(t, "ListEndOffsets", err)
		end := make(map[int32]int64)
		for p := range int32(partitions) {
			o, ok := ends.Lookup(topic, p)
			if !ok || o.Err != nil {
				t.Fatalf("end offset of partition %d: %+v", p, o)
			}
			end[p] = o.Offset
		}
		return end
	}
	committed := func(ids []int32) (segs, failures float64) {
		for _, id := range ids {
			segs += metricValueOf(t, cl.scs[id], "diskless_consolidation_segments_committed_total")
			failures += metricValueOf(t, cl.scs[id], "diskless_consolidation_failures_total")
		}
		return segs, failures
	}

	end := produce([]int32{1, 2, 3}, "one", 1_000)
	wal, segs := cl.waitConsolidated(ctx, pc, tid, partitions, end)
	committedBy := map[int32]float64{}
	for id, s := range cl.scs {
		committedBy[id] = metricValueOf(t, s, "diskless_consolidation_segments_committed_total")
	}
	t.Logf("phase one consolidated: %d segment objects, %d released WAL objects waiting; segments committed per sidecar %v", segs, wal, committedBy)
	if n, f := committed([]int32{1, 2, 3}); n < partitions || f != 0 {
		t.Fatalf("%v segments committed, %v failures; want every partition's at least, no failure", n, f)
	}

	// The sidecar hosting the most shards dies; the others take them over
	// and consolidate what is produced next.
	victim, most := int32(0), -1
	for id, s := range cl.scs {
		if n := len(cl.hostingNow(s)); n > most {
			victim, most = id, n
		}
	}
	var live []int32
	for _, id := range []int32{1, 2, 3} {
		if id != victim {
			live = append(live, id)
		}
	}
	cl.scs[victim].Kill()
	cl.waitBrokers(live...)
	t.Logf("sidecar %d (hosting %d shards) SIGKILLed", victim, most)
	before, _ := committed(live)
	end = produce(live, "two", 1_000)
	wal, segs = cl.waitConsolidated(ctx, pc, tid, partitions, end)
	after, failures := committed(live)
	t.Logf("phase two consolidated: %d segment objects, %d released WAL objects waiting; %v segments committed by the survivors", segs, wal, after-before)
	if after-before < partitions || failures != 0 {
		t.Fatalf("the survivors committed %v segments after the kill, %v failures; want every partition's at least, no failure", after-before, failures)
	}

	finalRead(t, ctx, cl.scs[live[0]], topic, partitions, h)
	finalRead(t, ctx, cl.scs[live[1]], topic, partitions, history.New())
}
