package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/versitygw"
)

// s3Sets starts versitygw with a bucket and returns the keys that point a
// sidecar at it; the credentials go through the environment, as in
// production (the SDK's default chain).
func s3Sets(t *testing.T, bucket string) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts versitygw; skipped with -short")
	}
	gw := versitygw.Start(t)
	gw.CreateBucket(t, "sidecar")
	t.Setenv("AWS_ACCESS_KEY_ID", versitygw.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", versitygw.SecretKey)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	return []string{
		"diskless.storage.backend=s3",
		"diskless.storage.s3.bucket=" + bucket,
		"diskless.storage.s3.endpoint=" + gw.Endpoint,
		"diskless.storage.s3.path.style=true",
		"diskless.storage.s3.region=" + versitygw.Region,
		"diskless.storage.s3.prefix=cluster-1",
	}
}

// TestStartWithS3 starts every component on an S3 store (versitygw) and
// stops them, leaking nothing.
func TestStartWithS3(t *testing.T) {
	startStop(t, testConfig(t, s3Sets(t, "sidecar")...), "on S3")
}

// TestStartWithS3Failures: a missing bucket is a configuration error
// naming the key; an unreachable store is not (a supervisor retries).
func TestStartWithS3Failures(t *testing.T) {
	cfg := testConfig(t, s3Sets(t, "no-such-bucket")...)
	_, err := start(cfg, quiet)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "diskless.storage.s3.bucket" {
		t.Fatalf("start with a missing bucket: %v, want a ConfigError naming diskless.storage.s3.bucket", err)
	}
	cfg = testConfig(t, append(s3Sets(t, "sidecar"), "diskless.storage.s3.endpoint=http://127.0.0.1:1")...)
	_, err = start(cfg, quiet)
	if err == nil || errors.As(err, &ce) || errors.Is(err, errInvalidConfig) {
		t.Fatalf("start with an unreachable store: %v, want a runtime error", err)
	}
	for _, c := range []struct{ set, key string }{
		{"diskless.storage.s3.endpoint=localhost:9000", "diskless.storage.s3.endpoint"},
		{"diskless.storage.s3.prefix=/abs", "diskless.storage.s3.prefix"},
	} {
		cfg = testConfig(t, append(s3Sets(t, "sidecar"), c.set)...)
		if _, err := start(cfg, quiet); !errors.Is(err, errInvalidConfig) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("start with %s: %v, want an invalid configuration naming %s", c.set, err, c.key)
		}
	}
}
