package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/diskless-sidecar/sidecar"

// awsLinkers are the only packages allowed to link the AWS SDK
// (github.com/aws/...) outside tests: the S3 backend itself, the binary
// that opens it, and the test tool that creates buckets in versitygw.
var awsLinkers = []string{
	module + "/objstore/s3",
	module + "/cmd/sidecar",
	module + "/internal/versitygw",
}

// stages must not link the SDK, whoever imports whom: the pipeline stages a
// batch travels through. Listed so that a renamed stage cannot drop out of
// the check unnoticed.
var stages = []string{"server", "produce", "commit", "fetch", "coordinator", "upload", "wal", "cache", "objstore"}

// deps returns every package of the module with its dependencies, as
// go list -deps sees them without tests: import path → transitive imports.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOnlyS3LinksTheSDK: no package but the S3 backend, the binary and the
// versitygw test tool links the AWS SDK.
func TestOnlyS3LinksTheSDK(t *testing.T) {
	all := deps(t)
	for _, s := range stages {
		if _, ok := all[module+"/"+s]; !ok {
			t.Errorf("stage %s is not a package of the module any more: update the list", s)
		}
	}
	for pkg, ds := range all {
		if slices.Contains(awsLinkers, pkg) {
			continue
		}
		for _, d := range ds {
			if strings.HasPrefix(d, "github.com/aws/") {
				t.Errorf("%s links %s: only %v may link the AWS SDK (objstore.Store is the boundary)", pkg, d, awsLinkers)
				break
			}
		}
	}
}
