package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
)

// httpEndpoint serves the operator's HTTP endpoint (http.listener):
//
//	GET /metrics   the OpenTelemetry metrics in the Prometheus text format
//	GET /healthz   liveness, as JSON (healthJSON): 200 while the process
//	               runs and no coordinator shard has failed for good —
//	               a shard retrying its rebuild or reload because its log
//	               cannot be read for now (a Kafka broker restarting) is
//	               live: the retry heals it, a restart would only wait
//	               again; 503 naming the shards once one has failed for
//	               good (its log corrupt, or holding what it refuses: it
//	               answers KAFKA_STORAGE_ERROR until a restart, which a
//	               liveness probe does). Each shard's state (serving,
//	               loading, retrying, failed), role and cause is listed.
//	GET /readyz    readiness: 200 while the Kafka listener serves and every
//	               coordinator shard serves or loads; 503 before the
//	               listener serves, from the moment a shutdown starts
//	               (take the sidecar out of a load balancer before it
//	               stops), and while a shard is retrying or failed,
//	               naming the shards (their partitions answer
//	               KAFKA_STORAGE_ERROR or a replica's state stands still)
//	GET /v1/topics the topics as JSON, each with its id, partitions,
//	               configs set and diskless state and epoch (SPEC §10);
//	               503 until the coordinator is open
//	GET /v1/groups the consumer groups as JSON: each group's type, state
//	               and protocol type, and its committed offsets
//	               (topic → partition → offset, leader epoch, metadata,
//	               commit time); 503 until the coordinator is open
type httpEndpoint struct {
	srv   *http.Server
	ln    net.Listener
	ready atomic.Bool
	// health, once set, is what /healthz and /readyz ask.
	health atomic.Pointer[healthSource]
	// topics, once set, lists the topics for /v1/topics.
	topics atomic.Pointer[func() []diskless.Topic]
	// groups, once set, lists the groups for /v1/groups.
	groups atomic.Pointer[func(context.Context) ([]groupJSON, error)]
	done   chan struct{}
}

func startHTTP(addr string, metrics http.Handler, log *slog.Logger) (*httpEndpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &ConfigError{Key: "http.listener", Value: addr, Err: err}
	}
	e := &httpEndpoint{ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		doc, code := healthJSON{Status: "ok"}, http.StatusOK
		if src := e.health.Load(); src != nil {
			h := (*src).Health()
			if err := live(h); err != nil {
				doc.Status, doc.Error, code = "failed", err.Error(), http.StatusServiceUnavailable
			}
			doc.Shards = shardsJSON(h.Shards)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.Encode(doc)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !e.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if src := e.health.Load(); src != nil {
			if err := (*src).Health().Unserved(); err != nil && !errors.Is(err, diskless.ErrClosed) {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /v1/topics", func(w http.ResponseWriter, _ *http.Request) {
		list := e.topics.Load()
		if list == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(topicsJSON((*list)()))
	})
	mux.HandleFunc("GET /v1/groups", func(w http.ResponseWriter, r *http.Request) {
		list := e.groups.Load()
		if list == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		gs, err := (*list)(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(gs)
	})
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(e.done)
		if err := e.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http endpoint stopped", slog.Any("err", err))
		}
	}()
	log.Info("http endpoint started", slog.String("addr", ln.Addr().String()))
	return e, nil
}

// setTopics makes /v1/topics answer from list.
func (e *httpEndpoint) setTopics(list func() []diskless.Topic) { e.topics.Store(&list) }

// setGroups makes /v1/groups answer from list.
func (e *httpEndpoint) setGroups(list func(context.Context) ([]groupJSON, error)) {
	e.groups.Store(&list)
}

// groupJSON is one consumer group on /v1/groups.
type groupJSON struct {
	Group        string `json:"group"`
	Type         string `json:"type"`  // classic or consumer
	State        string `json:"state"` // Kafka's: Empty, Stable, PreparingRebalance, …
	ProtocolType string `json:"protocol_type"`
	// Offsets are the committed offsets: topic → partition → offset.
	Offsets map[string]map[string]offsetJSON `json:"offsets"`
}

// offsetJSON is one committed offset on /v1/groups.
type offsetJSON struct {
	Offset          int64  `json:"offset"`
	LeaderEpoch     int32  `json:"leader_epoch"`
	Metadata        string `json:"metadata"`
	CommitTimestamp int64  `json:"commit_timestamp"` // ms
}

// groupsJSON lists the groups of c with their committed offsets.
func groupsJSON(ctx context.Context, c *coordinator.Coordinator) ([]groupJSON, error) {
	listed, err := c.ListGroups(ctx, kmsg.NewPtrListGroupsRequest())
	if err != nil {
		return nil, err
	}
	offsets := c.GroupOffsets()
	out := make([]groupJSON, 0, len(listed))
	for _, g := range listed {
		gj := groupJSON{Group: g.Group, Type: g.GroupType, State: g.GroupState, ProtocolType: g.ProtocolType,
			Offsets: map[string]map[string]offsetJSON{}}
		for topic, parts := range offsets[g.Group] {
			m := make(map[string]offsetJSON, len(parts))
			for p, v := range parts {
				m[strconv.Itoa(int(p))] = offsetJSON{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp}
			}
			gj.Offsets[topic] = m
		}
		out = append(out, gj)
	}
	return out, nil
}

// topicJSON is one topic on /v1/topics.
type topicJSON struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
	// State is ENABLED, DISABLING or DISABLED, Epoch the disablement
	// epoch (0: never disabled), Policy retain or delete (SPEC §10).
	State  string `json:"state"`
	Epoch  int32  `json:"epoch"`
	Policy string `json:"policy"`
}

func topicsJSON(ts []diskless.Topic) []topicJSON {
	out := make([]topicJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, topicJSON{Name: t.Name, ID: t.ID.String(), Partitions: t.Partitions, Configs: t.Config.Raw,
			State: t.Disablement.State.String(), Epoch: t.Disablement.Epoch, Policy: t.Disablement.Policy.String()})
	}
	return out
}

// healthSource is what /healthz and /readyz ask: a
// coordinator.Coordinator. Each answer is built from one Health reading
// (liveness, readiness and the shards' list agree).
type healthSource interface {
	Health() coordinator.Health
}

// setHealth makes /healthz and /readyz answer from src. Until it is
// called (start-up), /healthz answers 200 and /readyz asks only the
// listener.
func (e *httpEndpoint) setHealth(src healthSource) { e.health.Store(&src) }

// live is /healthz's check (and diskless.coordinator.failed's): a shard
// failed for good makes the process unhealthy. A coordinator closing in
// a graceful stop does not: the process is finishing its files and will
// exit by itself.
func live(src interface{ Err() error }) error {
	if err := src.Err(); err != nil && !errors.Is(err, diskless.ErrClosed) {
		return err
	}
	return nil
}

// healthJSON is /healthz's answer.
type healthJSON struct {
	// Status is ok (200) or failed (503: Error names the shards failed
	// for good).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Shards lists every coordinator shard once the coordinator is open.
	Shards []shardJSON `json:"shards,omitempty"`
}

// shardJSON is one coordinator shard on /healthz.
type shardJSON struct {
	Shard int32 `json:"shard"`
	// Role is hosted (this sidecar owns the shard) or replica.
	Role string `json:"role"`
	// State is serving, loading, retrying or failed
	// (coordinator.ShardState).
	State string `json:"state"`
	// Error is the cause of retrying (the last attempt's) or failed.
	Error string `json:"error,omitempty"`
}

func shardsJSON(hs []coordinator.ShardHealth) []shardJSON {
	out := make([]shardJSON, len(hs))
	for i, h := range hs {
		out[i] = shardJSON{Shard: h.Shard, Role: "replica", State: h.State.String()}
		if h.Hosted {
			out[i].Role = "hosted"
		}
		if h.Err != nil {
			out[i].Error = h.Err.Error()
		}
	}
	return out
}

func (e *httpEndpoint) close(ctx context.Context) {
	e.ready.Store(false)
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close()
	}
	<-e.done
}
