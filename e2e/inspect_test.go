package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// walDumpReport is the JSON of `sidecar wal dump --json`.
type walDumpReport struct {
	Object  string `json:"object"`
	Size    int    `json:"size"`
	Batches []struct {
		ByteOffset int    `json:"byte_offset"`
		ByteSize   int    `json:"byte_size"`
		Records    int32  `json:"records"`
		Codec      string `json:"codec"`
		ProducerID int64  `json:"producer_id"`
		CRCOK      bool   `json:"crc_ok"`
	} `json:"batches"`
	Records int64  `json:"records"`
	BadCRCs int    `json:"bad_crcs"`
	Error   string `json:"error"`
	// Segment is a segment object's trailer and index (consolidation).
	Segment *struct {
		Partition  int32 `json:"partition"`
		BaseOffset int64 `json:"base_offset"`
		Entries    []struct {
			FirstOffset int64 `json:"first_offset"`
			LastOffset  int64 `json:"last_offset"`
		} `json:"entries"`
	} `json:"segment"`
}

func walDump(t *testing.T, args ...string) (walDumpReport, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(sidecarBin, append([]string{"wal", "dump"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r walDumpReport
	if strings.Contains(strings.Join(args, " "), "--json") && code != 2 && out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("wal dump %v: %v\n%s", args, err, out.String())
		}
	}
	return r, code, out.String() + errb.String()
}

// TestWALDump: the real binary writes objects (file backend) of records
// produced by kgo with two codecs; `sidecar wal dump` of each object file
// and of its object key lists batches whose records add up to what was
// produced, with every CRC right and contiguous byte ranges; a flipped
// byte is reported as a bad CRC with exit code 1.
func TestWALDump(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	ctx := testCtx(t, time.Minute)
	createTopic(t, ctx, sc, "dumped", 2, nil)
	const n = 300
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		prod := sc.Client(kgo.DefaultProduceTopic("dumped"), kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := range n / 2 {
			recs = append(recs, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "value-%d", i)})
		}
		mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	}
	sc.Stop()

	root := filepath.Join(sc.DataDir, "objects")
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(p, string(filepath.Separator)+".") && strings.Contains(p, "wal") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("objects under %s: %v (%v)", root, files, err)
	}
	var records int64
	codecs := map[string]bool{}
	for _, f := range files {
		r, code, out := walDump(t, "--json", f)
		if code != 0 || r.BadCRCs != 0 || r.Error != "" || len(r.Batches) == 0 {
			t.Fatalf("wal dump %s: exit %d\n%s", f, code, out)
		}
		next := 0
		for _, b := range r.Batches {
			if b.ByteOffset != next || !b.CRCOK || b.Records <= 0 {
				t.Fatalf("%s: batch %+v after byte %d", f, b, next)
			}
			next += b.ByteSize
			codecs[b.Codec] = true
		}
		if next != r.Size {
			t.Fatalf("%s: batches cover %d of %d bytes", f, next, r.Size)
		}
		records += r.Records

		key := filepath.ToSlash(strings.TrimPrefix(f, root+string(filepath.Separator)))
		byKey, code, out := walDump(t, "--json", "--set", "data.dir="+sc.DataDir, key)
		if code != 0 || byKey.Records != r.Records || len(byKey.Batches) != len(r.Batches) {
			t.Fatalf("wal dump by key %s: exit %d, %d records against %d\n%s", key, code, byKey.Records, r.Records, out)
		}
	}
	if records != n || !codecs["none"] || !codecs["zstd"] {
		t.Fatalf("%d records in %d objects (codecs %v), want %d", records, len(files), codecs, n)
	}

	// object-store ls lists exactly those objects, with their sizes.
	var ls struct {
		Objects []struct {
			Key  string `json:"key"`
			Size int64  `json:"size"`
		} `json:"objects"`
		Count int `json:"count"`
	}
	lsOut, err := exec.Command(sidecarBin, "object-store", "ls", "--json", "--set", "data.dir="+sc.DataDir).Output()
	if err != nil {
		t.Fatalf("object-store ls: %v\n%s", err, lsOut)
	}
	if err := json.Unmarshal(lsOut, &ls); err != nil {
		t.Fatal(err)
	}
	if ls.Count != len(files) || len(ls.Objects) != len(files) {
		t.Fatalf("object-store ls: %d objects, want %d:\n%s", ls.Count, len(files), lsOut)
	}
	for _, o := range ls.Objects {
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(o.Key)))
		if err != nil || st.Size() != o.Size {
			t.Errorf("object-store ls: %s %d bytes: %v", o.Key, o.Size, err)
		}
	}
	if out, err := exec.Command(sidecarBin, "object-store", "ls", "--set", "data.dir="+filepath.Join(t.TempDir(), "none")).CombinedOutput(); err == nil {
		t.Fatalf("object-store ls of a data.dir that does not exist: %s", out)
	}

	// meta dump replays a copy of the shard's log: every object committed
	// and live, each partition's records and next offset.
	checkMetaDump(t, sc.DataDir, ls.Objects[0].Key, len(files))

	checkOrphans(t, sc.DataDir, root, ls.Objects[0].Key, len(files))

	// The text form names the object and its totals.
	_, code, out := walDump(t, files[0])
	if code != 0 || !strings.Contains(out, "object "+files[0]+":") || !strings.Contains(out, "0 bad CRCs") {
		t.Fatalf("text dump: exit %d\n%s", code, out)
	}

	// A flipped byte in the last batch's records: a bad CRC, exit 1.
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-1] ^= 0xff
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r, code, out := walDump(t, "--json", bad)
	if code != 1 || r.BadCRCs != 1 || r.Batches[len(r.Batches)-1].CRCOK {
		t.Fatalf("corrupt object: exit %d, %d bad CRCs\n%s", code, r.BadCRCs, out)
	}
	// A truncated object: a framing error after the whole batches.
	r, code, out = walDump(t, "--json", writeTemp(t, raw[:len(raw)-3]))
	if code != 1 || r.Error == "" {
		t.Fatalf("truncated object: exit %d, error %q\n%s", code, r.Error, out)
	}
	if _, code, out := walDump(t, "--set", "data.dir="+sc.DataDir, "wal/no-such-object"); code != 1 || !strings.Contains(out, "no-such-object") {
		t.Fatalf("missing key: exit %d\n%s", code, out)
	}
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "object")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type metaReport struct {
	Shards []struct {
		Dir        string         `json:"dir"`
		NextIndex  int64          `json:"next_index"`
		Counts     map[string]int `json:"counts"`
		Partitions []struct {
			Topic      string `json:"topic"`
			Partition  int32  `json:"partition"`
			Records    int64  `json:"records"`
			NextOffset int64  `json:"next_offset"`
		} `json:"partitions"`
		LiveObjects []string `json:"live_objects"`
		Repairs     []string `json:"repairs"`
		Errors      []string `json:"errors"`
		Records     []struct {
			Index int64  `json:"index"`
			Type  string `json:"type"`
		} `json:"records"`
	} `json:"shards"`
}

func metaCmd(t *testing.T, args ...string) (metaReport, int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(sidecarBin, append([]string{"meta"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r metaReport
	if slices.Contains(args, "--json") && out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("meta %v: %v\n%s", args, err, out.String())
		}
	}
	return r, code, out.String() + errb.String()
}

// checkMetaDump: `sidecar meta dump` and `verify` of a data.dir the binary
// wrote (topic "dumped", 2 partitions, 150 records each), which they must
// leave as it was; then of a copy whose log has a torn tail.
func checkMetaDump(t *testing.T, dataDir, someKey string, objects int) {
	t.Helper()
	shard := filepath.Join(dataDir, "coordinator", "shard-0")
	before := dirBytes(t, shard)
	r, code, out := metaCmd(t, "dump", "--json", dataDir)
	if code != 0 || len(r.Shards) != 1 {
		t.Fatalf("meta dump: exit %d\n%s", code, out)
	}
	s := r.Shards[0]
	if s.Counts["FileCommitted"] != objects || len(s.LiveObjects) != objects || !slices.Contains(s.LiveObjects, someKey) ||
		len(s.Repairs) != 0 || len(s.Errors) != 0 || int64(len(s.Records)) != s.NextIndex {
		t.Fatalf("meta dump: %d FileCommitted, live %v (want %d with %s), repairs %v, errors %v, %d records to index %d\n%s",
			s.Counts["FileCommitted"], s.LiveObjects, objects, someKey, s.Repairs, s.Errors, len(s.Records), s.NextIndex, out)
	}
	var got []string
	for _, p := range s.Partitions {
		got = append(got, fmt.Sprintf("%s-%d:%d/%d", p.Topic, p.Partition, p.Records, p.NextOffset))
	}
	if want := []string{"dumped-0:150/150", "dumped-1:150/150"}; !slices.Equal(got, want) {
		t.Fatalf("meta dump partitions %v, want %v\n%s", got, want, out)
	}
	if _, code, out := metaCmd(t, "verify", shard); code != 0 || !strings.Contains(out, "partition dumped-1") {
		t.Fatalf("meta verify: exit %d\n%s", code, out)
	}
	if after := dirBytes(t, shard); !maps.Equal(before, after) {
		t.Fatal("meta dump changed the shard's files")
	}

	// A torn tail (half a record appended to the newest segment) in a copy:
	// verify reports the repair and exits 1; the copy is left as it was.
	torn := filepath.Join(t.TempDir(), "shard-0")
	if err := os.CopyFS(torn, os.DirFS(shard)); err != nil {
		t.Fatal(err)
	}
	var newest string
	for name := range dirBytes(t, torn) {
		if strings.HasSuffix(name, ".log") && name > newest {
			newest = name
		}
	}
	if newest == "" {
		t.Fatalf("no .log segment in %v", dirBytes(t, torn))
	}
	f, err := os.OpenFile(filepath.Join(torn, newest), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0, 40, 1, 2, 3})
	f.Close()
	tornBefore := dirBytes(t, torn)
	vr, code, out := metaCmd(t, "verify", "--json", torn)
	if code != 1 || len(vr.Shards) != 1 || len(vr.Shards[0].Repairs) == 0 || vr.Shards[0].NextIndex != s.NextIndex {
		t.Fatalf("meta verify of a torn tail: exit %d\n%s", code, out)
	}
	if !maps.Equal(tornBefore, dirBytes(t, torn)) {
		t.Fatal("meta verify repaired the log it was given")
	}
}

// dirBytes returns each file's content under dir by relative name.
func dirBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type orphansReport struct {
	Prefix  string `json:"prefix"`
	Live    int    `json:"live"`
	Orphans []struct {
		Key     string `json:"key"`
		Deleted bool   `json:"deleted"`
	} `json:"orphans"`
}

// checkOrphans: `sidecar object-store orphans` on the binary's data.dir
// with an object planted in its key space and one under another cluster
// id, all files made two hours old: only the planted one is an orphan;
// --delete --dry-run deletes nothing, --delete deletes it alone.
func checkOrphans(t *testing.T, dataDir, root, liveKey string, objects int) {
	t.Helper()
	clusterDir := filepath.Dir(filepath.Join(root, filepath.FromSlash(liveKey)))
	planted := filepath.Join(clusterDir, "00000000000000000000000000000001")
	foreign := filepath.Join(root, "wal", "another-cluster", "00000000000000000000000000000002")
	for _, p := range []string{planted, foreign} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("not a wal object"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			err = os.Chtimes(p, old, old)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (orphansReport, string) {
		t.Helper()
		out, err := exec.Command(sidecarBin, append([]string{"object-store", "orphans", "--json", "--set", "data.dir=" + dataDir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("object-store orphans %v: %v\n%s", args, err, out)
		}
		var r orphansReport
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r, string(out)
	}
	wantKey := filepath.ToSlash(strings.TrimPrefix(planted, root+string(filepath.Separator)))
	for _, args := range [][]string{nil, {"--delete", "--dry-run"}} {
		r, out := run(args...)
		if r.Live != objects || len(r.Orphans) != 1 || r.Orphans[0].Key != wantKey || r.Orphans[0].Deleted {
			t.Fatalf("orphans %v: want only %s, not deleted\n%s", args, wantKey, out)
		}
		if _, err := os.Stat(planted); err != nil {
			t.Fatalf("orphans %v deleted the orphan: %v", args, err)
		}
	}
	if r, out := run("--delete"); len(r.Orphans) != 1 || !r.Orphans[0].Deleted {
		t.Fatalf("orphans --delete:\n%s", out)
	}
	if _, err := os.Stat(planted); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the orphan is still there after --delete: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatalf("another cluster's object was touched: %v", err)
	}
	if r, out := run(); len(r.Orphans) != 0 || r.Live != objects {
		t.Fatalf("orphans after the delete:\n%s", out)
	}
	if _, code, out := walDump(t, "--set", "data.dir="+dataDir, liveKey); code != 0 {
		t.Fatalf("a live object is gone after orphans --delete: exit %d\n%s", code, out)
	}
	os.Remove(foreign)
}
