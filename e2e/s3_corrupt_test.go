package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/diskless-sidecar/sidecar/internal/batch"
	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// TestS3CorruptGetAnswer is issue 9's defect 1 through the S3 proxy, on a
// CreateTime and a LogAppendTime topic: 5 records produced to each of 4
// partitions, a restart (cold cache), then one GetObject answer holding
// partition 1's batch comes back with a byte flipped and every later answer
// is right. The sidecar notices (the batch fails its check), reads again,
// and serves the producer's bytes: a kgo consumer reads every record
// without an error, and every later fetch of partition 1 serves a batch
// with a good CRC — nothing bad was cached.
func TestS3CorruptGetAnswer(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	dir := t.TempDir()
	sc := StartSidecarS3(t, st, dir)
	ctx := testCtx(t, 3*time.Minute)
	lat := "LogAppendTime"
	topics := map[string]map[string]*string{
		"corrupt-create": nil,
		"corrupt-append": {"message.timestamp.type": &lat},
	}
	want := map[string][][]string{} // topic → partition → values
	for topic, configs := range topics {
		createTopic(t, ctx, sc, topic, 4, configs)
		prod := sc.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		want[topic] = make([][]string, 4)
		for p := range int32(4) {
			for i := range 5 {
				v := fmt.Sprintf("%s-p%d-%d", topic, p, i)
				recs = append(recs, &kgo.Record{Value: []byte(v), Partition: p})
				want[topic][p] = append(want[topic][p], v)
			}
		}
		mustNoErr(t, "produce "+topic, prod.ProduceSync(ctx, recs...).FirstErr())
		prod.Close()
	}
	// Where partition 1's batch of each topic lies: its records section
	// (the bytes after the 61-byte header, which fetch never rewrites),
	// found in the stored objects.
	rc := sc.DialRaw()
	records := map[string][]byte{}
	for topic := range topics {
		got := fetchRaw(t, rc, topic, 1, 0, 1<<20, 0)
		h, _, err := batch.Parse(got.RecordBatches)
		if err != nil || got.ErrorCode != 0 {
			t.Fatalf("%s: fetch of partition 1 before the restart: error %d, %v", topic, got.ErrorCode, err)
		}
		records[topic] = bytes.Clone(h[batch.HeaderSize:])
	}
	sc.Stop()

	sc = StartSidecarS3(t, st, dir)
	var rules []*s3fault.Rule
	for topic, rec := range records {
		key, at := findInObjects(t, filepath.Join(st.GW.Root, st.Bucket), rec)
		off := at + int64(len(rec))/2 // inside the batch's records, under its CRC
		rules = append(rules, st.Proxy.Add(&s3fault.Rule{
			Kind: s3fault.GetObject, Times: 1, Fault: s3fault.FlipByte(off),
			Match: func(r *http.Request) bool {
				return strings.HasSuffix(r.URL.Path, "/"+key) && s3fault.RangeCovers(off)(r)
			},
		}))
		t.Logf("%s: partition 1's batch in %s at %d; flipping byte %d of the next GET holding it", topic, key, at, off)
	}
	for topic := range topics {
		got := consumeAll(t, ctx, sc, topic, 4, 20) // fails the test on any fetch error
		for p, rs := range got {
			var values []string
			for _, r := range rs {
				values = append(values, string(r.Value))
			}
			if fmt.Sprint(values) != fmt.Sprint(want[topic][p]) {
				t.Fatalf("%s partition %d: consumed %v, want %v", topic, p, values, want[topic][p])
			}
		}
	}
	for i, r := range rules {
		if r.Fired() != 1 {
			t.Fatalf("rule %d fired %d times, want 1: the corrupt answer was not served", i, r.Fired())
		}
	}
	rc = sc.DialRaw()
	for topic := range topics {
		for i := range 20 {
			got := fetchRaw(t, rc, topic, 1, 0, 1<<20, 0)
			h, n, err := batch.Parse(got.RecordBatches)
			if got.ErrorCode != 0 || err != nil || n != len(got.RecordBatches) || h.ComputeCRC() != h.CRC() ||
				!bytes.Equal(h[batch.HeaderSize:], records[topic]) {
				t.Fatalf("%s: fetch %d of partition 1 after the corrupt answer: error %d, %d bytes, parse %v", topic, i, got.ErrorCode, len(got.RecordBatches), err)
			}
		}
	}
	_, text := httpGet(t, "http://"+sc.HTTP+"/metrics")
	if got := metricValue(t, text, "diskless_cache_check_failures_total"); got < float64(len(rules)) {
		t.Fatalf("diskless_cache_check_failures_total = %v, want ≥ %d (each corrupt answer caught)", got, len(rules))
	}
	if !sc.Alive() {
		t.Fatal("the sidecar exited")
	}
}

// findInObjects returns the key (relative to the bucket's root) of the one
// object file under root holding b, and b's byte offset in it.
func findInObjects(t *testing.T, root string, b []byte) (string, int64) {
	t.Helper()
	var key string
	var at int64 = -1
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if i := bytes.Index(data, b); i >= 0 {
			if at >= 0 {
				return fmt.Errorf("the bytes are in %s and %s", key, path)
			}
			rel, _ := filepath.Rel(root, path)
			key, at = filepath.ToSlash(rel), int64(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		t.Fatalf("no object under %s holds the batch", root)
	}
	return key, at
}
