package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/diskless-sidecar/sidecar/internal/dirlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testConfig(t *testing.T, sets ...string) Config {
	t.Helper()
	cfg, err := LoadConfig("", append([]string{"listeners=PLAINTEXT://127.0.0.1:0", "http.listener=127.0.0.1:0", "data.dir=" + t.TempDir()}, sets...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startStop starts every component on cfg and stops them again, failing
// the test with what if either step fails.
func startStop(t *testing.T, cfg Config, what string) {
	t.Helper()
	a, err := start(cfg, quiet)
	if err != nil {
		t.Fatalf("%s: start: %v", what, err)
	}
	if err := a.shutdown(10 * time.Second); err != nil {
		t.Fatalf("%s: shutdown: %v", what, err)
	}
}

// TestStartAndShutdown starts every component in-process and stops them:
// nothing may be left running (goleak), and the data.dir lock is released.
func TestStartAndShutdown(t *testing.T) {
	cfg := testConfig(t)
	startStop(t, cfg, "first start")
	startStop(t, cfg, "restart on the same data.dir (the lock was released)")
}

// TestDataDirInUse: while a sidecar runs on a data.dir, a second start on
// it is refused naming data.dir, before it touches the directory's
// metadata logs (the data.dir lock is the only lock on them); once the
// first stops, it starts.
func TestDataDirInUse(t *testing.T) {
	cfg := testConfig(t)
	a, err := start(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	_, err = start(cfg, quiet)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "data.dir" || !errors.Is(ce.Err, dirlock.ErrLocked) {
		t.Fatalf("second start on a data.dir in use: %v, want a refusal naming data.dir", err)
	}
	if err := a.shutdown(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	startStop(t, cfg, "start after the first sidecar stopped")
}

// TestStartFailuresNameTheKey: failures after some components were opened
// undo them and report the key (no panic, no leak).
func TestStartFailuresNameTheKey(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		name string
		sets []string
		key  string
	}{
		{"listener in use", []string{"listeners=PLAINTEXT://" + busy.Addr().String()}, "listeners"},
		{"cache smaller than a block", []string{"diskless.cache.max.bytes=4096"}, "diskless.cache.max.bytes"},
		{"TLS listener without a keystore", []string{"listeners=SSL://127.0.0.1:0"}, "ssl.keystore.location"},
		{"missing keystore file", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.location=/nonexistent/k.pem"}, "ssl.keystore.location"},
		{"JKS keystore", []string{"listeners=SSL://127.0.0.1:0", "ssl.keystore.type=JKS"}, "ssl.keystore.type"},
		{"encrypted key", []string{"listeners=SSL://127.0.0.1:0", "ssl.key.password=secret"}, "ssl.key.password"},
		{"TLS 1.1", []string{"listeners=SSL://127.0.0.1:0", "ssl.enabled.protocols=TLSv1.1,TLSv1.2"}, "ssl.enabled.protocols"},
		{"bad client auth on one listener", []string{"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "listener.name.ssl.ssl.client.auth=always"}, "listener.name.ssl.ssl.client.auth"},
		{"bad mapping rule", []string{"listeners=SSL://127.0.0.1:0", "ssl.principal.mapping.rules=RULE:x"}, "ssl.principal.mapping.rules"},
		{"SASL mechanism not served", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=GSSAPI"}, "sasl.enabled.mechanisms"},
		{"PLAIN without users", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0"}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"PLAIN users unparsable", []string{"listeners=SASL_PLAINTEXT://127.0.0.1:0",
			`listener.name.sasl_plaintext.plain.sasl.jaas.config=PlainLoginModule required user_a="top-secret"`}, "listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{"backoff above its cap", []string{"diskless.upload.retry.backoff.ms=5000"}, "diskless.upload.retry.backoff.max.ms"},
		{"bad key prefix", []string{"diskless.object.key.prefix=../x"}, "diskless.object.key.prefix"},
		{"an OTLP protocol the sidecar lacks", []string{"otel.exporter.otlp.endpoint=http://127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"bad metadata topic", []string{"diskless.metadata.log=kafka", "diskless.metadata.kafka.bootstrap.servers=127.0.0.1:1", "diskless.metadata.topic=a/b"}, "diskless.metadata.topic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.key, "OTEL_") {
				t.Setenv(c.key, "http/json") // a variable the case names: a value the sidecar refuses
			}
			cfg := testConfig(t)
			cfg, err := LoadConfig("", append([]string{"listeners=PLAINTEXT://127.0.0.1:0", "http.listener=127.0.0.1:0", "data.dir=" + cfg.DataDir}, c.sets...))
			if err != nil {
				t.Fatal(err)
			}
			_, err = start(cfg, quiet)
			var ce *ConfigError
			if err == nil || !(errors.As(err, &ce) || errors.Is(err, errInvalidConfig)) || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("start: %v, want a configuration error naming %s", err, c.key)
			}
			if strings.Contains(err.Error(), "top-secret") {
				t.Fatalf("start: %v shows a password", err)
			}
			// Everything opened was closed: the data.dir can be used again.
			ok := testConfig(t)
			ok.DataDir = cfg.DataDir
			startStop(t, ok, "data.dir after a failed start")
		})
	}
}

// TestDataDirBindings: a data.dir is bound at first start to its node.id,
// shard count, object store and metadata log; a later start with another value is
// refused naming the key, before anything in the directory changes.
func TestDataDirBindings(t *testing.T) {
	cfg := testConfig(t)
	startStop(t, cfg, "first start")
	meta, err := os.ReadFile(filepath.Join(cfg.DataDir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cluster.id", "node.id = 0", "coordinator.shards = 1", "object.store = file", "metadata.log = embedded"} {
		if !strings.Contains(string(meta), want) {
			t.Fatalf("meta.properties lacks %q:\n%s", want, meta)
		}
	}
	before, _ := os.ReadDir(filepath.Join(cfg.DataDir, "coordinator"))
	for _, c := range []struct {
		set, key string
	}{
		{"node.id=3", "node.id"},
		{"diskless.metadata.topic.num.partitions=4", "diskless.metadata.topic.num.partitions"},
		{"diskless.storage.backend=s3", "diskless.storage.s3.bucket"},
		{"diskless.metadata.log=kafka", "diskless.metadata.log"},
	} {
		sets := []string{"listeners=PLAINTEXT://127.0.0.1:0", "http.listener=127.0.0.1:0", "data.dir=" + cfg.DataDir, c.set}
		if c.key == "diskless.storage.s3.bucket" {
			sets = append(sets, "diskless.storage.s3.bucket=b", "diskless.storage.s3.endpoint=http://127.0.0.1:1")
		}
		if c.key == "diskless.metadata.log" {
			sets = append(sets, "diskless.metadata.kafka.bootstrap.servers=127.0.0.1:1")
		}
		bad, err := LoadConfig("", sets)
		if err != nil {
			t.Fatal(err)
		}
		_, err = start(bad, quiet)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != c.key {
			t.Fatalf("start with %s: %v, want a refusal naming %s", c.set, err, c.key)
		}
	}
	after, _ := os.ReadDir(filepath.Join(cfg.DataDir, "coordinator"))
	if len(after) != len(before) {
		t.Fatalf("a refused start changed the coordinator directory: %d entries, then %d", len(before), len(after))
	}
	startStop(t, cfg, "the original settings after the refusals")
}

// TestFailedFirstStartBindsNothing: a first start that fails before the
// store answered (here, an S3 endpoint nobody listens on) leaves no
// meta.properties, so the same data.dir starts with corrected values.
func TestFailedFirstStartBindsNothing(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	dir := t.TempDir()
	base := []string{"listeners=PLAINTEXT://127.0.0.1:0", "http.listener=127.0.0.1:0", "data.dir=" + dir}
	bad, err := LoadConfig("", append(base, "diskless.storage.backend=s3",
		"diskless.storage.s3.bucket=mistyped", "diskless.storage.s3.endpoint=http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = start(bad, quiet)
	if err == nil {
		t.Fatal("start against an S3 endpoint nobody listens on succeeded")
	}
	if !strings.Contains(err.Error(), "diskless.storage.s3.endpoint: http://127.0.0.1:1") {
		t.Errorf("the refusal does not say where it looked: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "meta.properties")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed first start left meta.properties (stat: %v)", err)
	}
	good, err := LoadConfig("", base)
	if err != nil {
		t.Fatal(err)
	}
	startStop(t, good, "corrected values after a failed first start")
	meta, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil || !strings.Contains(string(meta), "object.store = file") {
		t.Fatalf("meta.properties after a good start: %q, %v", meta, err)
	}
}
