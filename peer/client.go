// Package peer is how a sidecar talks to the other sidecars of its
// cluster: the client of the coordinator RPCs (SPEC §9, API keys 100–109;
// docs/format/coordinator-rpcs.md), over the Kafka listener each sidecar
// serves anyway, and the router that sends each shard's calls to the
// sidecar hosting it (DESIGN §Coordinator RPCs).
//
// Client holds one connection per peer address, pipelined: requests are
// written in turn and answers matched by correlation id, so a slow commit
// does not hold up a FindBatches behind it. On connecting it asks
// ApiVersions and sends each key at the highest version both sides know.
// A connection that fails fails every request in flight on it (the
// caller decides whether resending is safe) and is dialed again by the
// next request.
//
// Goroutines: one reader per connection, started by the dial and stopped
// by the connection's failure or Client.Close, which joins them.
package peer

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
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/diskless-sidecar/sidecar/rpcmsg"
)

// Defaults of ClientConfig's zero fields.
const (
	// DefaultDialTimeout bounds connecting to a peer and its ApiVersions
	// exchange.
	DefaultDialTimeout = 5 * time.Second
	// DefaultMaxResponseBytes is the largest answer frame read, as a
	// broker's socket.request.max.bytes bounds requests (100 MiB).
	DefaultMaxResponseBytes = 100 << 20
	// DefaultRequestTimeoutOverhead is how long past a request's
	// TimeoutMs its answer may take before the connection is taken as
	// broken: franz-go's default RequestTimeoutOverhead.
	DefaultRequestTimeoutOverhead = 10 * time.Second
)

// ClientConfig configures a Client. Zero fields take their defaults.
type ClientConfig struct {
	// ClientID is the client id of every request; default
	// "diskless-sidecar".
	ClientID string
	// DialTimeout bounds a connection's set-up (TCP and ApiVersions);
	// default DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxResponseBytes bounds an answer frame; default
	// DefaultMaxResponseBytes. A larger one fails its connection.
	MaxResponseBytes int32
	// RequestTimeoutOverhead bounds the wait for an answer past the
	// request's TimeoutMs (a request with a TimeoutMs > 0, as
	// kmsg.TimeoutRequest gives it: every coordinator RPC); default
	// DefaultRequestTimeoutOverhead. The peer answers REQUEST_TIMED_OUT
	// by TimeoutMs, so no answer by then means the connection or the
	// peer is gone — a peer cut off by the network leaves the
	// connection open with nothing coming back — and the connection is
	// failed (ErrConnection), with every request in flight on it.
	RequestTimeoutOverhead time.Duration
	// Logger receives connection failures at debug level; default
	// slog.Default().
	Logger *slog.Logger
	// Dial opens a TCP connection; default a net.Dialer's DialContext
	// (tests put a proxy in between).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLS, when set, wraps every connection in TLS (the inter-sidecar
	// listener is SSL or SASL_SSL; SPEC §14, Inter-sidecar traffic):
	// its RootCAs verify the peer, whose host is the server name unless
	// ServerName is set; its Certificates are this sidecar's client
	// certificate. Default none: PLAINTEXT.
	TLS *tls.Config
	// SASL, when set, authenticates every connection after ApiVersions
	// (SaslHandshake v1, then SaslAuthenticate v1 until the mechanism is
	// done), as a Kafka client does: kgo's sasl/plain and sasl/scram
	// mechanisms. A refusal fails the set-up (ErrNotSent). Default
	// none.
	SASL sasl.Mechanism
}

func (c ClientConfig) withDefaults() ClientConfig {
	if c.ClientID == "" {
		c.ClientID = "diskless-sidecar"
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.RequestTimeoutOverhead == 0 {
		c.RequestTimeoutOverhead = DefaultRequestTimeoutOverhead
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Dial == nil {
		c.Dial = (&net.Dialer{}).DialContext
	}
	return c
}

// Errors of Client.Request.
var (
	// ErrClientClosed: the Client was closed.
	ErrClientClosed = errors.New("peer: client closed")
	// ErrUnsupported: the peer does not serve the key (an older
	// release), or no version both know.
	ErrUnsupported = errors.New("peer: request not supported by the peer")
	// ErrConnection wraps a failed connection: the request may or may
	// not have reached the peer.
	ErrConnection = errors.New("peer: connection failed")
	// ErrNotSent wraps a failure before the request was written (the
	// connection could not be set up): the peer never saw it, so
	// resending is always safe. It wraps ErrConnection too.
	ErrNotSent = errors.New("peer: request not sent")
)

// Client sends coordinator RPCs (and any other Kafka request) to peers by
// address. It is safe for concurrent use.
type Client struct {
	cfg ClientConfig
	mu  struct {
		sync.Mutex
		closed bool
		conns  map[string]*conn
	}
	wg sync.WaitGroup // the connections' readers
}

// NewClient returns a Client; it dials nothing until the first request.
func NewClient(cfg ClientConfig) *Client {
	c := &Client{cfg: cfg.withDefaults()}
	c.mu.conns = make(map[string]*conn)
	return c
}

// Close fails every request in flight, closes the connections and waits
// for their readers. Later requests fail with ErrClientClosed.
func (c *Client) Close() {
	c.mu.Lock()
	c.mu.closed = true
	conns := c.mu.conns
	c.mu.conns = map[string]*conn{}
	c.mu.Unlock()
	for _, cn := range conns {
		cn.fail(ErrClientClosed)
	}
	c.wg.Wait()
}

// Request sends req to the sidecar at addr (host:port of its Kafka
// listener) at the highest version both know and returns its answer.
// Errors: ErrUnsupported (nothing was sent); ErrConnection (wrapped) when
// the connection failed — also when no answer came within the request's
// TimeoutMs plus ClientConfig.RequestTimeoutOverhead — also wrapping
// ErrNotSent when that was before the request was written; ctx's error;
// ErrClientClosed. A request cut short by ctx may still be processed by
// the peer.
func (c *Client) Request(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cn, err := c.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	return cn.request(ctx, req)
}

// conn returns the connection to addr, dialing it if there is none (one
// dial at a time per address; concurrent callers wait for it).
func (c *Client) conn(ctx context.Context, addr string) (*conn, error) {
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return nil, ErrClientClosed
		}
		cn := c.mu.conns[addr]
		if cn == nil {
			cn = &conn{c: c, addr: addr, ready: make(chan struct{}), dead: make(chan struct{}), pending: map[int32]chan result{}}
			c.mu.conns[addr] = cn
			c.mu.Unlock()
			go cn.dial()
		} else {
			c.mu.Unlock()
		}
		select {
		case <-cn.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := cn.failure(); err != nil {
			c.forget(cn)
			if cn.dialed {
				continue // it failed after its set-up: dial again
			}
			return nil, err
		}
		return cn, nil
	}
}

// forget removes cn from the pool, if it is still the one for its
// address.
func (c *Client) forget(cn *conn) {
	c.mu.Lock()
	if c.mu.conns[cn.addr] == cn {
		delete(c.mu.conns, cn.addr)
	}
	c.mu.Unlock()
}

// result is one answer frame's body, or the connection's failure.
type result struct {
	body []byte
	err  error
}

// conn is one connection to a peer.
type conn struct {
	c    *Client
	addr string
	// ready is closed once the set-up ended (nc and versions set, or err).
	ready chan struct{}
	// dialed is set, before ready closes, when the set-up succeeded.
	dialed bool
	nc     net.Conn
	// versions is the highest version of each key both sides know; set
	// before ready closes.
	versions map[int16]int16

	// dead is closed by fail.
	dead     chan struct{}
	failOnce sync.Once
	mu       sync.Mutex // guards the fields below and writes to nc
	err      error
	corr     int32
	pending  map[int32]chan result
	buf      []byte
}

// dial connects and asks ApiVersions, then starts the reader.
func (cn *conn) dial() {
	cfg := cn.c.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.DialTimeout)
	defer cancel()
	nc, err := cfg.Dial(ctx, "tcp", cn.addr)
	if err != nil {
		cn.failSetup(fmt.Errorf("%w: %w: dial %s: %w", ErrConnection, ErrNotSent, cn.addr, err))
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Now()) })
	nc, versions, err := cn.setUp(ctx, nc)
	stop()
	if err != nil {
		nc.Close()
		cn.failSetup(fmt.Errorf("%w: %w: %w", ErrConnection, ErrNotSent, err))
		return
	}
	_ = nc.SetDeadline(time.Time{})
	cn.c.mu.Lock()
	closed := cn.c.mu.closed
	if !closed {
		cn.c.wg.Add(1)
	}
	cn.c.mu.Unlock()
	if closed {
		nc.Close()
		cn.failSetup(ErrClientClosed)
		return
	}
	cn.nc, cn.versions, cn.dialed = nc, versions, true
	close(cn.ready)
	go cn.readLoop()
}

// setUp runs a new connection's set-up: the TLS handshake, ApiVersions
// and the SASL exchange, as configured. It returns the connection to use
// (nc, or its TLS wrapping, to be closed on error too).
func (cn *conn) setUp(ctx context.Context, nc net.Conn) (net.Conn, map[int16]int16, error) {
	cfg := cn.c.cfg
	if cfg.TLS != nil {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			host, _, _ := net.SplitHostPort(cn.addr)
			tc.ServerName = host
		}
		t := tls.Client(nc, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			return t, nil, fmt.Errorf("TLS handshake with %s: %w", cn.addr, err)
		}
		nc = t
	}
	versions, err := apiVersions(nc, cfg.ClientID, cfg.MaxResponseBytes)
	if err != nil {
		return nc, nil, fmt.Errorf("ApiVersions from %s: %w", cn.addr, err)
	}
	if cfg.SASL != nil {
		if err := authenticate(ctx, nc, cn.addr, cfg); err != nil {
			return nc, nil, fmt.Errorf("SASL %s with %s: %w", cfg.SASL.Name(), cn.addr, err)
		}
	}
	return nc, versions, nil
}

// authenticate runs a SASL exchange on nc: SaslHandshake v1 naming the
// mechanism, then SaslAuthenticate v1 with each message the mechanism
// gives until it is done (KIP-152). An error code of either answer is
// returned as its kerr error, with the broker's message.
func authenticate(ctx context.Context, nc net.Conn, addr string, cfg ClientConfig) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, cfg.SASL.Name()
	raw, err := roundTrip(nc, hs, 1, cfg)
	if err != nil {
		return err
	}
	hsResp := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
	hsResp.Version = 1
	if err := hsResp.ReadFrom(raw); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("handshake: %w (the peer offers %v)", err, hsResp.SupportedMechanisms)
	}
	host, _, _ := net.SplitHostPort(addr)
	session, msg, err := cfg.SASL.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for corr, last := int32(2), false; ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, msg
		raw, err := roundTrip(nc, req, corr, cfg)
		if err != nil {
			return err
		}
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.Version = 1
		if err := resp.ReadFrom(raw); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		if last {
			return nil
		}
		done, next, err := session.Challenge(resp.SASLAuthBytes)
		switch {
		case err != nil:
			return err
		case done && next == nil:
			return nil
		}
		// done with a message: a last one, answered without a challenge.
		msg, last = next, done
	}
}

// roundTrip writes req (its version set, not flexible) and returns its
// answer's body.
func roundTrip(nc net.Conn, req kmsg.Request, corr int32, cfg ClientConfig) ([]byte, error) {
	if _, err := nc.Write(appendRequest(nil, req, corr, cfg.ClientID)); err != nil {
		return nil, err
	}
	frame, err := readFrame(nc, cfg.MaxResponseBytes)
	if err != nil {
		return nil, err
	}
	return frame[4:], nil
}

// failSetup ends a set-up that failed.
func (cn *conn) failSetup(err error) {
	cn.mu.Lock()
	cn.err = err
	cn.mu.Unlock()
	cn.failOnce.Do(func() { close(cn.dead) })
	close(cn.ready)
	cn.c.cfg.Logger.Debug("peer: connection set-up failed", slog.String("peer", cn.addr), slog.Any("err", err))
}

// failure returns the connection's failure, or nil while it serves.
func (cn *conn) failure() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err
}

// fail closes the connection and fails every request in flight with err
// (the first failure wins). Idempotent.
func (cn *conn) fail(err error) {
	cn.failOnce.Do(func() {
		cn.mu.Lock()
		cn.err = err
		pending := cn.pending
		cn.pending = nil
		cn.mu.Unlock()
		close(cn.dead)
		<-cn.ready
		if cn.nc != nil {
			cn.nc.Close()
		}
		for _, ch := range pending {
			ch <- result{err: err}
		}
		cn.c.forget(cn)
		if !errors.Is(err, ErrClientClosed) {
			cn.c.cfg.Logger.Debug("peer: connection failed", slog.String("peer", cn.addr), slog.Any("err", err))
		}
	})
}

// request writes req and waits for its answer.
func (cn *conn) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	v, ok := cn.versions[req.Key()]
	if !ok {
		return nil, fmt.Errorf("%w: %s (key %d) by %s", ErrUnsupported, name(req.Key()), req.Key(), cn.addr)
	}
	v = min(v, req.MaxVersion())
	req.SetVersion(v)
	ch := make(chan result, 1)
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	cn.corr++
	corr := cn.corr
	cn.pending[corr] = ch
	cn.buf = appendRequest(cn.buf[:0], req, corr, cn.c.cfg.ClientID)
	_, werr := cn.nc.Write(cn.buf)
	if cap(cn.buf) > 1<<20 {
		cn.buf = nil
	}
	cn.mu.Unlock()
	if werr != nil {
		cn.fail(fmt.Errorf("%w: write to %s: %w", ErrConnection, cn.addr, werr))
	}
	var expired <-chan time.Time
	if tr, ok := req.(kmsg.TimeoutRequest); ok && tr.Timeout() > 0 {
		bound := time.Duration(tr.Timeout())*time.Millisecond + cn.c.cfg.RequestTimeoutOverhead
		t := time.NewTimer(bound)
		defer t.Stop()
		expired = t.C
	}
	var r result
	select {
	case r = <-ch:
	case <-expired:
		// The answer would have come by now, REQUEST_TIMED_OUT at worst:
		// the connection is broken without saying so. (An answer that
		// came meanwhile is in ch; else fail puts the error there.)
		cn.fail(fmt.Errorf("%w: no answer from %s to %s within its timeout, %d ms, and %v more",
			ErrConnection, cn.addr, name(req.Key()), req.(kmsg.TimeoutRequest).Timeout(), cn.c.cfg.RequestTimeoutOverhead))
		r = <-ch
	case <-ctx.Done():
		cn.mu.Lock()
		if cn.pending != nil {
			delete(cn.pending, corr)
		}
		cn.mu.Unlock()
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	body := r.body
	if req.IsFlexible() {
		// Response header v1: an empty tagged-field section.
		rd := kbin.Reader{Src: body}
		kmsg.SkipTags(&rd)
		if err := rd.Complete(); err != nil {
			return nil, fmt.Errorf("%w: %s answer from %s: bad header", ErrConnection, name(req.Key()), cn.addr)
		}
		body = rd.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%s answer from %s: %w", name(req.Key()), cn.addr, err)
	}
	return resp, nil
}

// readLoop reads answer frames and hands each to its request.
func (cn *conn) readLoop() {
	defer cn.c.wg.Done()
	br := bufio.NewReaderSize(cn.nc, 64<<10)
	for {
		frame, err := readFrame(br, cn.c.cfg.MaxResponseBytes)
		if err != nil {
			cn.fail(fmt.Errorf("%w: read from %s: %w", ErrConnection, cn.addr, err))
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame))
		cn.mu.Lock()
		ch := cn.pending[corr]
		delete(cn.pending, corr)
		cn.mu.Unlock()
		if ch != nil {
			ch <- result{body: frame[4:]}
		}
	}
}

// readFrame reads one size-prefixed frame of at least 4 bytes (the
// correlation id) and at most maxBytes.
func readFrame(r io.Reader, maxBytes int32) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 4 || n > maxBytes {
		return nil, fmt.Errorf("answer frame of %d bytes outside [4, %d]", n, maxBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// appendRequest appends req's frame: size, header (v2 for flexible
// versions, else v1) and body.
func appendRequest(dst []byte, req kmsg.Request, corr int32, clientID string) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt16(dst, req.Key())
	dst = kbin.AppendInt16(dst, req.GetVersion())
	dst = kbin.AppendInt32(dst, corr)
	dst = kbin.AppendNullableString(dst, &clientID)
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// apiVersions asks the peer's ApiVersions (v3, falling back to v0 when the
// peer does not know v3) and returns the highest version of each key both
// sides know: rpcmsg's and kmsg's.
func apiVersions(nc net.Conn, clientID string, maxBytes int32) (map[int16]int16, error) {
	for _, v := range []int16{3, 0} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "diskless-sidecar", "1"
		if _, err := nc.Write(appendRequest(nil, req, 0, clientID)); err != nil {
			return nil, err
		}
		frame, err := readFrame(nc, maxBytes)
		if err != nil {
			return nil, err
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = v // ApiVersions answers always have header v0
		if err := resp.ReadFrom(frame[4:]); err != nil {
			if v == 3 {
				// An answer at v0 to a version it does not know.
				resp.Version = 0
				if resp.ReadFrom(frame[4:]) != nil {
					return nil, err
				}
			} else {
				return nil, err
			}
		}
		if resp.ErrorCode == 35 && v == 3 { // UNSUPPORTED_VERSION: try v0
			continue
		}
		if resp.ErrorCode != 0 {
			return nil, fmt.Errorf("ApiVersions error %d", resp.ErrorCode)
		}
		out := make(map[int16]int16, len(resp.ApiKeys))
		for _, k := range resp.ApiKeys {
			var ours int16 = -1
			if r := rpcmsg.RequestForKey(k.ApiKey); r != nil {
				ours = r.MaxVersion()
			} else if r := kmsg.RequestForKey(k.ApiKey); r != nil {
				ours = r.MaxVersion()
			}
			if hi := min(ours, k.MaxVersion); hi >= k.MinVersion && hi >= 0 {
				out[k.ApiKey] = hi
			}
		}
		return out, nil
	}
	return nil, errors.New("ApiVersions: no version both sides know")
}

// name is the name of an API key.
func name(key int16) string {
	if n := rpcmsg.NameForKey(key); n != "" {
		return n
	}
	return kmsg.NameForKey(key)
}
