package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
	sc := StartSidecar(t, "")
	ctx := testCtx(t, time.Minute)
	createTopic(t, ctx, sc, "dumped", 2, nil)
	const n = 300
	for _, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.ZstdCompression()} {
		prod := sc.Client(kgo.DefaultProduceTopic("dumped"), kgo.ProducerBatchCompression(codec))
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
