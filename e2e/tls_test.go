package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/diskless-sidecar/sidecar/internal/certtest"
	"github.com/diskless-sidecar/sidecar/internal/kafkatest"
)

// tlsFiles are a CA and the PEM files of a sidecar's keystore and
// truststore and of a client's certificate.
type tlsFiles struct {
	ca                         *certtest.CA
	dir                        string
	serverKeystore, truststore string
	client                     *certtest.Leaf
	// clientKeystore holds the client's key and chain (Java's PEM
	// keystore); clientCert and clientKey the same apart (kcat).
	clientKeystore, clientCert, clientKey string
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	f := &tlsFiles{ca: certtest.NewCA(t, "e2e-ca"), dir: t.TempDir()}
	srv := f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "sidecar-1"}, Server: true})
	f.serverKeystore, _, _ = srv.Files(t, f.dir, "server")
	f.truststore = filepath.Join(f.dir, "ca.pem")
	certtest.WriteFile(t, f.truststore, f.ca.PEM)
	f.client = f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "e2e-client", Organization: []string{"Example"}}})
	f.clientKeystore, f.clientCert, f.clientKey = f.client.Files(t, f.dir, "client")
	return f
}

// clientTLS is a crypto/tls client config presenting leaf (none if nil).
func (f *tlsFiles) clientTLS(t *testing.T, leaf *certtest.Leaf) *tls.Config {
	c := &tls.Config{RootCAs: f.ca.Pool(), MinVersion: tls.VersionTLS12}
	if leaf != nil {
		c.Certificates = []tls.Certificate{leaf.TLSCertificate(t)}
	}
	return c
}

// TestTLSClients: a sidecar with a PLAINTEXT and an mTLS (SSL,
// ssl.client.auth=required) listener; kgo, kcat and the Java client
// produce and consume over TLS with their client certificates, each told
// the TLS listener's address by Metadata (a client given the plaintext
// one would fail its handshake); refused cases leave it serving; a
// rotated keystore is served without a restart.
func TestTLSClients(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	sc := StartSidecar(t, "",
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"ssl.keystore.location="+f.serverKeystore,
		"ssl.truststore.location="+f.truststore,
		"ssl.client.auth=required")
	ssl := sc.Listeners["SSL"]
	if ssl == "" || sc.Listeners["PLAINTEXT"] != sc.Addr {
		t.Fatalf("listeners %v", sc.Listeners)
	}
	ctx := testCtx(t, 4*time.Minute)

	t.Run("kgo", func(t *testing.T) {
		kgoRoundTrip(t, ctx, "tls-kgo", 100, kgo.SeedBrokers(ssl), kgo.DialTLSConfig(f.clientTLS(t, f.client)))
	})

	t.Run("kcat", func(t *testing.T) {
		tlsArgs := []string{"-b", ssl, "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + f.truststore,
			"-X", "ssl.certificate.location=" + f.clientCert, "-X", "ssl.key.location=" + f.clientKey}
		in := filepath.Join(t.TempDir(), "lines")
		mustNoErr(t, "write", os.WriteFile(in, []byte("one\ntwo\nthree\n"), 0o644))
		kcat(t, ctx, append(tlsArgs, "-P", "-t", "tls-kcat", "-l", in)...)
		out := kcat(t, ctx, append(tlsArgs, "-C", "-t", "tls-kcat", "-o", "beginning", "-e", "-q", "-f", "%s\n")...)
		if out != "one\ntwo\nthree\n" {
			t.Fatalf("kcat consumed %q", out)
		}
		meta := kcat(t, ctx, append(tlsArgs, "-L")...)
		if !strings.Contains(meta, ssl) {
			t.Fatalf("kcat -L over TLS does not name the TLS listener %s:\n%s", ssl, meta)
		}
	})

	t.Run("java", func(t *testing.T) {
		props := []string{"--property", "security.protocol=SSL",
			"--property", "ssl.truststore.type=PEM", "--property", "ssl.truststore.location=" + f.truststore,
			"--property", "ssl.keystore.type=PEM", "--property", "ssl.keystore.location=" + f.clientKeystore}
		cmd, err := kafkatest.JavaCommand(ctx, "Produce", append([]string{"--bootstrap-server", ssl, "--topic", "tls-java"}, props...)...)
		mustNoErr(t, "java Produce", err)
		cmd.Stdin = strings.NewReader("a\nb\nc\n")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "produced 3 records, 0 failed") {
			t.Fatalf("java Produce over TLS: %v\n%s", err, out)
		}
		stdout, stderr, err := kafkatest.Java(ctx, "Consume", append([]string{"--bootstrap-server", ssl, "--topic", "tls-java", "--max-records", "3"}, props...)...)
		if err != nil {
			t.Fatalf("java Consume over TLS: %v\n%s", err, stderr)
		}
		recs, err := kafkatest.ParseRecords(stdout)
		mustNoErr(t, "parse", err)
		var vals []string
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
		if strings.Join(vals, ",") != "a,b,c" {
			t.Fatalf("java consumed %q", vals)
		}
	})

	// Each refused connection fails its client and nothing else: a kgo
	// client over TLS produces after each.
	good, err := kgo.NewClient(kgo.SeedBrokers(ssl), kgo.DialTLSConfig(f.clientTLS(t, f.client)),
		kgo.DefaultProduceTopic("tls-after"), kgo.AllowAutoTopicCreation())
	mustNoErr(t, "kgo client", err)
	defer good.Close()
	expired := f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "expired"},
		NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})
	stranger := certtest.NewCA(t, "other-ca").Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "stranger"}})
	for _, c := range []struct {
		name string
		addr string
		tls  *tls.Config
	}{
		{"expired certificate", ssl, f.clientTLS(t, expired)},
		{"no certificate", ssl, f.clientTLS(t, nil)},
		{"certificate of another CA", ssl, f.clientTLS(t, stranger)},
		{"plaintext to the TLS port", ssl, nil},
		{"TLS hello to the plaintext port", sc.Addr, f.clientTLS(t, f.client)},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := []kgo.Opt{kgo.SeedBrokers(c.addr), kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second),
				kgo.DialTimeout(3 * time.Second), kgo.RequestTimeoutOverhead(3 * time.Second)}
			if c.tls != nil {
				opts = append(opts, kgo.DialTLSConfig(c.tls))
			}
			bad, err := kgo.NewClient(opts...)
			mustNoErr(t, "kgo client", err)
			defer bad.Close()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := bad.Ping(pctx); err == nil {
				t.Fatal("ping succeeded")
			}
			mustNoErr(t, "produce after the refusal", good.ProduceSync(ctx, kgo.StringRecord(c.name)).FirstErr())
			if !sc.Alive() {
				t.Fatal("sidecar exited")
			}
		})
	}
	if n := strings.Count(sc.Logs(), "failed authentication: TLS handshake failed"); n < 1 || n > 2 {
		t.Errorf("%d lines of failed TLS handshakes, want the first one (and at most a summary)", n)
	}

	t.Run("rotation", func(t *testing.T) {
		next := f.ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "sidecar-2"}, Server: true})
		certtest.WriteFile(t, f.serverKeystore, next.Keystore())
		deadline := time.Now().Add(30 * time.Second)
		for {
			cn := servedCN(t, ssl, f.clientTLS(t, f.client))
			if cn == "sidecar-2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still serving %q 30 s after the keystore changed", cn)
			}
			time.Sleep(100 * time.Millisecond)
		}
		mustNoErr(t, "produce after the rotation", good.ProduceSync(ctx, kgo.StringRecord("rotated")).FirstErr())
	})
}

// kgoRoundTrip produces n records "v0"… to topic (auto-created) with a
// kgo client of opts, one at a time, and consumes them back in order.
func kgoRoundTrip(t *testing.T, ctx context.Context, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.ConsumeTopics(topic), kgo.AllowAutoTopicCreation())...)
	mustNoErr(t, "kgo client", err)
	defer cl.Close()
	for i := range n {
		mustNoErr(t, "produce", cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprintf("v%d", i))).FirstErr())
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		mustNoErr(t, "poll", fs.Err0())
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%d", got); string(r.Value) != want {
				t.Fatalf("record %d: %q, want %q", got, r.Value, want)
			}
			got++
		})
	}
}

// kcatRoundTrip produces two lines to topic with kcat (args: the
// connection's -b and -X options) and consumes them back.
func kcatRoundTrip(t *testing.T, ctx context.Context, topic string, args ...string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "lines")
	mustNoErr(t, "write", os.WriteFile(in, []byte("one\ntwo\n"), 0o644))
	kcat(t, ctx, append(args, "-P", "-t", topic, "-l", in)...)
	if out := kcat(t, ctx, append(args, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n")...); out != "one\ntwo\n" {
		t.Fatalf("kcat consumed %q", out)
	}
}

// javaReauthRoundTrip produces 10 lines to topic with the Java client
// over SASL_SSL at addr (props: its --property options), one each 500 ms:
// with connections.max.reauth.ms=2000 the sessions end twice while the
// producer holds its connection, so it re-authenticates (KIP-368) and
// keeps going, which sc's log must show; then consumes the 10 back.
func javaReauthRoundTrip(t *testing.T, ctx context.Context, sc *Sidecar, addr, topic string, props ...string) {
	t.Helper()
	cmd, err := kafkatest.JavaCommand(ctx, "Produce", append([]string{"--bootstrap-server", addr, "--topic", topic}, props...)...)
	mustNoErr(t, "java Produce", err)
	pr, pw := io.Pipe()
	cmd.Stdin = pr
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	mustNoErr(t, "start", cmd.Start())
	for i := range 10 {
		fmt.Fprintf(pw, "line-%d\n", i)
		time.Sleep(500 * time.Millisecond)
	}
	pw.Close()
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "produced 10 records, 0 failed") {
		t.Fatalf("java Produce over SASL_SSL: %v\n%s", err, out.String())
	}
	if !strings.Contains(sc.Logs(), "SASL re-authentication done") {
		t.Errorf("no re-authentication in the sidecar's log")
	}
	stdout, stderr, err := kafkatest.Java(ctx, "Consume", append([]string{"--bootstrap-server", addr, "--topic", topic, "--max-records", "10"}, props...)...)
	if err != nil {
		t.Fatalf("java Consume over SASL_SSL: %v\n%s", err, stderr)
	}
	if recs, err := kafkatest.ParseRecords(stdout); err != nil || len(recs) != 10 {
		t.Fatalf("java consumed %d records (%v)", len(recs), err)
	}
}

// mustRefuseSASL requires a kgo client of opts (seed brokers, SASL, …),
// without retries, to be refused SASL_AUTHENTICATION_FAILED; what names
// the attempt in the failure.
func mustRefuseSASL(t *testing.T, ctx context.Context, what string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append(opts, kgo.RequestRetries(0))...)
	mustNoErr(t, "kgo client", err)
	defer cl.Close()
	if err := cl.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", what, err)
	}
}

// servedCN is the common name of the certificate the listener at addr
// presents.
func servedCN(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	mustNoErr(t, "TLS dial", err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestSASLClients: a sidecar with a PLAINTEXT and a SASL_SSL listener
// offering PLAIN; kgo, kcat and the Java client produce and consume over
// SASL_SSL; a wrong password and an unknown user are refused with
// SASL_AUTHENTICATION_FAILED and leave the sidecar serving; with
// connections.max.reauth.ms the Java client re-authenticates on its
// connection and keeps producing.
func TestSASLClients(t *testing.T) {
	t.Parallel()
	f := newTLSFiles(t)
	sc := StartSidecar(t, "",
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"ssl.keystore.location="+f.serverKeystore,
		"sasl.enabled.mechanisms=PLAIN",
		"connections.max.reauth.ms=2000",
		`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";`)
	addr := sc.Listeners["SASL_SSL"]
	ctx := testCtx(t, 4*time.Minute)
	tlsCfg := f.clientTLS(t, nil)

	t.Run("kgo", func(t *testing.T) {
		kgoRoundTrip(t, ctx, "sasl-kgo", 50, kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg),
			kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()))
	})

	t.Run("kcat", func(t *testing.T) {
		args := []string{"-b", addr, "-X", "security.protocol=sasl_ssl", "-X", "ssl.ca.location=" + f.truststore,
			"-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=bob", "-X", "sasl.password=bob-secret"}
		kcatRoundTrip(t, ctx, "sasl-kcat", args...)
	})

	t.Run("java with re-authentication", func(t *testing.T) {
		props := []string{"--property", "security.protocol=SASL_SSL", "--property", "sasl.mechanism=PLAIN",
			"--property", `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";`,
			"--property", "ssl.truststore.type=PEM", "--property", "ssl.truststore.location=" + f.truststore}
		javaReauthRoundTrip(t, ctx, sc, addr, "sasl-java", props...)
	})

	good, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(plain.Auth{User: "bob", Pass: "bob-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("sasl-after"), kgo.AllowAutoTopicCreation())
	mustNoErr(t, "kgo client", err)
	defer good.Close()
	for _, c := range []struct{ name, user, pass string }{
		{"wrong password", "alice", "bob-secret"},
		{"unknown user", "mallory", "x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustRefuseSASL(t, ctx, "ping", kgo.SeedBrokers(addr), kgo.DialTLSConfig(tlsCfg),
				kgo.SASL(plain.Auth{User: c.user, Pass: c.pass}.AsMechanism()))
			mustNoErr(t, "produce after the refusal", good.ProduceSync(ctx, kgo.StringRecord(c.name)).FirstErr())
		})
	}
	if strings.Contains(sc.Logs(), "alice-secret") || strings.Contains(sc.Logs(), "bob-secret") {
		t.Error("a password in the sidecar's log")
	}
}
