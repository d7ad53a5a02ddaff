package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-sidecar/sidecar/coordinator"
	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/certtest"
	"github.com/diskless-sidecar/sidecar/internal/sasl"
	"github.com/diskless-sidecar/sidecar/metalog"
	"github.com/diskless-sidecar/sidecar/metalog/metalogtest"
	"github.com/diskless-sidecar/sidecar/rpcmsg"
	"github.com/diskless-sidecar/sidecar/server"
)

// TestClientAuthenticates: a Client set up with TLS and a SASL mechanism
// calls a server whose one listener is SASL_SSL (SPEC §14, Inter-sidecar
// traffic): with SCRAM-SHA-512 or PLAIN and the right password its
// requests are answered; a wrong password, a mechanism the listener does
// not offer, or no TLS fail the set-up with ErrNotSent.
func TestClientAuthenticates(t *testing.T) {
	ca := certtest.NewCA(t, "peer-ca")
	leaf := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "sidecar"}, Server: true})
	cred := sasl.NewScramCredential(diskless.ScramSHA512, "scram-pw", []byte("0123456789abcdef"), 4096)
	scramMech, err := sasl.NewScram(diskless.ScramSHA512, func(user string, m diskless.ScramMechanism) (diskless.ScramCredential, bool) {
		return cred, user == "sidecar" && m == diskless.ScramSHA512
	})
	if err != nil {
		t.Fatal(err)
	}
	plainMech, err := sasl.NewPlain(map[string]string{"sidecar": "plain-pw"})
	if err != nil {
		t.Fatal(err)
	}
	addr := startAuthServer(t, server.Listener{Name: "SASL_SSL", Protocol: server.SASLSSL, Addr: "127.0.0.1:0",
		TLS:  &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{leaf.TLSCertificate(t)}},
		SASL: []server.SASLMechanism{scramMech, plainMech}})
	clientTLS := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	for _, c := range []struct {
		name string
		cfg  ClientConfig
		ok   bool
	}{
		{"SCRAM-SHA-512", ClientConfig{TLS: clientTLS, SASL: scram.Auth{User: "sidecar", Pass: "scram-pw"}.AsSha512Mechanism()}, true},
		{"PLAIN", ClientConfig{TLS: clientTLS, SASL: plain.Auth{User: "sidecar", Pass: "plain-pw"}.AsMechanism()}, true},
		{"wrong password", ClientConfig{TLS: clientTLS, SASL: scram.Auth{User: "sidecar", Pass: "nope"}.AsSha512Mechanism()}, false},
		{"mechanism not offered", ClientConfig{TLS: clientTLS, SASL: scram.Auth{User: "sidecar", Pass: "scram-pw"}.AsSha256Mechanism()}, false},
		{"no TLS", ClientConfig{SASL: plain.Auth{User: "sidecar", Pass: "plain-pw"}.AsMechanism(), DialTimeout: testWait}, false},
	} {
		cl := NewClient(c.cfg)
		req := rpcmsg.NewDescribeFilesRequest()
		req.ObjectKeys = []string{"k"}
		_, err := cl.Request(context.Background(), addr, req)
		cl.Close()
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrNotSent) {
			t.Errorf("%s: %v, want ErrNotSent", c.name, err)
		}
	}
}

// TestClientPresentsCertificate: a Client set up with TLS and the
// keystore's certificate (no SASL) calls a server whose one listener is SSL
// with ssl.client.auth=required — the inter-sidecar listener of a cluster
// authenticating by certificates (SPEC §14, Inter-sidecar traffic): with
// the certificate its requests are answered; without one the set-up fails
// with ErrNotSent.
func TestClientPresentsCertificate(t *testing.T) {
	ca := certtest.NewCA(t, "peer-ca")
	leaf := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "sidecar-1"}, Server: true})
	client := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "sidecar-2"}})
	addr := startAuthServer(t, server.Listener{Name: "SSL", Protocol: server.SSL, Addr: "127.0.0.1:0",
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{leaf.TLSCertificate(t)},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}})
	for _, c := range []struct {
		name string
		tls  *tls.Config
		ok   bool
	}{
		{"with the certificate", &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{client.TLSCertificate(t)}}, true},
		{"without a certificate", &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}, false},
	} {
		cl := NewClient(ClientConfig{TLS: c.tls, DialTimeout: testWait})
		req := rpcmsg.NewDescribeFilesRequest()
		req.ObjectKeys = []string{"k"}
		_, err := cl.Request(context.Background(), addr, req)
		cl.Close()
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if !c.ok && !errors.Is(err, ErrNotSent) {
			t.Errorf("%s: %v, want ErrNotSent", c.name, err)
		}
	}
}

// startAuthServer serves a coordinator of numShards shards on a server
// whose one listener is l, until t ends, and returns its address.
func startAuthServer(t *testing.T, l server.Listener) string {
	t.Helper()
	mem := &metalogtest.Memory{}
	coord, err := coordinator.Open(coordinator.Config{NumShards: numShards, NodeID: 1, Logger: quiet,
		OpenLog: func(s int32) (metalog.Log, error) { return mem.Open(s) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close() })
	srv, err := server.New(server.Config{NodeID: 1, ClusterID: "peer-test", Logger: quiet,
		Listeners: []server.Listener{l}}, stubProducer{}, stubFetcher{}, coord)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	return srv.Addr().String()
}
