package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// metricValue returns the value of an unlabelled sample in Prometheus text.
func metricValue(t *testing.T, text, name string) float64 {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}

// TestOperatorEndpoint checks /healthz, /readyz and that /metrics counts
// what the produce and fetch paths did: objects and bytes uploaded, files
// sealed, bytes served.
func TestOperatorEndpoint(t *testing.T) {
	t.Parallel()
	sc := StartSidecar(t, "")
	if sc.HTTP == "" {
		t.Fatal("the sidecar did not log its HTTP endpoint")
	}
	base := "http://" + sc.HTTP
	if code, _ := httpGet(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz: %d", code)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d", code)
	}
	ctx := testCtx(t, time.Minute)
	createTopic(t, ctx, sc, "metered", 2, nil)
	prod := sc.Client(kgo.DefaultProduceTopic("metered"))
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "value-%d", i)})
	}
	mustNoErr(t, "produce", prod.ProduceSync(ctx, recs...).FirstErr())
	consumeAll(t, ctx, sc, "metered", 2, 200)

	_, text := httpGet(t, base+"/metrics")
	objects := metricValue(t, text, "diskless_upload_objects_total")
	uploaded := metricValue(t, text, "diskless_upload_bytes_total")
	received := metricValue(t, text, "diskless_produce_received_bytes_total")
	served := metricValue(t, text, "diskless_fetch_bytes_total")
	if objects < 1 || uploaded != received || served < received {
		t.Fatalf("objects %v, uploaded %v bytes, received %v bytes, served %v bytes", objects, uploaded, received, served)
	}
	if !strings.Contains(text, `diskless_produce_files_total{reason="age"}`) ||
		!strings.Contains(text, `diskless_commit_latency_seconds_count{shard="0"}`) ||
		!strings.Contains(text, `diskless_produce_file_stage_duration_seconds_count{stage="upload"}`) {
		t.Fatalf("produce/commit instruments missing from /metrics:\n%s", text)
	}
}
