package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/s3fault"
)

// TestRigStores runs the load as -sidecar-bin -stores local,s3-like does,
// on the real binary: a fresh sidecar on the local store, then one on
// versitygw behind the s3fault proxy with the S3-like latency model, one
// column each. On the S3-like store no produce is answered before its
// object's PUT, which the model holds at least 60 ms; the local store's
// files go through the same pipeline stages.
func TestRigStores(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts sidecar processes; skipped with -short")
	}
	if _, err := versitygwBin(); err != nil {
		if os.Getenv("SIDECAR_REQUIRE_INTEGRATION") == "1" {
			t.Fatalf("versitygw is required (SIDECAR_REQUIRE_INTEGRATION=1): %v", err)
		}
		t.Skipf("%v; set SIDECAR_REQUIRE_INTEGRATION=1 to make this a failure", err)
	}
	bin := filepath.Join(t.TempDir(), "sidecar")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/sidecar").CombinedOutput(); err != nil {
		t.Fatalf("building the sidecar: %v\n%s", err, out)
	}
	o := rigOptions{bin: bin, latency: s3fault.S3Like, seed: 1,
		sets: []string{"diskless.append.commit.interval.ms=100"}}
	cfg := smallConfig()
	cfg.Topic = newTopicName()
	var info bytes.Buffer
	var results []Result
	for _, store := range []string{storeLocal, storeS3Like} {
		r, target, err := startRig(t.Context(), o, store, &info)
		if err != nil {
			t.Fatal(err)
		}
		res, err := run(t.Context(), cfg, target)
		if serr := r.stop(); serr != nil {
			t.Errorf("stopping the %s sidecar: %v", store, serr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(r.dir); !os.IsNotExist(err) {
			t.Errorf("%s: the rig's directory %s is still there (%v)", store, r.dir, err)
		}
		results = append(results, res)
	}
	var report bytes.Buffer
	writeReport(&report, cfg, results)
	t.Logf("%s%s", info.String(), report.String())
	if !strings.Contains(info.String(), "latency model "+s3fault.S3Like) {
		t.Errorf("the s3-like store's line does not name its model:\n%s", info.String())
	}
	for _, res := range results {
		if res.ErrorCount != 0 || res.Unacked != 0 || res.Unconsumed != 0 || res.Produced.Records == 0 {
			t.Fatalf("%s: %d errors %v, %d unacked, %d unconsumed, %d produced", res.Target, res.ErrorCount, res.Errors,
				res.Unacked, res.Unconsumed, res.Produced.Records)
		}
		for _, stage := range []string{"buffer", "upload", "commit"} {
			if _, ok := res.Store.StageMs[stage]; !ok {
				t.Errorf("%s: no mean %s stage in %v (%s)", res.Target, stage, res.Store.StageMs, res.Store.NA)
			}
		}
		if res.CPU.Seconds == nil {
			t.Errorf("%s: no CPU figure: %s", res.Target, res.CPU.NA)
		}
	}
	s3 := results[1]
	if s3.Store.Cost == nil || s3.Store.Cost.From != "s3" {
		t.Errorf("s3-like: cost %+v, want it from the S3 request counters", s3.Store.Cost)
	}
	if s3.ProduceLatency.MinMs < 60 || s3.Store.StageMs["upload"] < 60 {
		t.Errorf("s3-like: produce min %.1f ms, upload mean %.1f ms: want both ≥ 60 ms, the model's fastest PUT",
			s3.ProduceLatency.MinMs, s3.Store.StageMs["upload"])
	}
}

func TestParseStores(t *testing.T) {
	if got, err := parseStores(" local, s3-like ,s3"); err != nil || strings.Join(got, "|") != "local|s3-like|s3" {
		t.Errorf("parseStores: %q, %v", got, err)
	}
	for _, bad := range []string{"", ",", "gcs", "local,nfs"} {
		if _, err := parseStores(bad); err == nil {
			t.Errorf("parseStores(%q) accepted", bad)
		}
	}
	var stderr bytes.Buffer
	_, o, err := parseFlags([]string{"-sidecar-bin", "/x/sidecar", "-stores", "local,s3-like", "-s3-latency", "put=10-20",
		"-sidecar-set", "a.b=1", "-sidecar-set", "c=d=e"}, &stderr)
	if err != nil || o.rig.bin != "/x/sidecar" || len(o.rigStores) != 2 || o.rig.latency != "put=10-20" ||
		strings.Join(o.rig.sets, " ") != "a.b=1 c=d=e" {
		t.Errorf("rig flags: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"-sidecar-bin", "x", "-stores", "tape"}, {"-sidecar-bin", "x", "-s3-latency", "put=9"},
		{"-sidecar-set", "novalue"}, {"-sidecar-bin", "x", "-only-kfake"}} {
		if _, _, err := parseFlags(bad, &stderr); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
