package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readBufferSize is the connection's read buffer: large enough that small
// requests take one read syscall.
const readBufferSize = 64 << 10

// keepWriteBuffer is the largest response buffer kept for reuse between
// responses; bigger ones (large fetches) are left to the garbage collector.
const keepWriteBuffer = 1 << 20

// conn is one client connection: a reader goroutine that decodes requests
// and a writer goroutine that answers them in order.
type conn struct {
	s *Server
	// listener is the listener the connection came in on.
	listener *boundListener
	// nc is the connection, a *tls.Conn on an SSL or SASL_SSL listener
	// (its handshake run by the reader before the first request).
	nc     net.Conn
	remote string
	// host is remote without its port: the subject of the connection's
	// rate-limited lines, so that a client reconnecting counts as one.
	host string

	// cancel cancels the connection's context; set before the goroutines
	// start.
	cancel context.CancelFunc

	// queue carries requests from the reader to the writer in request
	// order. inflight holds one token per request read and not yet answered
	// (acquired by the reader before it reads a request, released by the
	// writer); queue has the same capacity, so sends on it never block.
	queue    chan *pending
	inflight chan struct{}

	// stopRead is closed by Shutdown: the reader stops reading requests;
	// readCtx is cancelled with it (and with the connection's context) so
	// that a reader waiting for request budget stops waiting.
	stopRead     chan struct{}
	stopReadOnce sync.Once
	readCtx      context.Context
	readCancel   context.CancelFunc

	failed    atomic.Bool
	closeOnce sync.Once

	// log is the connection-scoped logger; the reader replaces it when the
	// client id changes.
	log atomic.Pointer[slog.Logger]

	// sasl is the authentication state of a SASL listener's connection
	// (sasl.go), nil on the others; only the reader touches it.
	sasl *saslConn

	// principal is who the connection authenticated as (SPEC §14,
	// Principals): AnonymousPrincipal until the TLS handshake or SASL
	// says otherwise. Requests read it through their context.
	principal principalBox
}

// pending is one request read and not yet answered.
type pending struct {
	key           int16
	version       int16
	correlationID int32
	// flexibleHeader selects response header v1.
	flexibleHeader bool
	// noResponse is set for acks=0 produce: nothing is written.
	noResponse bool
	// raw answers a bare SASL message (after SaslHandshake v0): rawAnswer
	// is written with a size prefix only.
	raw       bool
	rawAnswer []byte
	// closeAfter ends the connection once this answer is written (a failed
	// authentication): the reader reads no more, and the writer closes
	// the connection FailedAuthDelay after writing.
	closeAfter bool
	// budget is the request bytes taken from Server.reqBudget for this
	// request's frame, given back once it is answered.
	budget int64

	// wait, for inline routes, blocks until the response is ready.
	wait func() kmsg.Response
	// done, for async routes, is closed once resp (or panicked) is set.
	done     chan struct{}
	resp     kmsg.Response
	panicked bool
}

func newConn(s *Server, l *boundListener, nc net.Conn) *conn {
	n := s.cfg.MaxInflightPerConn
	remote := nc.RemoteAddr()
	if l.TLS != nil {
		nc = tls.Server(nc, l.TLS)
	}
	c := &conn{
		s:        s,
		listener: l,
		nc:       nc,
		remote:   remote.String(),
		host:     peerHost(remote),
		queue:    make(chan *pending, n),
		inflight: make(chan struct{}, n),
		stopRead: make(chan struct{}),
	}
	c.readCtx, c.readCancel = context.WithCancel(context.Background())
	c.log.Store(s.log.With("remote", c.remote))
	c.principal.set(AnonymousPrincipal)
	if len(l.SASL) > 0 {
		c.sasl = &saslConn{mechs: l.SASL}
	}
	return c
}

// stopReading makes the reader stop before its next request (Shutdown): a
// read in progress is interrupted with a past deadline.
func (c *conn) stopReading() {
	c.stopReadOnce.Do(func() {
		close(c.stopRead)
		c.readCancel()
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func (c *conn) stopping() bool {
	select {
	case <-c.stopRead:
		return true
	default:
		return false
	}
}

// fail closes the connection and cancels its context; the writer then only
// waits for the requests still in flight, writing nothing. Idempotent.
func (c *conn) fail() {
	c.failed.Store(true)
	c.closeOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
		}
		c.readCancel()
		_ = c.nc.Close()
	})
}

// readLoop reads, decodes and dispatches requests until the connection fails
// or Shutdown stops it; it then closes the queue so the writer can finish.
func (c *conn) readLoop(ctx context.Context) {
	defer c.s.conns.Done()
	defer close(c.queue)
	stop := context.AfterFunc(ctx, c.readCancel)
	defer stop()
	c.log.Load().Debug("connection opened", "listener", c.listener.Name)
	if tc, ok := c.nc.(*tls.Conn); ok && !c.handshake(ctx, tc) {
		return
	}
	br := bufio.NewReaderSize(c.nc, readBufferSize)
	var ident clientIdent
	for {
		select {
		case c.inflight <- struct{}{}:
		case <-c.stopRead:
			return
		case <-ctx.Done():
			return
		}
		p, err := c.readRequest(ctx, br, &ident)
		if err != nil {
			<-c.inflight
			if errors.Is(err, errIdleButBusy) {
				continue
			}
			if errors.Is(err, errSASLState) {
				c.limited(slog.LevelInfo, "", "closing connection: request refused by the SASL state", slog.Any("err", err))
				c.fail()
			} else if errors.Is(err, errBadRequest) {
				c.limited(slog.LevelInfo, "", "closing connection: bad request", slog.Any("err", err))
				c.fail()
			} else {
				c.readFailed(err)
			}
			return
		}
		if p == nil { // Shutdown
			<-c.inflight
			return
		}
		c.queue <- p
		if p.closeAfter {
			return
		}
	}
}

// handshake runs the TLS handshake within Config.TLSHandshakeTimeout and
// takes the principal from the client's certificate. A failure (no TLS,
// a certificate refused, expired or mapped by no rule, a timeout) is
// logged rate-limited, as Kafka logs a failed authentication, and closes
// the connection: it reports false.
func (c *conn) handshake(ctx context.Context, tc *tls.Conn) bool {
	hctx, cancel := context.WithTimeout(ctx, c.s.cfg.TLSHandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(c.readCtx, cancel) // Shutdown
	defer stop()
	err := tc.HandshakeContext(hctx)
	principal := AnonymousPrincipal
	if err == nil {
		principal, err = c.listener.certPrincipal(tc.ConnectionState())
	}
	if err != nil {
		switch {
		case c.stopping() || ctx.Err() != nil:
		case errors.Is(err, io.EOF):
			// Closed before a hello: a client that dialed and changed its
			// mind (kgo does at close), not a failed authentication.
			c.log.Load().Debug("connection closed before the TLS handshake", "listener", c.listener.Name)
		default:
			c.limited(slog.LevelInfo, "", "failed authentication: TLS handshake failed",
				slog.String("listener", c.listener.Name), slog.Any("err", err))
		}
		c.fail()
		return false
	}
	c.principal.set(principal)
	c.log.Load().Debug("TLS handshake done", "principal", principal, "version", tls.VersionName(tc.ConnectionState().Version))
	return true
}

var (
	// errIdleButBusy: the idle timeout passed between frames while
	// requests are still in flight; the connection is not idle.
	errIdleButBusy = errors.New("idle timeout with requests in flight")
	// errBadRequest wraps a decode or dispatch failure.
	errBadRequest = errors.New("bad request")
)

// readRequest reads one frame, holding request budget for it, and decodes
// and dispatches it. It returns nil, nil when Shutdown stopped reading.
// The read deadline is the idle timeout; it is re-armed before each read
// and Shutdown's is never lost: stopping is checked after arming.
func (c *conn) readRequest(ctx context.Context, br *bufio.Reader, ident *clientIdent) (*pending, error) {
	idle := c.s.cfg.IdleTimeout
	_ = c.nc.SetReadDeadline(time.Now().Add(idle))
	if c.stopping() {
		return nil, nil
	}
	maxBytes := c.s.cfg.MaxRequestBytes
	if c.sasl != nil && c.sasl.step != saslDone {
		// Before authentication: Kafka's sasl.server.max.receive.size.
		maxBytes = min(maxBytes, saslMaxReceive)
	}
	n, read, err := readFrameSize(br, maxBytes)
	if err != nil {
		if read == 0 && errors.Is(err, os.ErrDeadlineExceeded) && !c.stopping() && len(c.inflight) > 1 {
			return nil, errIdleButBusy
		}
		return nil, err
	}
	// Hold budget for the frame until it is answered; a frame larger than
	// the budget waits for all of it.
	budget := min(int64(n), c.s.cfg.MaxQueuedRequestBytes)
	if err := c.s.reqBudget.Acquire(c.readCtx, budget); err != nil {
		if c.stopping() {
			return nil, nil
		}
		return nil, err
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(idle))
	if c.stopping() {
		c.s.reqBudget.Release(budget)
		return nil, nil
	}
	frame, err := readFrameBody(br, n)
	if err != nil {
		c.s.reqBudget.Release(budget)
		return nil, err
	}
	if c.sasl != nil && c.sasl.step == saslRawToken {
		p := c.saslRawTokenPending(frame)
		p.budget = budget
		return p, nil
	}
	p, err := c.decode(ctx, frame, ident)
	if err != nil {
		c.s.reqBudget.Release(budget)
		return nil, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	p.budget = budget
	return p, nil
}

// readFailed logs why reading stopped and closes the connection unless the
// stop was Shutdown's.
func (c *conn) readFailed(err error) {
	switch {
	case c.stopping():
		return // Shutdown: the writer drains, then closes.
	case c.failed.Load() || errors.Is(err, net.ErrClosed):
		// Closed by us (writer failure, hard stop).
	case errors.Is(err, io.EOF):
		c.log.Load().Debug("connection closed by client")
	case errors.Is(err, errFrame):
		c.limited(slog.LevelInfo, "", "closing connection: bad frame", slog.Any("err", err))
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.log.Load().Debug("closing connection: read deadline", "err", err)
	default:
		c.log.Load().Debug("closing connection: read failed", "err", err)
	}
	c.fail()
}

// decode parses one request frame and dispatches it, returning what the
// writer must wait for. Errors mean the connection must close. A panic while
// decoding or dispatching is recovered and returned as an error (logged at
// error with its stack).
func (c *conn) decode(ctx context.Context, frame []byte, ident *clientIdent) (p *pending, err error) {
	h := parseFixedHeader(frame)
	defer func() {
		if r := recover(); r != nil {
			c.limited(slog.LevelError, nameForKey(h.key), "panic handling request", slog.String("api", nameForKey(h.key)),
				slog.Int("version", int(h.version)), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			p, err = nil, fmt.Errorf("panic handling %s v%d: %v", nameForKey(h.key), h.version, r)
		}
	}()

	if c.sasl != nil {
		if err := c.saslAdmit(h); err != nil {
			return nil, err
		}
	}
	lo, hi, known := c.s.versionRange(h.key)
	if h.key == apiVersionsKey && (h.version < lo || h.version > hi) {
		// The body's format is unknown: answer without reading it.
		return c.ready(h, false, apiVersionsUnsupported()), nil
	}
	if !known {
		return nil, fmt.Errorf("%w: unknown api key %d", errFrame, h.key)
	}
	if h.version < lo || h.version > hi {
		return nil, fmt.Errorf("%w: %s v%d not supported (v%d–v%d)", errFrame, nameForKey(h.key), h.version, lo, hi)
	}
	rt, _ := routeFor(h.key)
	req := requestForKey(h.key)
	req.SetVersion(h.version)
	id, body, err := parseHeaderRest(frame, req.IsFlexible())
	if err != nil {
		return nil, err
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d body: %v", errFrame, nameForKey(h.key), h.version, err)
	}
	if identify(ident, id, req) {
		c.log.Store(ident.logger(c.s.log, c.remote))
	}

	// ApiVersions' response header is always v0 (SPEC §6).
	flexHeader := req.IsFlexible() && h.key != apiVersionsKey
	p = &pending{key: h.key, version: h.version, correlationID: h.correlationID, flexibleHeader: flexHeader}
	if pr, ok := req.(*kmsg.ProduceRequest); ok && pr.Acks == 0 {
		p.noResponse = true
	}
	if c.sasl != nil && (h.key == saslHandshakeVersions.ApiKey || h.key == saslAuthenticateVersions.ApiKey) {
		if resp, closeAfter, ok := c.saslRequest(req); ok {
			p = c.ready(h, flexHeader, resp)
			p.closeAfter = closeAfter
			return p, nil
		}
	}
	switch h.key {
	case joinGroupVersions.ApiKey, consumerGroupHeartbeatVersions.ApiKey, metadataVersions.ApiKey, findCoordinatorVersions.ApiKey,
		createTopicsVersions.ApiKey, deleteTopicsVersions.ApiKey, createPartitionsVersions.ApiKey,
		alterConfigsVersions.ApiKey, incrementalAlterConfigsVersions.ApiKey:
		// Members record their client's id and host; Metadata and
		// FindCoordinator answer by the client's zone; the admin requests
		// a sidecar forwarded are not forwarded again (controller.go).
		cid := ""
		if id != nil {
			cid = *id
		}
		ctx = withClient(ctx, cid, c.remote)
	}
	if rt.inline != nil {
		p.wait = rt.inline(c.s, ctx, req)
		return p, nil
	}
	p.done = make(chan struct{})
	go c.runAsync(ctx, rt, req, p)
	return p, nil
}

// clientIdent is what the client says about itself; it scopes the
// connection's log records.
type clientIdent struct {
	clientID string
	// software is ApiVersions v3+'s client software name/version (KIP-511).
	software string
}

// identify updates ident from a request's header and body and reports
// whether it changed.
func identify(ident *clientIdent, clientID *string, req kmsg.Request) bool {
	changed := false
	if clientID != nil && *clientID != ident.clientID {
		ident.clientID, changed = *clientID, true
	}
	if av, ok := req.(*kmsg.ApiVersionsRequest); ok && av.Version >= 3 {
		if sw := av.ClientSoftwareName + "/" + av.ClientSoftwareVersion; sw != ident.software {
			ident.software, changed = sw, true
		}
	}
	return changed
}

func (ident *clientIdent) logger(base *slog.Logger, remote string) *slog.Logger {
	attrs := []any{"remote", remote}
	if ident.clientID != "" {
		attrs = append(attrs, "client_id", ident.clientID)
	}
	if ident.software != "" {
		attrs = append(attrs, "client_software", ident.software)
	}
	return base.With(attrs...)
}

// ready returns a pending whose response is already known.
func (c *conn) ready(h header, flexibleHeader bool, resp kmsg.Response) *pending {
	p := &pending{key: h.key, version: resp.GetVersion(), correlationID: h.correlationID,
		flexibleHeader: flexibleHeader, done: make(chan struct{}), resp: resp}
	close(p.done)
	return p
}

// runAsync runs an async handler, recovering a panic into p.panicked.
func (c *conn) runAsync(ctx context.Context, rt route, req kmsg.Request, p *pending) {
	defer close(p.done)
	defer func() {
		if r := recover(); r != nil {
			c.limited(slog.LevelError, nameForKey(p.key), "panic handling request", slog.String("api", nameForKey(p.key)),
				slog.Int("version", int(p.version)), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			p.resp, p.panicked = nil, true
		}
	}()
	p.resp = rt.async(c.s, ctx, req)
}

// await waits for p's response; ok is false if its handler panicked.
func (c *conn) await(p *pending) (resp kmsg.Response, ok bool) {
	if p.wait == nil {
		<-p.done
		return p.resp, !p.panicked
	}
	defer func() {
		if r := recover(); r != nil {
			c.limited(slog.LevelError, nameForKey(p.key), "panic awaiting response", slog.String("api", nameForKey(p.key)),
				slog.Int("version", int(p.version)), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			resp, ok = nil, false
		}
	}()
	return p.wait(), true
}

// writeLoop answers queued requests in order. After the connection failed it
// keeps waiting for every queued request (joining their handlers) without
// writing. When the queue is closed and drained it closes the connection.
func (c *conn) writeLoop(ctx context.Context) {
	defer c.s.conns.Done()
	defer c.s.removeConn(c)
	defer func() {
		c.fail()
		c.log.Load().Debug("connection closed")
	}()
	var buf []byte
	for p := range c.queue {
		resp, ok := c.await(p)
		<-c.inflight
		c.s.reqBudget.Release(p.budget)
		if c.failed.Load() || ctx.Err() != nil {
			// The connection failed or the server is stopping hard:
			// only join the remaining handlers.
			continue
		}
		if !ok {
			c.fail()
			continue
		}
		if p.noResponse {
			if p.closeAfter {
				c.closeAfterFailedAuth(ctx)
			}
			continue
		}
		if p.raw {
			buf = appendRaw(buf[:0], p.rawAnswer)
		} else if resp == nil {
			c.limited(slog.LevelError, nameForKey(p.key), "closing connection: handler returned no response",
				slog.String("api", nameForKey(p.key)), slog.Int("version", int(p.version)))
			c.fail()
			continue
		}
		var err error
		if !p.raw {
			buf, err = c.encode(buf[:0], p, resp)
		}
		if err != nil {
			c.limited(slog.LevelError, nameForKey(p.key), "closing connection: cannot encode response",
				slog.String("api", nameForKey(p.key)), slog.Int("version", int(p.version)), slog.Any("err", err))
			c.fail()
			continue
		}
		// A client that stops reading its responses must not pin this
		// connection's requests (and their budget) forever.
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.IdleTimeout))
		if _, err := c.nc.Write(buf); err != nil {
			if !c.failed.Load() && ctx.Err() == nil {
				c.log.Load().Debug("closing connection: write failed", "err", err)
			}
			c.fail()
			continue
		}
		if p.closeAfter {
			c.closeAfterFailedAuth(ctx)
		}
		if cap(buf) > keepWriteBuffer {
			buf = nil
		}
	}
}

// closeAfterFailedAuth closes the connection FailedAuthDelay after a failed
// authentication's answer (Kafka's connection.failed.authentication.delay.ms).
func (c *conn) closeAfterFailedAuth(ctx context.Context) {
	t := time.NewTimer(c.s.cfg.FailedAuthDelay)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	case <-c.stopRead:
		t.Stop()
	}
	c.fail()
}

// appendRaw appends a size-prefixed bare SASL message.
func appendRaw(dst, msg []byte) []byte {
	return append(binary.BigEndian.AppendUint32(dst, uint32(len(msg))), msg...)
}

// encode appends p's response frame to dst. The response is forced to the
// request's version; a response of another API key is a broken handler.
func (c *conn) encode(dst []byte, p *pending, resp kmsg.Response) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.limited(slog.LevelError, nameForKey(p.key), "panic encoding response", slog.String("api", nameForKey(p.key)),
				slog.Int("version", int(p.version)), slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			out, err = dst, fmt.Errorf("panic encoding: %v", r)
		}
	}()
	if resp.Key() != p.key {
		return dst, fmt.Errorf("handler for %s returned a %s response", nameForKey(p.key), nameForKey(resp.Key()))
	}
	resp.SetVersion(p.version)
	return appendResponse(dst, p.correlationID, p.flexibleHeader, resp)
}

// apiVersionsUnsupported is the answer to an ApiVersions request of a version
// this server does not know: a v0 body with UNSUPPORTED_VERSION listing
// ApiVersions' own range, so the client retries with a version both know
// (KIP-511; SPEC §6).
func apiVersionsUnsupported() *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{apiVersionsVersions}
	return resp
}

// limited logs msg, a constant naming the cause, through the server's rate
// limiter (DESIGN §Logging): the subject is the peer's host, and api too
// when given (a request that panics is its own condition), so a client
// that reconnects and repeats itself gets one line, then one summary a
// minute. The line carries the connection's remote address.
func (c *conn) limited(level slog.Level, api, msg string, attrs ...slog.Attr) {
	subject := c.host
	if api != "" {
		subject += "/" + api
	}
	all := make([]slog.Attr, 0, len(attrs)+1)
	all = append(all, slog.String("remote", c.remote))
	c.s.rl.Log(context.Background(), level, subject, msg, append(all, attrs...)...)
}

// peerHost is a connection's remote address without its port.
func peerHost(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
