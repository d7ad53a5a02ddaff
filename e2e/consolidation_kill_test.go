package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/history"
	"github.com/diskless-sidecar/sidecar/internal/s3fault"
	"github.com/diskless-sidecar/sidecar/internal/versitygw"
)

// TestConsolidationSIGKILL kills the sidecar (SIGKILL) at each step of a
// consolidation, on S3 (versitygw behind the fault proxy), and restarts it
// on the same data.dir:
//
//   - segment uploaded: the proxy holds the answer to the segment's PUT —
//     the object is stored, its record 114 never written;
//   - record committed: a segment is swapped in (record 114 durable) and
//     its WAL objects released, not deleted (a long deletion delay);
//   - WAL object released: the proxy holds the answer to a WAL object's
//     DELETE — the object is gone, its record 106 never written.
//
// After the restart everything left is consolidated and deleted; every
// acknowledged record is read back once, at its offset
// (internal/history: nothing lost, moved or duplicated, no gap), and once
// the objects are older than the orphan grace period (their mtimes set two
// hours back: versitygw answers a file's mtime as the object's) the
// orphan scan has deleted the uploaded segment no record names, and
// `sidecar object-store orphans` finds none.
func TestConsolidationSIGKILL(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"segment uploaded", "record committed", "WAL object released"} {
		t.Run(step, func(t *testing.T) {
			ctx := testCtx(t, 5*time.Minute)
			st := StartS3(t)
			dataDir := t.TempDir()
			sets := append([]string{
				"diskless.coordinator.orphan.scan.interval.ms=300",
				"diskless.coordinator.orphan.scan.grace.period.ms=600000",
			}, consolidationSets...)
			first := sets
			if step == "record committed" {
				// Released WAL objects wait a minute: the kill comes
				// between the swap and their deletion.
				first = append(append([]string{}, sets...), "diskless.file.deletion.delay.ms=60000")
			}
			sc := StartSidecarS3(t, st, dataDir, first...)
			const topic, partitions = "kill", 3
			createTopic(t, ctx, sc, topic, partitions, nil)
			h := history.New()
			var armed atomic.Bool
			var heldPath atomic.Pointer[string] // the segment PUT held ("/bucket/key")
			var rule *s3fault.Rule
			switch step {
			case "segment uploaded":
				// Armed before producing: the consolidation runs a second
				// behind, and the producer's own PUTs go before it.
				rule = st.Proxy.Add(&s3fault.Rule{Kind: s3fault.PutObject, Times: 1, Fault: s3fault.HoldAnswer(),
					Match: func(r *http.Request) bool {
						if !armed.Load() {
							return false
						}
						heldPath.CompareAndSwap(nil, &r.URL.Path)
						return true
					}})
			case "WAL object released":
				rule = st.Proxy.Add(&s3fault.Rule{Kind: s3fault.DeleteObject, Times: 1, Fault: s3fault.HoldAnswer(),
					Match: func(r *http.Request) bool { return armed.Load() }})
			}
			p := startProducer(ctx, sc, h, "p1", topic, partitions)
			p.waitAcked(t, ctx, 3000)
			p.stopProducing()
			armed.Store(true)
			switch step {
			case "record committed":
				waitMetric(t, ctx, sc, "diskless_consolidation_segments_committed_total", 1)
			default:
				for rule.Fired() == 0 {
					if ctx.Err() != nil {
						t.Fatalf("%s: the request to hold never came", step)
					}
					time.Sleep(5 * time.Millisecond)
				}
				// The rule fires as the request arrives, before the proxy
				// forwards it; a kill before the store has the object
				// cancels the PUT and leaves no orphan to find.
				if held := heldPath.Load(); step == "segment uploaded" {
					for {
						if _, err := os.Stat(filepath.Join(st.GW.Root, filepath.FromSlash(*held))); err == nil {
							break
						}
						if ctx.Err() != nil {
							t.Fatalf("the held segment %s was never stored", *held)
						}
						time.Sleep(5 * time.Millisecond)
					}
				}
			}
			sc.Kill()
			armed.Store(false)

			sc = StartSidecarS3(t, st, dataDir, sets...)
			p2 := startProducer(ctx, sc, h, "p2", topic, partitions)
			p2.waitAcked(t, ctx, 500)
			p2.stopProducing()
			// Every WAL object of this run consolidated and deleted: only
			// segment objects (and the orphan) are left, and they stay.
			waitQuiet(t, ctx, sc)
			finalRead(t, ctx, sc, topic, partitions, h)

			// The grace period passes (for the objects): the orphan scan
			// deletes what no shard holds.
			ageObjects(t, st)
			scans := metricValueOf(t, sc, "diskless_orphan_scans_total")
			waitMetric(t, ctx, sc, "diskless_orphan_scans_total", scans+2)
			// Other orphans may come with any kill: a hedged upload's loser,
			// or a segment being put at the kill; none may be left.
			deleted := metricValueOf(t, sc, "diskless_orphans_deleted_total")
			t.Logf("%v orphans deleted", deleted)
			if step == "segment uploaded" {
				held := heldPath.Load()
				if held == nil || deleted < 1 {
					t.Fatalf("%v orphans deleted; want the uploaded, uncommitted segment (%v) among them", deleted, held)
				}
				if _, err := os.Stat(filepath.Join(st.GW.Root, filepath.FromSlash(*held))); !os.IsNotExist(err) {
					t.Fatalf("the uploaded, uncommitted segment %s is still stored (%v)", *held, err)
				}
			}
			sc.Stop()
			if orphans := orphansOf(t, st, dataDir); len(orphans) != 0 {
				t.Fatalf("orphans left: %v", orphans)
			}
			finalAfterStop := StartSidecarS3(t, st, dataDir, sets...)
			finalRead(t, ctx, finalAfterStop, topic, partitions, history.New())
		})
	}
}

// waitMetric waits until the unlabelled sample name reaches at least min.
func waitMetric(t *testing.T, ctx context.Context, sc *Sidecar, name string, min float64) {
	t.Helper()
	for metricValueOf(t, sc, name) < min {
		if ctx.Err() != nil {
			t.Fatalf("%s stays below %v", name, min)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metricValueOf is the value of the unlabelled sample name in sc's
// /metrics now.
func metricValueOf(t *testing.T, sc *Sidecar, name string) float64 {
	t.Helper()
	return metricValue(t, metricsText(t, sc), name)
}

// waitQuiet waits until consolidation has nothing left to do and every
// released object is deleted: two consecutive scrapes a second apart with
// no segment committed, no object deleted and no failure in between, the
// last consolidation at least min.age behind the last produce.
func waitQuiet(t *testing.T, ctx context.Context, sc *Sidecar) {
	t.Helper()
	sample := func() [3]float64 {
		text := metricsText(t, sc)
		return [3]float64{metricValue(t, text, "diskless_consolidation_segments_committed_total"),
			metricValue(t, text, "diskless_objects_deleted_total"), metricValue(t, text, "diskless_files_released_total")}
	}
	prev := sample()
	for quiet := 0; quiet < 3; {
		select {
		case <-ctx.Done():
			t.Fatal("consolidation and deletion never settle")
		case <-time.After(time.Second):
		}
		now := sample()
		if now == prev && now[1] >= now[2] {
			quiet++
		} else {
			quiet = 0
		}
		prev = now
	}
}

// ageObjects sets the mtime of every object in the bucket two hours back.
func ageObjects(t *testing.T, st *S3Store) {
	t.Helper()
	old := time.Now().Add(-2 * time.Hour)
	root := filepath.Join(st.GW.Root, st.Bucket)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			return os.Chtimes(path, old, old)
		}
		return nil
	})
	mustNoErr(t, "ageing the objects", err)
}

// orphansOf runs `sidecar object-store orphans --json` on dataDir, against
// st, and returns the keys it reports.
func orphansOf(t *testing.T, st *S3Store, dataDir string) []string {
	t.Helper()
	args := []string{"object-store", "orphans", "--json", "--set", "data.dir=" + dataDir,
		"--set", "diskless.storage.backend=s3", "--set", "diskless.storage.s3.bucket=" + st.Bucket,
		"--set", "diskless.storage.s3.prefix=" + st.Prefix, "--set", "diskless.storage.s3.endpoint=" + st.GW.Endpoint,
		"--set", "diskless.storage.s3.path.style=true", "--set", "diskless.storage.s3.region=" + versitygw.Region}
	cmd := exec.Command(sidecarBin, args...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+versitygw.AccessKey, "AWS_SECRET_ACCESS_KEY="+versitygw.SecretKey,
		"AWS_EC2_METADATA_DISABLED=true")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("object-store orphans: %v\n%s", err, out)
	}
	var r orphansReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("object-store orphans: %v\n%s", err, out)
	}
	var keys []string
	for _, o := range r.Orphans {
		keys = append(keys, o.Key)
	}
	return keys
}

// TestConsolidationSegmentOnePut: a segment object larger than
// diskless.upload.part.bytes goes up as one PutObject, not as a multipart
// upload — S3 bills each part as a request (DESIGN §Consolidation). The
// WAL objects are kept below a part (a 1 MiB buffer) so that any multipart
// upload would be the segment's.
func TestConsolidationSegmentOnePut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 3*time.Minute)
	st := StartS3(t)
	sc := StartSidecarS3(t, st, t.TempDir(),
		"diskless.consolidation.enable=true",
		"diskless.consolidation.min.age.ms=1000",
		"diskless.consolidation.interval.ms=200",
		// The partition's segment waits 10 s past the minimum age for
		// more runs: everything produced below goes into one.
		"diskless.consolidation.segment.ms=10000",
		"diskless.consolidation.max.bytes.per.sec=-1",
		"diskless.upload.part.bytes=5242880",
		"diskless.append.buffer.max.bytes=1048576",
	)
	const topic = "one-put"
	createTopic(t, ctx, sc, topic, 1, nil)
	cl := sc.Client(kgo.DefaultProduceTopic(topic))
	var recs []*kgo.Record
	rng := rand.New(rand.NewPCG(1, 2))
	for range 80 { // 10 MiB that do not compress, produced at once
		value := make([]byte, 128<<10)
		for i := 0; i < len(value); i += 8 {
			binary.LittleEndian.PutUint64(value[i:], rng.Uint64())
		}
		recs = append(recs, &kgo.Record{Value: value})
	}
	t0 := time.Now()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Logf("produced in %v", time.Since(t0))
	waitMetric(t, ctx, sc, "diskless_consolidation_segment_bytes_total", 10<<20)
	segs := metricValueOf(t, sc, "diskless_consolidation_segments_committed_total")
	bytes := metricValueOf(t, sc, "diskless_consolidation_segment_bytes_total")
	if bytes/segs <= 5<<20 {
		t.Fatalf("%v segment objects of %v bytes in all: none larger than a part, so the test shows nothing", segs, bytes)
	}
	if n := st.Proxy.Counts()[s3fault.CreateMultipartUpload]; n != 0 {
		t.Fatalf("%v multipart uploads for %v segment objects of %.1f MiB in all (WAL objects are below a part); want one PutObject each",
			n, segs, bytes/(1<<20))
	}
}
