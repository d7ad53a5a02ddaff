package server

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/certtest"
	"github.com/diskless-sidecar/sidecar/internal/sasl"
	"github.com/diskless-sidecar/sidecar/internal/tlsconfig"
)

// FuzzSASLConn is FuzzConn on a SASL_PLAINTEXT listener offering PLAIN
// and SCRAM-SHA-512: garbage before, during and after the SASL handshake
// (v0's bare messages and v1's SaslAuthenticate; SCRAM's client-first and
// client-final messages cut, altered, repeated, with extensions), and
// requests of every key after a login.
func FuzzSASLConn(f *testing.F) {
	plain, err := sasl.NewPlain(map[string]string{"alice": "alice-secret"})
	if err != nil {
		f.Fatal(err)
	}
	cred := sasl.NewScramCredential(diskless.ScramSHA512, "alice-secret", []byte("fuzz-salt"), 4096)
	scram512, err := sasl.NewScram(diskless.ScramSHA512, func(user string, mech diskless.ScramMechanism) (diskless.ScramCredential, bool) {
		return cred, user == "alice" && mech == diskless.ScramSHA512
	})
	if err != nil {
		f.Fatal(err)
	}
	const first = "n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"
	fm := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	req := func(r kmsg.Request, corr int32) []byte { return fm.AppendRequest(nil, r, corr) }
	login1 := append(req(handshake(1, "PLAIN"), 1), req(authenticate(2, "\x00alice\x00alice-secret"), 2)...)
	login0 := append(req(handshake(0, "PLAIN"), 1), appendRaw(nil, []byte("\x00alice\x00alice-secret"))...)
	var after []byte
	for _, seed := range fuzzSeeds()[:20] {
		after = append(after, seed...)
	}
	for _, seed := range [][]byte{
		login1, login0,
		append(append([]byte{}, login1...), after...),
		append(append([]byte{}, login0...), after...),
		append(req(apiVersionsReq(), 1), login1...),
		append(req(handshake(1, "PLAIN"), 1), req(authenticate(1, "\x00alice"), 2)...),
		append(req(handshake(1, "GSSAPI"), 1), login1...),
		append(req(handshake(0, "PLAIN"), 1), 0xff, 0xff, 0xff, 0xff),
		append(req(handshake(0, "PLAIN"), 1), 0, 0, 0, 3, 'a', 0, 'b'),
		append(login1, login1...),
		req(metadataReq(), 1),
		// SCRAM: the client-first, then a client-final whose nonce or
		// proof cannot match; bare (v0) and wrapped (v1).
		append(append(req(handshake(1, "SCRAM-SHA-512"), 1), req(authenticate(2, first), 2)...),
			req(authenticate(2, "c=biws,r=fyko+d2lbbFgONRv9qkxdawLXXXX,p=dGVzdA=="), 3)...),
		append(append(req(handshake(0, "SCRAM-SHA-512"), 1), appendRaw(nil, []byte(first))...),
			appendRaw(nil, []byte("c=biws,r=x,p=AAAA"))...),
		append(req(handshake(1, "SCRAM-SHA-512"), 1), req(authenticate(2, first+",tokenauth=true"), 2)...),
		append(req(handshake(1, "SCRAM-SHA-512"), 1), req(authenticate(2, "n,a=bob,n=alice,r=abc"), 2)...),
		append(req(handshake(1, "SCRAM-SHA-512"), 1), req(authenticate(2, "y,,n=al=3Dice,r="), 2)...),
		append(append(req(handshake(1, "SCRAM-SHA-512"), 1), req(authenticate(2, first), 2)...), login1...),
		{0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOneConn(t, data, &boundListener{Listener: Listener{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext,
			SASL: []SASLMechanism{plain, scram512}}})
	})
}

// FuzzTLSConn feeds arbitrary bytes to a TLS listener's connection
// (requiring client certificates): garbage instead of a hello, a real
// client hello cut or altered, a hello followed by garbage. The
// handshake must fail cleanly: no panic, no error line, no goroutine left.
func FuzzTLSConn(f *testing.F) {
	ca := certtest.NewCA(f, "fuzz-ca")
	srv := ca.Issue(f, certtest.Options{Subject: pkix.Name{CommonName: "sidecar"}, Server: true})
	src, err := tlsconfig.New(tlsconfig.Config{KeystoreCertificateChain: string(srv.CertPEM), KeystoreKey: string(srv.KeyPEM),
		TruststoreCertificates: string(ca.PEM), ClientAuth: tlsconfig.ClientAuthRequired})
	if err != nil {
		f.Fatal(err)
	}
	hello := clientHello(f, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1"})
	f.Add(hello)
	f.Add(hello[:len(hello)/2])
	f.Add(append(append([]byte{}, hello...), 0x17, 0x03, 0x03, 0x00, 0x10))
	f.Add(append(append([]byte{}, hello...), hello...))
	f.Add(fuzzSeeds()[0])
	f.Add([]byte{0x16, 0x03, 0x01, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzOneConn(t, data, &boundListener{Listener: Listener{Name: "SSL", Protocol: SSL, TLS: src.TLSConfig()}})
	})
}

// clientHello is the first flight a crypto/tls client sends.
func clientHello(tb testing.TB, cfg *tls.Config) []byte {
	tb.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, cfg)
		_ = c.SetDeadline(time.Now().Add(testTimeout))
		_ = c.Handshake()
	}()
	_ = b.SetReadDeadline(time.Now().Add(testTimeout))
	buf := make([]byte, 16<<10)
	n, err := b.Read(buf)
	if err != nil {
		tb.Fatal(err)
	}
	return buf[:n]
}
