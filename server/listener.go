package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/tlsconfig"
)

// SecurityProtocol is a listener's security protocol, Kafka's names
// (SPEC §14, Listeners).
type SecurityProtocol string

// The four security protocols of listener.security.protocol.map.
const (
	Plaintext     SecurityProtocol = "PLAINTEXT"
	SSL           SecurityProtocol = "SSL"
	SASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SASLSSL       SecurityProtocol = "SASL_SSL"
)

// ParseSecurityProtocol returns the protocol named s (case-insensitive, as
// Kafka reads the map's values), or an error.
func ParseSecurityProtocol(s string) (SecurityProtocol, error) {
	switch p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(s))); p {
	case Plaintext, SSL, SASLPlaintext, SASLSSL:
		return p, nil
	}
	return "", fmt.Errorf("unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)", s)
}

// TLS reports whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == SSL || p == SASLSSL }

// AnonymousPrincipal is the principal of a connection that did not
// authenticate: every PLAINTEXT one, and an SSL one without a client
// certificate (SPEC §14, Principals).
const AnonymousPrincipal = "User:ANONYMOUS"

// DefaultTLSHandshakeTimeout is Config.TLSHandshakeTimeout's default: a
// connection that has not completed its TLS handshake by then is closed.
// [Decision: far above any real handshake; a client that opens
// connections and sends nothing holds a connection only this long before
// it is refused, not connections.max.idle.ms.]
const DefaultTLSHandshakeTimeout = 10 * time.Second

// Listener is one Kafka listener (listeners, listener.security.protocol.map,
// advertised.listeners, ssl.*: SPEC §14): where it binds, what Metadata
// tells its clients, and how they are authenticated.
type Listener struct {
	// Name is the listener name (upper case, as Kafka compares them),
	// unique among the listeners.
	Name string
	// Protocol is its security protocol.
	Protocol SecurityProtocol
	// Addr is the host:port it binds; port 0 picks a free port. An empty
	// host listens on all interfaces.
	Addr string
	// AdvertisedHost is the host Metadata names to the clients of this
	// listener. "" means Addr's host; if that is empty or unspecified
	// (0.0.0.0, ::), the machine's hostname, as Kafka does.
	AdvertisedHost string
	// AdvertisedPort is the port Metadata names, 0–65535; 0 means the
	// bound port.
	AdvertisedPort int32
	// TLS is the server side of the TLS handshake, required for SSL and
	// SASL_SSL and refused otherwise. Its MinVersion must be TLS 1.2 or
	// later; certificates may change between handshakes through
	// GetConfigForClient (rotation).
	TLS *tls.Config
	// Principal maps a verified client certificate to the connection's
	// principal ("User:<name>", ssl.principal.mapping.rules; SPEC §14,
	// Principals); nil maps every certificate to its subject's
	// distinguished name. An error refuses the connection.
	Principal func(*x509.Certificate) (string, error)
	// SASL are the mechanisms a SASL_PLAINTEXT or SASL_SSL listener
	// offers (sasl.enabled.mechanisms), in order; required for those,
	// refused for the others.
	SASL []SASLMechanism
}

// validate reports what is wrong with l, naming the keys it comes from.
func (l Listener) validate() []error {
	var errs []error
	if l.Name == "" {
		errs = append(errs, errors.New("listeners: a listener without a name"))
	}
	if _, err := ParseSecurityProtocol(string(l.Protocol)); err != nil {
		errs = append(errs, fmt.Errorf("listener.security.protocol.map: listener %s: %w", l.Name, err))
	}
	if _, port, err := net.SplitHostPort(l.Addr); err != nil {
		errs = append(errs, fmt.Errorf("listeners %q: invalid address: %w", l.Addr, err))
	} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		errs = append(errs, fmt.Errorf("listeners %q: invalid port %q", l.Addr, port))
	}
	if l.AdvertisedPort < 0 || l.AdvertisedPort > 65535 {
		errs = append(errs, fmt.Errorf("advertised.listeners: listener %s: port %d out of range 0–65535", l.Name, l.AdvertisedPort))
	}
	switch sasl := l.Protocol == SASLPlaintext || l.Protocol == SASLSSL; {
	case sasl && len(l.SASL) == 0:
		errs = append(errs, fmt.Errorf("sasl.enabled.mechanisms: listener %s (%s) needs a SASL mechanism", l.Name, l.Protocol))
	case !sasl && len(l.SASL) > 0:
		errs = append(errs, fmt.Errorf("listener.security.protocol.map: listener %s is %s, which has no SASL", l.Name, l.Protocol))
	}
	switch {
	case l.Protocol.TLS() && l.TLS == nil:
		errs = append(errs, fmt.Errorf("ssl.keystore.location: listener %s (%s) needs a keystore", l.Name, l.Protocol))
	case !l.Protocol.TLS() && l.TLS != nil:
		errs = append(errs, fmt.Errorf("listener.security.protocol.map: listener %s is %s, which has no TLS", l.Name, l.Protocol))
	case l.TLS != nil && l.TLS.MinVersion < tls.VersionTLS12:
		errs = append(errs, fmt.Errorf("ssl.enabled.protocols: listener %s: TLS versions before 1.2 are refused", l.Name))
	}
	return errs
}

// boundListener is a Listener once bound: its socket and what Metadata
// advertises on it. Immutable after Listen.
type boundListener struct {
	Listener
	ln      net.Listener
	advHost string
	advPort int32
}

// bind opens l's socket and resolves its advertised address.
func bind(l Listener) (*boundListener, error) {
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return nil, fmt.Errorf("server: listen %s (%s): %w", l.Addr, l.Name, err)
	}
	host, _, _ := net.SplitHostPort(l.Addr)
	advHost := l.AdvertisedHost
	if advHost == "" {
		advHost = host
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			if hn, err := os.Hostname(); err == nil && hn != "" {
				advHost = hn
			}
		}
	}
	advPort := l.AdvertisedPort
	if advPort == 0 {
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		n, _ := strconv.Atoi(p)
		advPort = int32(n)
	}
	return &boundListener{Listener: l, ln: ln, advHost: advHost, advPort: advPort}, nil
}

// listenerKey carries a connection's *boundListener in its context.
type listenerKey struct{}

func withListener(ctx context.Context, l *boundListener) context.Context {
	return context.WithValue(ctx, listenerKey{}, l)
}

// listenerOf returns the listener the request came in on, nil for a
// context that did not come from a connection (tests calling handlers).
func listenerOf(ctx context.Context) *boundListener {
	l, _ := ctx.Value(listenerKey{}).(*boundListener)
	return l
}

// principalKey carries a connection's authenticated principal.
type principalKey struct{}

// principalBox holds a connection's principal; a re-authentication may
// change it, so it is read under its lock.
type principalBox struct {
	mu   sync.Mutex
	name string
}

func (b *principalBox) get() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.name
}

func (b *principalBox) set(name string) {
	b.mu.Lock()
	b.name = name
	b.mu.Unlock()
}

// PrincipalOf returns the principal of the connection a request came in
// on ("User:…"; AnonymousPrincipal when it did not authenticate), "" for a
// context that did not come from a connection.
func PrincipalOf(ctx context.Context) string {
	b, _ := ctx.Value(principalKey{}).(*principalBox)
	if b == nil {
		return ""
	}
	return b.get()
}

// certPrincipal is the principal of a TLS connection's verified client
// certificate, AnonymousPrincipal without one.
func (l *boundListener) certPrincipal(st tls.ConnectionState) (string, error) {
	if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return AnonymousPrincipal, nil
	}
	cert := st.VerifiedChains[0][0]
	if l.Principal != nil {
		return l.Principal(cert)
	}
	return "User:" + tlsconfig.SubjectName(cert), nil
}
