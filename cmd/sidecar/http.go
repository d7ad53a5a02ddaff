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
//	GET /healthz   200 while the process runs (liveness)
//	GET /readyz    200 while the Kafka listener serves, 503 before it does
//	               and from the moment a shutdown starts (readiness: take
//	               the sidecar out of a load balancer before it stops)
type httpEndpoint struct {
	srv   *http.Server
	ln    net.Listener
	ready atomic.Bool
	done  chan struct{}
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

func (e *httpEndpoint) close(ctx context.Context) {
	e.ready.Store(false)
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close()
	}
	<-e.done
}
