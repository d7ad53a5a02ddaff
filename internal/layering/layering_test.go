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

// implementations are the packages that do the work behind the stages'
// interfaces; server names none of them (cmd/sidecar wires them in), only
// the interfaces it defines and the vocabulary they speak (diskless).
var implementations = []string{"produce", "fetch", "commit", "upload", "wal", "cache", "coordinator", "objstore", "objstore/s3", "peer"}

// TestServerImportsNoImplementation: the Kafka listener depends on the
// interfaces it defines (Producer, Fetcher, Catalog), never on the
// packages that implement them.
func TestServerImportsNoImplementation(t *testing.T) {
	all := deps(t)
	server, ok := all[module+"/server"]
	if !ok {
		t.Fatal("no server package")
	}
	for _, impl := range implementations {
		if _, ok := all[module+"/"+impl]; !ok {
			t.Errorf("%s is not a package of the module any more: update the list", impl)
		}
		if slices.Contains(server, module+"/"+impl) {
			t.Errorf("server links %s: it must see only the interfaces it defines", impl)
		}
	}
}

// TestStagesLinkNoCoordinator: the stages reach the coordinator shards
// through interfaces of their own written in the types of diskless; none
// links the coordinator or its metadata log (cmd/sidecar wires them in).
func TestStagesLinkNoCoordinator(t *testing.T) {
	all := deps(t)
	for _, s := range []string{"server", "produce", "commit", "fetch", "upload", "wal", "cache", "peer"} {
		ds, ok := all[module+"/"+s]
		if !ok {
			t.Errorf("stage %s is not a package of the module any more: update the list", s)
		}
		for _, impl := range []string{"coordinator", "coordinator/records", "metalog"} {
			if slices.Contains(ds, module+"/"+impl) {
				t.Errorf("%s links %s: it must name the coordinator only through diskless", s, impl)
			}
		}
	}
}

// TestLeaves: the vocabulary (diskless), the metadata log (metalog), its
// Kafka backend (metalog/kafkalog: no object store, no coordinator — it
// defines the small store interface it needs), the record codec
// (coordinator/records) and the coordinator RPCs' messages (rpcmsg) link
// nothing of the module but these leaf helpers — the tagged-field codec
// (internal/tagged) among them, which links nothing — so that any package
// may import them.
func TestLeaves(t *testing.T) {
	all := deps(t)
	for pkg, allowed := range map[string][]string{
		"diskless":            {"internal/batch", "internal/topicconfig"},
		"metalog":             {"internal/fsutil"},
		"metalog/kafkalog":    {"metalog", "internal/fsutil"},
		"coordinator/records": {"diskless", "internal/batch", "internal/tagged", "internal/topicconfig"},
		"rpcmsg":              {"internal/tagged"},
		"internal/tagged":     {},
	} {
		ds, ok := all[module+"/"+pkg]
		if !ok {
			t.Errorf("%s is not a package of the module any more: update the list", pkg)
		}
		for _, d := range ds {
			rel, ours := strings.CutPrefix(d, module+"/")
			if ours && !slices.Contains(allowed, rel) {
				t.Errorf("%s links %s: it may link only %v of the module", pkg, rel, allowed)
			}
		}
	}
}

// TestStagesLinkNoOTelSDK: the stages take the OpenTelemetry API's meter and
// tracer providers (noop by default) and never link its SDK, nor an
// exporter; cmd/sidecar wires those in through internal/telemetry (DESIGN
// §Observability).
func TestStagesLinkNoOTelSDK(t *testing.T) {
	all := deps(t)
	for _, s := range append(slices.Clone(stages), "objstore/s3", "internal/tracing") {
		ds, ok := all[module+"/"+s]
		if !ok {
			t.Errorf("%s is not a package of the module any more: update the list", s)
		}
		for _, d := range ds {
			if strings.HasPrefix(d, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(d, "go.opentelemetry.io/otel/exporters") {
				t.Errorf("%s links %s: only the API (go.opentelemetry.io/otel/{trace,metric,attribute}) on the hot paths", s, d)
				break
			}
		}
	}
}
