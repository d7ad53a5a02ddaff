package tlsconfig

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskless-sidecar/sidecar/internal/certtest"
)

func TestLoadKeystoreForms(t *testing.T) {
	ca := certtest.NewCA(t, "test-ca")
	leaf := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "server"}, Server: true})
	dir := t.TempDir()
	ks, _, _ := leaf.Files(t, dir, "server")
	trust := filepath.Join(dir, "trust.pem")
	certtest.WriteFile(t, trust, ca.PEM)

	for name, c := range map[string]Config{
		"location":   {KeystoreLocation: ks, TruststoreLocation: trust, ClientAuth: ClientAuthRequired},
		"inline":     {KeystoreCertificateChain: string(leaf.CertPEM), KeystoreKey: string(leaf.KeyPEM), TruststoreCertificates: string(ca.PEM)},
		"no trust":   {KeystoreLocation: ks, ClientAuth: ClientAuthRequested},
		"tls13 only": {KeystoreLocation: ks, MinVersion: tls.VersionTLS13},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			cur := s.Current()
			if got := cur.Certificates[0].Leaf.Subject.CommonName; got != "server" {
				t.Fatalf("leaf CN %q", got)
			}
			if len(cur.Certificates[0].Certificate) != 2 {
				t.Fatalf("chain of %d certificates, want leaf and CA", len(cur.Certificates[0].Certificate))
			}
			want := map[ClientAuth]tls.ClientAuthType{"": tls.NoClientCert, ClientAuthRequired: tls.RequireAndVerifyClientCert,
				ClientAuthRequested: tls.VerifyClientCertIfGiven}[c.ClientAuth]
			if cur.ClientAuth != want {
				t.Fatalf("ClientAuth %v, want %v", cur.ClientAuth, want)
			}
			if (c.TruststoreLocation != "" || c.TruststoreCertificates != "") != (cur.ClientCAs != nil) {
				t.Fatalf("ClientCAs %v", cur.ClientCAs)
			}
			if min := max(c.MinVersion, tls.VersionTLS12); cur.MinVersion != min || s.TLSConfig().MinVersion != min {
				t.Fatalf("MinVersion %x, want %x", cur.MinVersion, min)
			}
		})
	}
}

// TestLoadRefusesNamingTheKey: a bad keystore or truststore is an error
// naming the key it came from, and a private key never appears in it.
func TestLoadRefusesNamingTheKey(t *testing.T) {
	ca := certtest.NewCA(t, "test-ca")
	leaf := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "server"}, Server: true})
	other := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "other"}, Server: true})
	dir := t.TempDir()
	ks, certOnly, _ := leaf.Files(t, dir, "server")
	encrypted := filepath.Join(dir, "enc.pem")
	certtest.WriteFile(t, encrypted, append([]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"), leaf.CertPEM...))
	for name, c := range map[string]struct {
		cfg Config
		key string
	}{
		"no keystore":        {Config{}, "ssl.keystore.location"},
		"both keystores":     {Config{KeystoreLocation: ks, KeystoreKey: "x", KeystoreCertificateChain: "y"}, "ssl.keystore.location"},
		"missing file":       {Config{KeystoreLocation: filepath.Join(dir, "none.pem")}, "ssl.keystore.location"},
		"no key in file":     {Config{KeystoreLocation: certOnly}, "ssl.keystore.location"},
		"encrypted key":      {Config{KeystoreLocation: encrypted}, "ssl.keystore.location"},
		"key of another":     {Config{KeystoreCertificateChain: string(leaf.CertPEM), KeystoreKey: string(other.KeyPEM)}, "ssl.keystore.key"},
		"chain alone":        {Config{KeystoreCertificateChain: string(leaf.CertPEM)}, "ssl.keystore.key"},
		"bad truststore":     {Config{KeystoreLocation: ks, TruststoreCertificates: "not pem"}, "ssl.truststore.certificates"},
		"missing truststore": {Config{KeystoreLocation: ks, TruststoreLocation: filepath.Join(dir, "none.pem")}, "ssl.truststore.location"},
		"bad client auth":    {Config{KeystoreLocation: ks, ClientAuth: "always"}, "ssl.client.auth"},
		"tls 1.1":            {Config{KeystoreLocation: ks, MinVersion: tls.VersionTLS11}, "ssl.enabled.protocols"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(c.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), c.key) {
				t.Fatalf("error %v, want one starting %s", err, c.key)
			}
			if strings.Contains(err.Error(), "-----BEGIN") || strings.Contains(err.Error(), string(other.KeyPEM[30:60])) {
				t.Fatalf("error shows key material: %v", err)
			}
		})
	}
}

// TestReload: a changed keystore is served from the next handshake after
// the check interval; one that does not load keeps the old certificates.
func TestReload(t *testing.T) {
	ca := certtest.NewCA(t, "test-ca")
	first := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "first"}, Server: true})
	second := ca.Issue(t, certtest.Options{Subject: pkix.Name{CommonName: "second"}, Server: true})
	dir := t.TempDir()
	ks, _, _ := first.Files(t, dir, "server")
	now := time.Unix(1000, 0)
	var logs strings.Builder
	s, err := New(Config{KeystoreLocation: ks, Now: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cn := func() string {
		c, err := s.TLSConfig().GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificates[0].Leaf.Subject.CommonName
	}
	certtest.WriteFile(t, ks, second.Keystore())
	bump(t, ks, 1)
	if got := cn(); got != "first" {
		t.Fatalf("within the check interval: %q, want first", got)
	}
	now = now.Add(DefaultReloadCheck)
	if got := cn(); got != "second" {
		t.Fatalf("after the change: %q, want second", got)
	}
	certtest.WriteFile(t, ks, second.CertPEM) // no key: does not load
	bump(t, ks, 2)
	for range 5 {
		now = now.Add(DefaultReloadCheck)
		if got := cn(); got != "second" {
			t.Fatalf("after a bad change: %q, want second kept", got)
		}
	}
	// The bad files are read and logged once, not at every check while
	// they stay as they are.
	if n := strings.Count(logs.String(), "do not load"); n != 1 {
		t.Fatalf("%d lines of files that do not load over 5 checks, want 1:\n%s", n, logs.String())
	}
	certtest.WriteFile(t, ks, first.Keystore())
	bump(t, ks, 3)
	now = now.Add(DefaultReloadCheck)
	if got := cn(); got != "first" {
		t.Fatalf("after the fix: %q, want first", got)
	}
}

// bump sets path's modification time apart from earlier writes (a file
// system's timestamps may be coarser than the test's writes).
func bump(t *testing.T, path string, n int) {
	t.Helper()
	mt := time.Unix(2000+int64(n), 0)
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

func TestSubjectName(t *testing.T) {
	ca := certtest.NewCA(t, "test-ca")
	leaf := ca.Issue(t, certtest.Options{Subject: pkix.Name{
		Country: []string{"US"}, Organization: []string{"Example, Inc."}, OrganizationalUnit: []string{"eng"}, CommonName: "client-1",
		ExtraNames: []pkix.AttributeTypeAndValue{{Type: asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}, Value: "u1"}},
	}})
	// RFC 2253: the last RDN of the sequence first; Go orders the
	// sequence C, O, OU, CN, then the extra names.
	want := `0.9.2342.19200300.100.1.1=#13027531,CN=client-1,OU=eng,O=Example\, Inc.,C=US`
	if got := SubjectName(leaf.Cert); got != want {
		t.Fatalf("SubjectName = %q, want %q", got, want)
	}
}

func TestPrincipalMappingRules(t *testing.T) {
	const dn = "CN=kafka-client-1,OU=eng,O=Example,C=US"
	cases := []struct {
		rules, dn, want string
		err             error
	}{
		{"", dn, dn, nil},
		{"DEFAULT", dn, dn, nil},
		{`RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L,DEFAULT`, "CN=Kafka-Client-1,OU=ENG,O=Example,C=US", "kafka-client-1@eng", nil},
		{`RULE:^CN=(.*?),OU=(.*?).*$/$1/U`, dn, "KAFKA-CLIENT-1", nil},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT`, dn, dn, nil},
		{`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/`, dn, "", ErrNoMatchingRule},
		{`RULE:^CN=([^,]*).*$/$1x/`, dn, "kafka-client-1x", nil},
		{`RULE:^CN=([^,]*).*$/$3/`, dn, "$3", nil},
		{`RULE:^CN=([^,]*).*$/$12/`, dn, "kafka-client-12", nil},
		{`RULE:^CN=([^,]*)\/x.*$/$1/, DEFAULT`, "CN=a/x,O=b", "a", nil},
		{` RULE:^CN=([^,]*)\,.*$/$1/ , DEFAULT `, dn, "kafka-client-1", nil},
	}
	for _, c := range cases {
		m, err := ParsePrincipalMappingRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		got, err := m.Name(c.dn)
		if !errors.Is(err, c.err) || got != c.want {
			t.Errorf("%q on %q = %q, %v; want %q, %v", c.rules, c.dn, got, err, c.want, c.err)
		}
	}
	for _, bad := range []string{"RULE:x", "RULE:a/b/c", "RULE:a/b/LU", "RULE:(/x/", "NOPE", "DEFAULT,RULE:a", "DEFAULTX"} {
		if _, err := ParsePrincipalMappingRules(bad); err == nil || !strings.HasPrefix(err.Error(), "ssl.principal.mapping.rules") {
			t.Errorf("%q: error %v, want one naming ssl.principal.mapping.rules", bad, err)
		}
	}
}
