package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/certtest"
	"github.com/diskless-sidecar/sidecar/internal/tlsconfig"
)

// tlsFixture is a CA, a server certificate and the server side of TLS
// requiring (or asking for) client certificates of that CA.
type tlsFixture struct {
	ca     *certtest.CA
	server *tlsconfig.Source
}

func newTLSFixture(t *testing.T, auth tlsconfig.ClientAuth) *tlsFixture {
	t.Helper()
	ca := certtest.NewCA(t, "test-ca")
	srv := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "sidecar"}, Server: true})
	src, err := tlsconfig.New(tlsconfig.Config{KeystoreCertificateChain: string(srv.CertPEM), KeystoreKey: string(srv.KeyPEM),
		TruststoreCertificates: string(ca.PEM), ClientAuth: auth})
	if err != nil {
		t.Fatal(err)
	}
	return &tlsFixture{ca: ca, server: src}
}

// dialTLS opens a TLS connection presenting cert (none when nil) and
// trusting the fixture's CA; the handshake runs on the first write or read.
func (f *tlsFixture) dialTLS(t *testing.T, addr net.Addr, cert *certtest.Leaf) *rawConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: f.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate(t)}
	}
	nc, err := net.DialTimeout("tcp", addr.String(), testTimeout)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	tc := tls.Client(nc, cfg)
	t.Cleanup(func() { _ = tc.Close() })
	return &rawConn{t: t, nc: tc, br: bufio.NewReader(tc)}
}

// startTLSServer starts a server with a PLAINTEXT and an SSL listener and
// advertised addresses apart from the bound ones.
func startTLSServer(t *testing.T, f *tlsFixture) *testServer {
	return startServer(t, func(c *Config, _ *testServer) {
		c.Addr = ""
		c.Listeners = []Listener{
			{Name: "INTERNAL", Protocol: Plaintext, Addr: "127.0.0.1:0", AdvertisedHost: "plain.example", AdvertisedPort: 19092},
			{Name: "SECURE", Protocol: SSL, Addr: "127.0.0.1:0", AdvertisedHost: "tls.example", AdvertisedPort: 19093, TLS: f.server.TLSConfig()},
		}
	})
}

// TestListenersAdvertiseTheirOwn: Metadata, FindCoordinator and
// DescribeCluster name to each client the address of the listener it
// connected to (SPEC §14, Listeners).
func TestListenersAdvertiseTheirOwn(t *testing.T) {
	f := newTLSFixture(t, tlsconfig.ClientAuthRequired)
	ts := startTLSServer(t, f)
	client := f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "client"}})
	for _, c := range []struct {
		conn *rawConn
		host string
		port int32
	}{
		{dialRaw(t, ts.ListenerAddr("INTERNAL")), "plain.example", 19092},
		{f.dialTLS(t, ts.ListenerAddr("SECURE"), client), "tls.example", 19093},
	} {
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 12
		resp := c.conn.roundTrip(md).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].Host != c.host || resp.Brokers[0].Port != c.port {
			t.Errorf("Metadata brokers %+v, want %s:%d", resp.Brokers, c.host, c.port)
		}
		dc := kmsg.NewPtrDescribeClusterRequest()
		dcr := c.conn.roundTrip(dc).(*kmsg.DescribeClusterResponse)
		if len(dcr.Brokers) != 1 || dcr.Brokers[0].Host != c.host || dcr.Brokers[0].Port != c.port {
			t.Errorf("DescribeCluster brokers %+v, want %s:%d", dcr.Brokers, c.host, c.port)
		}
	}
	if ts.ListenerAddr("INTERNAL").String() != ts.Addr().String() || ts.ListenerAddr("NONE") != nil {
		t.Errorf("Addr %v, ListenerAddr %v / %v", ts.Addr(), ts.ListenerAddr("INTERNAL"), ts.ListenerAddr("NONE"))
	}
}

// TestTLSPrincipal: a verified client certificate's subject is the
// connection's principal; without one (requested, not given) the
// connection is ANONYMOUS; a mapping rule rewrites it.
func TestTLSPrincipal(t *testing.T) {
	for _, c := range []struct {
		name  string
		auth  tlsconfig.ClientAuth
		rules string
		cert  bool
		want  string
	}{
		{"required", tlsconfig.ClientAuthRequired, "", true, "User:CN=client-7,OU=eng,O=Example"},
		{"requested without", tlsconfig.ClientAuthRequested, "", false, AnonymousPrincipal},
		{"mapped", tlsconfig.ClientAuthRequired, `RULE:^CN=([^,]*),.*$/$1/U`, true, "User:CLIENT-7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newTLSFixture(t, c.auth)
			ts := startServer(t, func(cfg *Config, _ *testServer) {
				cfg.Addr = ""
				l := Listener{Name: "SSL", Protocol: SSL, Addr: "127.0.0.1:0", TLS: f.server.TLSConfig()}
				if c.rules != "" {
					m, err := tlsconfig.ParsePrincipalMappingRules(c.rules)
					if err != nil {
						t.Fatal(err)
					}
					l.Principal = m.Principal
				}
				cfg.Listeners = []Listener{l}
			})
			var leaf *certtest.Leaf
			if c.cert {
				leaf = f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "client-7", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}}})
			}
			conn := f.dialTLS(t, ts.Addr(), leaf)
			conn.roundTrip(apiVersionsReq())
			if got := ts.onlyConnPrincipal(t); got != c.want {
				t.Fatalf("principal %q, want %q", got, c.want)
			}
		})
	}
}

// onlyConnPrincipal returns the principal of the server's one connection.
func (ts *testServer) onlyConnPrincipal(t *testing.T) string {
	t.Helper()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.mu.conns) != 1 {
		t.Fatalf("%d connections, want 1", len(ts.mu.conns))
	}
	for c := range ts.mu.conns {
		return c.principal.get()
	}
	return ""
}

// TestTLSRefused: a client certificate missing, expired, from another CA
// or mapped by no rule, plaintext to the TLS listener and a TLS hello to
// the plaintext one are refused — the connection closed, one rate-limited
// line — and the server keeps serving both listeners.
func TestTLSRefused(t *testing.T) {
	f := newTLSFixture(t, tlsconfig.ClientAuthRequired)
	ts := startTLSServer(t, f)
	other := certtest.NewCA(t, "other-ca")
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"no client certificate", func(t *testing.T) {
			c := f.dialTLS(t, ts.ListenerAddr("SECURE"), nil)
			c.send(apiVersionsReq())
			c.expectClosed()
		}},
		{"expired client certificate", func(t *testing.T) {
			leaf := f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "expired"},
				NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
			c := f.dialTLS(t, ts.ListenerAddr("SECURE"), leaf)
			c.send(apiVersionsReq())
			c.expectClosed()
		}},
		{"certificate of another CA", func(t *testing.T) {
			c := f.dialTLS(t, ts.ListenerAddr("SECURE"), other.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "stranger"}}))
			c.send(apiVersionsReq())
			c.expectClosed()
		}},
		{"plaintext to the TLS listener", func(t *testing.T) {
			c := dialRaw(t, ts.ListenerAddr("SECURE"))
			c.send(apiVersionsReq())
			c.expectClosed()
		}},
		{"TLS hello to the plaintext listener", func(t *testing.T) {
			c := f.dialTLS(t, ts.ListenerAddr("INTERNAL"), f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "lost"}}))
			nc := c.nc.(*tls.Conn)
			_ = nc.SetDeadline(time.Now().Add(testTimeout))
			if err := nc.Handshake(); err == nil {
				t.Fatal("TLS handshake with the plaintext listener succeeded")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t)
			checkServing(t, ts.ListenerAddr("INTERNAL"))
			ok := f.dialTLS(t, ts.ListenerAddr("SECURE"), f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "good"}}))
			if resp := ok.roundTrip(apiVersionsReq()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
				t.Fatalf("ApiVersions over TLS after the refusal: error %d", resp.ErrorCode)
			}
		})
	}
	logs := ts.logs.String()
	if n := strings.Count(logs, "failed authentication: TLS handshake failed"); n != 1 {
		t.Errorf("%d first lines of failed TLS handshakes, want 1 (the others counted by the limiter):\n%s", n, logs)
	}
	if ts.logs.errors.Load() != 0 {
		t.Errorf("error records in the log:\n%s", logs)
	}
}

// TestTLSListenerRefusesOldTLS: a handshake below TLS 1.2 fails.
func TestTLSListenerRefusesOldTLS(t *testing.T) {
	f := newTLSFixture(t, tlsconfig.ClientAuthNone)
	ts := startServer(t, func(cfg *Config, _ *testServer) {
		cfg.Addr = ""
		cfg.Listeners = []Listener{{Name: "SSL", Protocol: SSL, Addr: "127.0.0.1:0", TLS: f.server.TLSConfig()}}
	})
	nc, err := net.DialTimeout("tcp", ts.Addr().String(), testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(nc, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(testTimeout))
	if err := tc.Handshake(); err == nil {
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

func TestListenerConfigRefused(t *testing.T) {
	f := newTLSFixture(t, tlsconfig.ClientAuthNone)
	old := f.server.TLSConfig().Clone()
	old.MinVersion = tls.VersionTLS11
	for name, c := range map[string]struct {
		ls  []Listener
		key string
	}{
		"SSL without TLS":        {[]Listener{{Name: "SSL", Protocol: SSL, Addr: "127.0.0.1:0"}}, "ssl.keystore.location"},
		"PLAINTEXT with TLS":     {[]Listener{{Name: "P", Protocol: Plaintext, Addr: "127.0.0.1:0", TLS: f.server.TLSConfig()}}, "listener.security.protocol.map"},
		"TLS 1.1":                {[]Listener{{Name: "SSL", Protocol: SSL, Addr: "127.0.0.1:0", TLS: old}}, "ssl.enabled.protocols"},
		"SASL without mechanism": {[]Listener{{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext, Addr: "127.0.0.1:0"}}, "sasl.enabled.mechanisms"},
		"unknown protocol":       {[]Listener{{Name: "X", Protocol: "TLS", Addr: "127.0.0.1:0"}}, "listener.security.protocol.map"},
		"a name twice":           {[]Listener{{Name: "A", Protocol: Plaintext, Addr: "127.0.0.1:0"}, {Name: "A", Protocol: Plaintext, Addr: "127.0.0.1:0"}}, "listeners"},
		"bad address":            {[]Listener{{Name: "A", Protocol: Plaintext, Addr: "127.0.0.1"}}, "listeners"},
		"advertised port past":   {[]Listener{{Name: "A", Protocol: Plaintext, Addr: "127.0.0.1:0", AdvertisedPort: 70000}}, "advertised.listeners"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Config{Listeners: c.ls, ClusterID: "c"}.Validate()
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("Validate: %v, want an error naming %s", err, c.key)
			}
		})
	}
}

// TestTLSHandshakeBounded: a client that connects to a TLS listener and
// sends no hello is closed once the handshake timeout has passed, with a
// failed-authentication line; and Shutdown does not wait for a handshake
// (the default 10 s timeout) to give up.
func TestTLSHandshakeBounded(t *testing.T) {
	f := newTLSFixture(t, tlsconfig.ClientAuthNone)
	for _, c := range []struct {
		name    string
		timeout time.Duration
	}{{"timeout", 200 * time.Millisecond}, {"shutdown", 0}} {
		t.Run(c.name, func(t *testing.T) {
			ts := startServer(t, func(cfg *Config, _ *testServer) {
				cfg.Addr = ""
				cfg.TLSHandshakeTimeout = c.timeout
				cfg.Listeners = []Listener{{Name: "SSL", Protocol: SSL, Addr: "127.0.0.1:0", TLS: f.server.TLSConfig()}}
			})
			conn := dialRaw(t, ts.Addr())
			waitFor(t, func() bool { return ts.connCount() == 1 })
			if c.timeout > 0 {
				conn.expectClosed()
				waitFor(t, func() bool { return strings.Contains(ts.logs.String(), "failed authentication: TLS handshake failed") })
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := ts.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown with a connection in its TLS handshake: %v", err)
			}
			conn.expectClosed()
		})
	}
}
