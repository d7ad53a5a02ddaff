package e2e

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// apiVersionsCases are ApiVersions v3 client software names and versions
// (KIP-511) with Kafka 4.4's answer to each, observed.
var apiVersionsCases = []struct {
	name, version string
	want          *kerr.Error
}{
	{"kgo", "1.18.0", nil},
	{"a", "1", nil},
	{"apache-kafka-java", "4.4.0", nil},
	{"bad name!", "1.0", kerr.InvalidRequest},
	{"", "1.0", kerr.InvalidRequest},
	{"-lead", "1.0", kerr.InvalidRequest},
	{"trail-", "1.0", kerr.InvalidRequest},
	{"trail.", "1.0", kerr.InvalidRequest},
	{"under_score", "1.0", kerr.InvalidRequest},
	{"ok", "1.0 beta", kerr.InvalidRequest},
	{"ok", "", kerr.InvalidRequest},
	{"ok", "v1.0-rc.1", nil},
	{"ünicode", "1", kerr.InvalidRequest},
}

// TestApiVersionsClientSoftwareMatchesKafka sends ApiVersions v3 with
// each of apiVersionsCases, on one connection, to Apache Kafka 4.4 and to
// the sidecar: both refuse a name or version outside KIP-511's pattern with
// INVALID_REQUEST and no API keys, and go on serving the connection.
func TestApiVersionsClientSoftwareMatchesKafka(t *testing.T) {
	kafkatest.Require(t)
	kc := kafkatest.Start(t, kafkatest.Options{})
	sc := StartSidecar(t, "")
	for _, tg := range []struct {
		name string
		rc   *RawConn
	}{{"kafka", dialRaw(t, kc.BootstrapServers())}, {"sidecar", sc.DialRaw()}} {
		checkApiVersionsClientSoftware(t, tg.name, tg.rc)
	}
}

// checkApiVersionsClientSoftware sends each of apiVersionsCases on rc and
// checks the answers.
func checkApiVersionsClientSoftware(t *testing.T, target string, rc *RawConn) {
	for _, c := range apiVersionsCases {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = c.name, c.version
		resp, err := rc.TryRequest(req)
		if err != nil {
			t.Fatalf("%s: ApiVersions %q %q: %v", target, c.name, c.version, err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != codeOf(c.want) {
			t.Errorf("%s: ApiVersions %q %q: %v, want %v", target, c.name, c.version, kerr.ErrorForCode(r.ErrorCode), c.want)
		}
		if r.ErrorCode != 0 && len(r.ApiKeys) != 0 {
			t.Errorf("%s: ApiVersions %q %q: refused with %d api keys, want none", target, c.name, c.version, len(r.ApiKeys))
		}
	}
}
