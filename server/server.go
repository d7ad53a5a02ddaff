package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/semaphore"

	"github.com/diskless-sidecar/sidecar/internal/ratelog"
)

// Server is the Kafka TCP listener. Create it with New, bind with Listen,
// run Serve, and stop with Shutdown or by canceling Serve's context.
type Server struct {
	cfg Config
	log *slog.Logger
	// rl writes the lines a client can cause again and again (a bad
	// request, a refused producer, a failing admin call), keyed by cause
	// and peer host or partition (DESIGN §Logging); closed by Shutdown.
	rl       *ratelog.Limiter
	producer Producer
	fetcher  Fetcher
	catalog  Catalog
	// apis is what ApiVersions advertises and the dispatcher serves, sorted
	// by key (buildAPIs); immutable.
	apis []kmsg.ApiVersionsResponseApiKey

	// draining is cancelled when Shutdown starts: long-polls end early.
	draining    context.Context
	stopDrainer context.CancelFunc

	// reqBudget holds Config.MaxQueuedRequestBytes of request frames read
	// and not yet answered, over all connections.
	reqBudget *semaphore.Weighted

	// conns counts the connection goroutines (reader and writer of each
	// connection). Add happens only under mu while !mu.closing, so Wait
	// after closing is set never races with an Add.
	conns sync.WaitGroup

	// mu guards the listener, the set of live connections and the
	// lifecycle flags.
	mu struct {
		sync.Mutex
		// lns are the bound listeners, in Config order; set by Listen.
		lns     []*boundListener
		serving bool
		// closing is set by Shutdown or a hard stop: no connection is
		// accepted any more.
		closing bool
		// conns are the live connections, removed by their writer.
		conns map[*conn]struct{}
	}
}

// New returns a Server for cfg (defaults applied, then validated) that hands
// Produce to p, Fetch and ListOffsets to f, and answers Metadata,
// CreateTopics and InitProducerId from cat. It does not bind; see Listen.
func New(cfg Config, p Producer, f Fetcher, cat Catalog) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if p == nil || f == nil || cat == nil {
		return nil, errors.New("server: New needs a Producer, a Fetcher and a Catalog")
	}
	apis, err := buildAPIs(p.APIVersions(), f.APIVersions())
	if err != nil {
		return nil, err
	}
	apis = withoutTxns(apis, cfg.Transactions == nil)
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, rl: ratelog.New(cfg.Logger, ratelog.Config{}),
		producer: p, fetcher: f, catalog: cat, apis: apis}
	s.draining, s.stopDrainer = context.WithCancel(context.Background())
	s.reqBudget = semaphore.NewWeighted(cfg.MaxQueuedRequestBytes)
	s.mu.conns = make(map[*conn]struct{})
	return s, nil
}

// Listen binds every listener (Config.Listeners, or Config.Addr). After it
// returns, Addr is the first one's bound address and Metadata advertises
// each listener's advertised address, the defaults resolved, to its
// clients. Calling it twice is an error; if one listener cannot bind,
// none stays bound.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.lns != nil {
		return errors.New("server: already listening")
	}
	if s.mu.closing {
		return errors.New("server: shut down")
	}
	var lns []*boundListener
	for _, l := range s.cfg.listeners() {
		bl, err := bind(l)
		if err != nil {
			for _, b := range lns {
				_ = b.ln.Close()
			}
			return err
		}
		lns = append(lns, bl)
	}
	s.mu.lns = lns
	return nil
}

// Addr returns the first listener's bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.lns == nil {
		return nil
	}
	return s.mu.lns[0].ln.Addr()
}

// ListenerAddr returns the bound address of the listener named name, or
// nil before Listen or for a name not configured.
func (s *Server) ListenerAddr(name string) net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.mu.lns {
		if l.Name == name {
			return l.ln.Addr()
		}
	}
	return nil
}

// Advertised returns the host and port Metadata advertises for this
// sidecar on its first listener, resolved by Listen.
func (s *Server) Advertised() (string, int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.lns == nil {
		return "", 0
	}
	return s.mu.lns[0].advHost, s.mu.lns[0].advPort
}

// AdvertisedListener returns the host and port Metadata advertises for
// this sidecar on its listener named name, resolved by Listen; ok is
// false before Listen or for a name not configured.
func (s *Server) AdvertisedListener(name string) (host string, port int32, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.mu.lns {
		if l.Name == name {
			return l.advHost, l.advPort, true
		}
	}
	return "", 0, false
}

// AdvertisedListeners returns every listener's advertised address as
// advertised.listeners writes them: NAME://host:port separated by commas,
// in listener order ("" before Listen).
func (s *Server) AdvertisedListeners() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.mu.lns {
		out = append(out, l.Name+"://"+net.JoinHostPort(l.advHost, strconv.Itoa(int(l.advPort))))
	}
	return strings.Join(out, ",")
}

// advertised returns the host and port Metadata advertises to the client
// of ctx: those of the listener it connected to (the first listener for a
// context without one).
func (s *Server) advertised(ctx context.Context) (string, int32) {
	if l := listenerOf(ctx); l != nil {
		return l.advHost, l.advPort
	}
	return s.Advertised()
}

// Serve accepts connections until ctx is done or Shutdown is called, then
// returns once every connection goroutine is gone. It calls Listen first if
// that has not been done. Canceling ctx is a hard stop: connections are
// closed and handlers' contexts canceled at once; Shutdown is the graceful
// way. It returns nil when stopped either way, an error if it could not
// listen or was called twice.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	needListen := s.mu.lns == nil && !s.mu.closing
	s.mu.Unlock()
	if needListen {
		if err := s.Listen(); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.mu.serving {
		s.mu.Unlock()
		return errors.New("server: Serve called twice")
	}
	s.mu.serving = true
	lns, closing := s.mu.lns, s.mu.closing
	s.mu.Unlock()
	if closing {
		return nil
	}
	stopWatch := context.AfterFunc(ctx, s.hardStop)
	defer stopWatch()

	// One accept loop per listener, owned here: each ends when its
	// listener is closed (Shutdown, hard stop).
	var accepting sync.WaitGroup
	for _, l := range lns {
		accepting.Add(1)
		go func() {
			defer accepting.Done()
			s.acceptLoop(ctx, l)
		}()
	}
	accepting.Wait()
	s.conns.Wait()
	return nil
}

// acceptLoop accepts l's connections until it is closed.
func (s *Server) acceptLoop(ctx context.Context, l *boundListener) {
	s.log.Debug("kafka listener serving", "listener", l.Name, "protocol", string(l.Protocol), "addr", l.ln.Addr().String())
	var backoff time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if s.isClosing() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Accept errors other than a closed listener are transient
			// (EMFILE, ECONNABORTED, …): back off as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "listener", l.Name, "err", err, "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		backoff = 0
		s.startConn(ctx, l, nc)
	}
}

// now is the clock of SASL sessions.
func (s *Server) now() time.Time { return s.cfg.Now() }

// startConn registers nc and starts its reader and writer, unless the server
// is closing, in which case nc is closed at once.
func (s *Server) startConn(ctx context.Context, l *boundListener, nc net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closing {
		_ = nc.Close()
		return
	}
	c := newConn(s, l, nc)
	s.mu.conns[c] = struct{}{}
	s.conns.Add(2)
	cctx, cancel := context.WithCancel(withListener(context.WithValue(ctx, principalKey{}, &c.principal), l))
	c.cancel = cancel
	go c.readLoop(cctx)
	go c.writeLoop(cctx)
}

// removeConn forgets c; called by its writer when it is done.
func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.mu.conns, c)
	s.mu.Unlock()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.closing
}

// hardStop closes the listener and every connection and cancels their
// contexts; it is idempotent.
func (s *Server) hardStop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.closing = true
	for _, l := range s.mu.lns {
		_ = l.ln.Close()
	}
	for c := range s.mu.conns {
		c.fail()
	}
}

// Shutdown stops the server gracefully: it stops accepting connections and
// reading requests, lets every request already read be answered (a produce
// waits for its file to commit, so the caller must keep the produce pipeline
// draining concurrently; a fetch ends its long-poll at once and answers
// with what it has), then closes the
// connections. It returns nil once every connection goroutine is gone. If
// ctx is done first, it stops hard (closes connections, cancels handlers'
// contexts), still waits for the goroutines, and returns ctx.Err().
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopDrainer()
	s.mu.Lock()
	s.mu.closing = true
	for _, l := range s.mu.lns {
		_ = l.ln.Close()
	}
	for c := range s.mu.conns {
		c.stopReading()
	}
	s.mu.Unlock()

	idle := make(chan struct{})
	go func() {
		s.conns.Wait()
		close(idle)
	}()
	defer s.rl.Close() // the counts not written yet
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		s.log.Warn("graceful shutdown timed out; closing connections", "err", ctx.Err())
		s.hardStop()
		<-idle
		return ctx.Err()
	}
}
