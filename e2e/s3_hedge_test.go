package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// TestS3HedgedUpload: the first WAL object's PUT reaches versitygw, which
// stores it, but the proxy holds its answer; the hedge, a second PUT of
// the same bytes under a new key, answers and wins. The records of that
// file are acknowledged once, at dense offsets, and read back from the
// winner's object after a restart (an empty cache: GETs of the committed
// key); the loser's object is deleted by the sidecar (its DeleteObject
// goes through the proxy) and is gone from the store, and no multipart
// upload is left open. The orphan scan would delete it after its grace
// period (≥ 10 min) had the delete failed: coordinator.TestOrphanScan.
func TestS3HedgedUpload(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	var (
		mu      sync.Mutex
		putKeys []string // WAL object keys of the PutObjects, in arrival order
		deleted []string // keys of the DeleteObjects
	)
	walPut := func(r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/wal/") {
			return false
		}
		mu.Lock()
		putKeys = append(putKeys, r.URL.Path)
		mu.Unlock()
		return true
	}
	held := st.Proxy.Add(&s3fault.Rule{Kind: s3fault.PutObject, Match: walPut, Times: 1, Fault: s3fault.HoldAnswer()})
	// Counts the deletes, faulting none (a rule with a Match that says no).
	st.Proxy.Add(&s3fault.Rule{Kind: s3fault.DeleteObject, Match: func(r *http.Request) bool {
		mu.Lock()
		deleted = append(deleted, r.URL.Path)
		mu.Unlock()
		return false
	}})
	dir := t.TempDir()
	sets := []string{
		// No durations known yet: the first attempt is hedged at the cap.
		"diskless.upload.hedge.max.delay.ms=300",
		"diskless.upload.hedge.min.delay.ms=100",
	}
	sc := StartSidecarS3(t, st, dir, sets...)
	const (
		topic      = "hedged"
		partitions = 2
		n          = 300
	)
	ctx := testCtx(t, 3*time.Minute)
	createTopic(t, ctx, sc, topic, partitions, nil)

	prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	acked := make(map[string]ackedAt, n)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "hedged-%04d", i)})
	}
	start := time.Now()
	for _, r := range prod.ProduceSync(ctx, recs...) {
		mustNoErr(t, "produce", r.Err)
		acked[string(r.Record.Value)] = ackedAt{r.Record.Partition, r.Record.Offset}
	}
	t.Logf("%d records acknowledged in %v", n, time.Since(start))
	if held.Fired() != 1 {
		t.Fatalf("the held PUT rule fired %d times, want 1", held.Fired())
	}

	m := metricsText(t, sc)
	hedges, wins := metricValue(t, m, "diskless_upload_hedges_total"), metricValue(t, m, "diskless_upload_hedge_wins_total")
	if hedges < 1 || wins < 1 {
		t.Fatalf("hedges %v, hedge wins %v: want the held PUT hedged and the hedge to win", hedges, wins)
	}
	mu.Lock()
	loser := putKeys[0]
	mu.Unlock()
	waitUntil(t, time.Minute, "the loser's delete", func() bool {
		return metricValue(t, metricsText(t, sc), "diskless_upload_hedge_deletes_total") >= 1
	})
	mu.Lock()
	if !slices.Contains(deleted, loser) {
		t.Errorf("no DeleteObject of the loser %s went through the proxy: %v", loser, deleted)
	}
	mu.Unlock()

	// Read back from the store itself: a restarted sidecar has an empty
	// cache, so each fetch GETs the committed object.
	sc.Stop()
	sc = StartSidecarS3(t, st, dir, sets...)
	verifyAcked(t, ctx, sc, topic, partitions, acked)
	sc.Stop()

	// In versitygw's directory: the loser is gone, the winners are there.
	objects := storedObjects(t, st)
	if slices.Contains(objects, loser) {
		t.Fatalf("the losing attempt's object %s is still in the store: %v", loser, objects)
	}
	// Every other PUT's object is there too, but those of other losers
	// (on a loaded machine a PUT may outlast the 300 ms hedge delay too),
	// which the sidecar deleted.
	mu.Lock()
	winners := slices.DeleteFunc(slices.Clone(putKeys), func(k string) bool { return slices.Contains(deleted, k) })
	mu.Unlock()
	for _, k := range winners {
		if !slices.Contains(objects, k) {
			t.Errorf("object %s (PUT through the proxy, never deleted) is not in the store: %v", k, objects)
		}
	}
	t.Logf("PUTs %v; stored %v; deleted %v", putKeys, objects, deleted)
	st.NoOpenUploads(t)
}

// metricsText is the sidecar's /metrics text now.
func metricsText(t *testing.T, sc *Sidecar) string {
	t.Helper()
	_, m := httpGet(t, "http://"+sc.HTTP+"/metrics")
	return m
}

// storedObjects lists the WAL objects in versitygw's directory, as the
// proxy saw their paths (/bucket/key).
func storedObjects(t *testing.T, st *S3Store) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(st.GW.Root, st.Bucket), func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(st.GW.Root, path)
		if err != nil {
			return err
		}
		if p := "/" + filepath.ToSlash(rel); strings.Contains(p, "/wal/") {
			out = append(out, p)
		}
		return nil
	})
	mustNoErr(t, "listing versitygw's directory", err)
	if _, err := os.Stat(st.GW.Root); err != nil {
		t.Fatal(err)
	}
	return out
}
