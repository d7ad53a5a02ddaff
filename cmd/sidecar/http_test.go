package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// coordErr is a coordinator whose Err is set by the test.
type coordErr struct{ err error }

func (c *coordErr) Err() error { return c.err }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}} // no idle conns for goleak
	resp, err := c.Get(url)
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

// TestHealthzReportsFailedShards: /healthz answers 200 before the
// coordinator is wired and while it is healthy or closing (a graceful stop),
// and 503 naming the shard once one has failed.
func TestHealthzReportsFailedShards(t *testing.T) {
	e, err := startHTTP("127.0.0.1:0", http.NotFoundHandler(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close(context.Background())
	url := "http://" + e.ln.Addr().String() + "/healthz"
	if code, _ := get(t, url); code != 200 {
		t.Fatalf("/healthz before the coordinator opened: %d, want 200", code)
	}
	c := &coordErr{}
	e.setHealth(coordinatorHealth(c))
	for _, tc := range []struct {
		name string
		err  error
		code int
		body string
	}{
		{"healthy", nil, 200, "ok"},
		{"shard failed", fmt.Errorf("%w: shard 1: metadata log write: no space left on device", diskless.ErrShardFailed), 503, "shard 1: metadata log write: no space left on device"},
		{"closing", diskless.ErrClosed, 200, "ok"},
	} {
		c.err = tc.err
		if code, body := get(t, url); code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: /healthz %d %q, want %d with %q", tc.name, code, body, tc.code, tc.body)
		}
	}
}

// TestHealthzOnARealCoordinator: a started sidecar's /healthz asks its
// coordinator, which is healthy.
func TestHealthzOnARealCoordinator(t *testing.T) {
	a, err := start(testConfig(t), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.shutdown(10 * time.Second)
	if a.http.health.Load() == nil {
		t.Fatal("/healthz is not wired to the coordinator")
	}
	if code, body := get(t, "http://"+a.http.ln.Addr().String()+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d %q, want 200", code, body)
	}
}
