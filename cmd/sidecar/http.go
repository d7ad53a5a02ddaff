package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// httpEndpoint serves the operator's HTTP endpoint (http.listener):
//
//	GET /metrics   the OpenTelemetry metrics in the Prometheus text format
//	GET /healthz   200 while the process runs and every coordinator shard
//	               serves; 503 naming the shards when one has failed (it
//	               answers KAFKA_STORAGE_ERROR until a restart, so a
//	               liveness probe that restarts the process is the cure)
//	GET /readyz    200 while the Kafka listener serves, 503 before it does
//	               and from the moment a shutdown starts (readiness: take
//	               the sidecar out of a load balancer before it stops)
type httpEndpoint struct {
	srv   *http.Server
	ln    net.Listener
	ready atomic.Bool
	// health, once set, reports what /healthz answers: nil is healthy.
	health atomic.Pointer[func() error]
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
		if check := e.health.Load(); check != nil {
			if err := (*check)(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !e.ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
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

// setHealth makes /healthz answer 503 with check's error whenever it
// returns one. Until it is called (start-up), /healthz answers 200.
func (e *httpEndpoint) setHealth(check func() error) { e.health.Store(&check) }

func (e *httpEndpoint) close(ctx context.Context) {
	e.ready.Store(false)
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close()
	}
	<-e.done
}
