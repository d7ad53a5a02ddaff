package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// fakeHealth is a coordinator whose health is set by the test.
type fakeHealth struct {
	mu sync.Mutex
	h  coordinator.Health
}

func (c *fakeHealth) set(closed bool, shards ...coordinator.ShardHealth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.h = coordinator.Health{Closed: closed, Shards: shards}
}

func (c *fakeHealth) Health() coordinator.Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.h
}

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
// coordinator is wired and while it is healthy, has a shard retrying
// (live: the retry heals it) or is closing (a graceful stop), and 503
// naming the shard once one has failed for good; its JSON lists each
// shard's role, state and cause. /readyz answers 503 while a shard is
// retrying or failed, naming it, as before the listener serves.
func TestHealthzReportsFailedShards(t *testing.T) {
	e, err := startHTTP("127.0.0.1:0", http.NotFoundHandler(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close(context.Background())
	base := "http://" + e.ln.Addr().String()
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz before the coordinator opened: %d, want 200", code)
	}
	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Fatalf("/readyz before the listener serves: %d, want 503", code)
	}
	e.ready.Store(true)
	c := &fakeHealth{}
	e.setHealth(c)
	serving := coordinator.ShardHealth{Shard: 0, Hosted: true, State: coordinator.ShardServing}
	replica := coordinator.ShardHealth{Shard: 2, State: coordinator.ShardServing}
	gone := errors.New("coordinator: shard 1: replay: broker closed the connection")
	retrying := coordinator.ShardHealth{Shard: 1, Hosted: true, State: coordinator.ShardRetrying, Err: gone}
	diskFull := fmt.Errorf("%w: shard 1: metadata log write: no space left on device", diskless.ErrShardFailed)
	failed := coordinator.ShardHealth{Shard: 1, Hosted: true, State: coordinator.ShardFailed, Err: diskFull}
	for _, tc := range []struct {
		name      string
		closed    bool
		shards    []coordinator.ShardHealth
		health    int
		status    string
		want      []shardJSON
		ready     int
		readyBody string
	}{
		{"healthy", false, []coordinator.ShardHealth{serving, replica}, 200, "ok",
			[]shardJSON{{0, "hosted", "serving", ""}, {2, "replica", "serving", ""}}, 200, "ready"},
		{"shard retrying", false, []coordinator.ShardHealth{serving, retrying, replica}, 200, "ok",
			[]shardJSON{{0, "hosted", "serving", ""}, {1, "hosted", "retrying", gone.Error()}, {2, "replica", "serving", ""}},
			503, "shard 1 retrying: coordinator: shard 1: replay: broker closed the connection"},
		{"shard failed", false, []coordinator.ShardHealth{serving, failed}, 503, "failed",
			[]shardJSON{{0, "hosted", "serving", ""}, {1, "hosted", "failed", diskFull.Error()}},
			503, "shard 1: metadata log write: no space left on device"},
		{"closing", true, []coordinator.ShardHealth{serving}, 200, "ok",
			[]shardJSON{{0, "hosted", "serving", ""}}, 200, "ready"},
	} {
		c.set(tc.closed, tc.shards...)
		code, body := get(t, base+"/healthz")
		var doc healthJSON
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%s: /healthz %d %q: %v", tc.name, code, body, err)
		}
		if code != tc.health || doc.Status != tc.status || !reflect.DeepEqual(doc.Shards, tc.want) {
			t.Errorf("%s: /healthz %d %q, want %d, status %s and shards %+v", tc.name, code, body, tc.health, tc.status, tc.want)
		}
		if tc.health == 503 && !strings.Contains(doc.Error, diskFull.Error()) {
			t.Errorf("%s: /healthz error %q, want the shard named", tc.name, doc.Error)
		}
		if code, body := get(t, base+"/readyz"); code != tc.ready || !strings.Contains(body, tc.readyBody) {
			t.Errorf("%s: /readyz %d %q, want %d with %q", tc.name, code, body, tc.ready, tc.readyBody)
		}
	}
}

// TestHealthzOnARealCoordinator: a started sidecar's /healthz and /readyz
// ask its coordinator, which is healthy: every shard listed, hosted and
// serving.
func TestHealthzOnARealCoordinator(t *testing.T) {
	cfg := testConfig(t)
	a, err := start(cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.shutdown(10 * time.Second)
	if a.http.health.Load() == nil {
		t.Fatal("/healthz is not wired to the coordinator")
	}
	base := "http://" + a.http.ln.Addr().String()
	code, body := get(t, base+"/healthz")
	var doc healthJSON
	if err := json.Unmarshal([]byte(body), &doc); err != nil || code != 200 || doc.Status != "ok" || len(doc.Shards) != int(a.coord.NumShards()) {
		t.Fatalf("/healthz %d %q (%v), want 200, ok and %d shards", code, body, err, a.coord.NumShards())
	}
	for _, sh := range doc.Shards {
		if sh.Role != "hosted" || sh.State != "serving" {
			t.Fatalf("/healthz shard %+v, want hosted and serving", sh)
		}
	}
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz %d %q, want 200", code, body)
	}
}

// flipHealth is a coordinator whose health flips between a shard failed
// and every shard serving at each reading.
type flipHealth struct {
	mu    sync.Mutex
	reads int
}

func (c *flipHealth) Health() coordinator.Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	state := coordinator.ShardServing
	var err error
	if c.reads%2 == 1 {
		state, err = coordinator.ShardFailed, fmt.Errorf("%w: shard 0: metadata log corrupt", diskless.ErrShardFailed)
	}
	return coordinator.Health{Shards: []coordinator.ShardHealth{{Shard: 0, Hosted: true, State: state, Err: err}}}
}

// TestHealthzOneReading: /healthz answers from one reading of the
// coordinator's health, so its status and code agree with the shards it
// lists even while the health changes between readings. Before, it read
// liveness and the shards' list in two passes, and an answer could say
// failed (503) listing every shard serving, or ok listing one failed.
func TestHealthzOneReading(t *testing.T) {
	e, err := startHTTP("127.0.0.1:0", http.NotFoundHandler(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close(context.Background())
	base := "http://" + e.ln.Addr().String()
	e.setHealth(&flipHealth{})
	for range 4 {
		code, body := get(t, base+"/healthz")
		var doc healthJSON
		if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Shards) != 1 {
			t.Fatalf("/healthz %d %q (%v), want one shard", code, body, err)
		}
		failed := doc.Shards[0].State == "failed"
		if (code == 503) != failed || (doc.Status == "failed") != failed {
			t.Fatalf("/healthz %d, status %s, listing shard 0 %s: the answer disagrees with itself", code, doc.Status, doc.Shards[0].State)
		}
	}
}
