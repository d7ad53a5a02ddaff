package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/yaml"
)

// The operator files of deploy/ that name metrics of /metrics.
const (
	dashboardFile = "../deploy/grafana/diskless-sidecar.json"
	alertsFile    = "../deploy/prometheus/diskless-sidecar-alerts.yml"
)

// metricName matches a sidecar metric name inside a PromQL expression.
var metricName = regexp.MustCompile(`\bdiskless_[a-z0-9_]+\b`)

// dashboardExprs returns every PromQL expression of a Grafana dashboard:
// the targets' expr fields and the template variables' queries, at any
// depth (rows may nest panels).
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return exprs
}

// alertRules is the rule-file shape Prometheus loads (rule_files:).
type alertRules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// alertExprs decodes the rule file strictly (a misspelt field fails) and
// returns each rule's expression, checking that each rule has a name, a
// severity and a summary.
func alertExprs(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules alertRules
	if err := yaml.UnmarshalStrict(raw, &rules); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: rule %q lacks alert, expr, labels.severity or annotations.summary", path, r.Alert)
			}
			if _, err := time.ParseDuration(r.For); err != nil {
				t.Errorf("%s: rule %s: for %q: %v", path, r.Alert, r.For, err)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// sampleNames returns the names of every sample in a Prometheus text
// exposition (histograms as their _bucket, _sum and _count series).
func sampleNames(text string) map[string]bool {
	names := make(map[string]bool)
	for _, l := range strings.Split(text, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i := strings.IndexAny(l, "{ "); i > 0 {
			names[l[:i]] = true
		}
	}
	return names
}

// missingMetrics returns the metric names used by exprs that are not in
// names, sorted, and the number of distinct names used.
func missingMetrics(exprs []string, names map[string]bool) (missing []string, used int) {
	seen := make(map[string]bool)
	for _, e := range exprs {
		for _, m := range metricName.FindAllString(e, -1) {
			if seen[m] {
				continue
			}
			seen[m] = true
			if !names[m] {
				missing = append(missing, m)
			}
		}
	}
	slices.Sort(missing)
	return missing, len(seen)
}

func TestMissingMetricsFindsUnknownNames(t *testing.T) {
	t.Parallel()
	names := sampleNames("# HELP x\ndiskless_a_total 1\ndiskless_b_bucket{le=\"1\"} 2\n")
	missing, used := missingMetrics([]string{`rate(diskless_a_total[5m]) / diskless_b_bucket`, `sum(diskless_c_bytes{x="diskless_d"})`}, names)
	if used != 4 || !slices.Equal(missing, []string{"diskless_c_bytes", "diskless_d"}) {
		t.Fatalf("missing %v of %d used", missing, used)
	}
}

// TestDeployMetricsExist runs the real binary on S3 (versitygw), produces
// and consumes, answers one partition error of each path, and checks that
// every metric the Grafana dashboard and the alert rules of deploy/ use is
// on its /metrics.
func TestDeployMetricsExist(t *testing.T) {
	t.Parallel()
	st := StartS3(t)
	sc := StartSidecarS3(t, st, "")
	ctx := testCtx(t, time.Minute)
	createTopic(t, ctx, sc, "dashboard", 2, nil)
	prod := sc.Client(kgo.DefaultProduceTopic("dashboard"))
	var recs []*kgo.Record
	for i := range 100 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "value-%d", i)})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	consumeAll(t, ctx, sc, "dashboard", 2, 100)
	// One produce and one fetch partition error, so that the errors-by-code
	// counters have a series.
	rc := sc.DialRaw()
	if got := produceRaw(t, rc, "dashboard", []byte("not a record batch"))[0].ErrorCode; got == 0 {
		t.Fatal("a garbage batch was accepted")
	}
	if got := fetchRaw(t, rc, "dashboard", 0, 1<<40, 1<<20, 0).ErrorCode; got != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the end: error %d, want OFFSET_OUT_OF_RANGE", got)
	}

	_, text := httpGet(t, "http://"+sc.HTTP+"/metrics")
	names := sampleNames(text)
	for _, f := range []struct {
		path  string
		exprs []string
	}{
		{dashboardFile, dashboardExprs(t, dashboardFile)},
		{alertsFile, alertExprs(t, alertsFile)},
	} {
		missing, used := missingMetrics(f.exprs, names)
		if used < 5 {
			t.Errorf("%s: only %d metric names found in %d expressions", f.path, used, len(f.exprs))
		}
		if len(missing) > 0 {
			t.Errorf("%s uses metrics not on /metrics: %s", f.path, strings.Join(missing, ", "))
		}
		t.Logf("%s: %d expressions, %d metric names, all on /metrics", f.path, len(f.exprs), used)
	}
}
