package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
)

// ClientAuth is ssl.client.auth: whether a listener asks clients for a
// certificate (SPEC §14, TLS).
type ClientAuth string

// The values of ssl.client.auth.
const (
	ClientAuthNone      ClientAuth = "none"
	ClientAuthRequested ClientAuth = "requested"
	ClientAuthRequired  ClientAuth = "required"
)

// DefaultReloadCheck is how often, at most, a handshake checks whether the
// keystore or truststore files changed.
const DefaultReloadCheck = time.Second

// Config is one listener's TLS, from the ssl.* keys.
type Config struct {
	// KeystoreLocation is ssl.keystore.location: a PEM file holding the
	// private key (PKCS#8, PKCS#1 or SEC 1, unencrypted) and the
	// certificate chain, leaf first. Exclusive with the inline pair below.
	KeystoreLocation string
	// KeystoreCertificateChain and KeystoreKey are
	// ssl.keystore.certificate.chain and ssl.keystore.key: the same in
	// PEM text, inline.
	KeystoreCertificateChain, KeystoreKey string
	// TruststoreLocation is ssl.truststore.location: a PEM file of the
	// CA certificates client certificates are verified against.
	// Exclusive with TruststoreCertificates (ssl.truststore.certificates,
	// inline). Neither: the system's roots.
	TruststoreLocation, TruststoreCertificates string
	// ClientAuth is ssl.client.auth; "" is none.
	ClientAuth ClientAuth
	// MinVersion is the lowest of ssl.enabled.protocols: tls.VersionTLS12
	// (default) or tls.VersionTLS13.
	MinVersion uint16
	// ReloadCheck bounds how often the files are checked for a change;
	// default DefaultReloadCheck.
	ReloadCheck time.Duration
	// Logger receives a line when files are reloaded or fail to load.
	Logger *slog.Logger
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Validate reports what is wrong with c, naming the keys.
func (c Config) Validate() error {
	var errs []error
	inline := c.KeystoreCertificateChain != "" || c.KeystoreKey != ""
	switch {
	case c.KeystoreLocation != "" && inline:
		errs = append(errs, errors.New("ssl.keystore.location: set together with ssl.keystore.certificate.chain/ssl.keystore.key; use one"))
	case c.KeystoreLocation == "" && !inline:
		errs = append(errs, errors.New("ssl.keystore.location: a TLS listener needs a keystore (or ssl.keystore.certificate.chain and ssl.keystore.key)"))
	case inline && (c.KeystoreCertificateChain == "" || c.KeystoreKey == ""):
		errs = append(errs, errors.New("ssl.keystore.key: ssl.keystore.certificate.chain and ssl.keystore.key go together"))
	}
	if c.TruststoreLocation != "" && c.TruststoreCertificates != "" {
		errs = append(errs, errors.New("ssl.truststore.location: set together with ssl.truststore.certificates; use one"))
	}
	switch c.ClientAuth {
	case "", ClientAuthNone, ClientAuthRequested, ClientAuthRequired:
	default:
		errs = append(errs, fmt.Errorf("ssl.client.auth %q: must be none, requested or required", c.ClientAuth))
	}
	switch c.MinVersion {
	case 0, tls.VersionTLS12, tls.VersionTLS13:
	default:
		errs = append(errs, fmt.Errorf("ssl.enabled.protocols: only TLSv1.2 and TLSv1.3 are supported"))
	}
	return errors.Join(errs...)
}

// Source is a listener's TLS: the *tls.Config to hand the listener, whose
// certificates follow their files.
type Source struct {
	cfg  Config
	base *tls.Config
	log  *slog.Logger

	// mu guards the loaded state and when the files were last checked.
	mu struct {
		sync.Mutex
		checked time.Time
		stamps  []fileStamp
		current *tls.Config
	}
}

// fileStamp is what tells a file changed: its size and modification time.
type fileStamp struct {
	path  string
	size  int64
	mtime time.Time
}

// New loads c's files (an error names the key whose file or text is
// bad) and returns the Source.
func New(c Config) (*Source, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.ReloadCheck == 0 {
		c.ReloadCheck = DefaultReloadCheck
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	s := &Source{cfg: c, log: c.Logger}
	cur, stamps, err := s.load()
	if err != nil {
		return nil, err
	}
	s.mu.current, s.mu.stamps, s.mu.checked = cur, stamps, c.Now()
	s.base = &tls.Config{MinVersion: c.MinVersion, GetConfigForClient: s.forClient}
	return s, nil
}

// TLSConfig returns the listener's *tls.Config: each handshake takes the
// certificates loaded last, after checking the files for a change.
func (s *Source) TLSConfig() *tls.Config { return s.base }

// ClientConfig returns the *tls.Config this listener's own side dials its
// peers with (a sidecar's calls to the others on the inter-sidecar
// listener, as a Kafka broker's on the inter-broker one; SPEC §14,
// Inter-sidecar traffic): the keystore's certificate, the one loaded last
// at each handshake, as the client certificate, and the truststore's CAs
// as loaded now (none: the system's roots) to verify the peer.
func (s *Source) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: s.cfg.MinVersion,
		RootCAs:    s.Current().ClientCAs,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &s.Current().Certificates[0], nil
		},
	}
}

// forClient is the base config's GetConfigForClient.
func (s *Source) forClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	return s.Current(), nil
}

// Current returns the config of the certificates loaded last, reloading
// them first when a file changed and the last check is older than
// ReloadCheck.
func (s *Source) Current() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	if now.Sub(s.mu.checked) < s.cfg.ReloadCheck {
		return s.mu.current
	}
	s.mu.checked = now
	seen := s.stampFiles()
	if stampsEqual(seen, s.mu.stamps) {
		return s.mu.current
	}
	cur, stamps, err := s.load()
	if err != nil {
		// A file half written or a key that does not match its new
		// certificate yet: keep serving the old ones, and try again
		// (and log again) once the files change again, not at every
		// check while they stay as they are.
		s.mu.stamps = seen
		s.log.Warn("TLS files changed but do not load; keeping the previous certificates", "err", err)
		return s.mu.current
	}
	s.mu.current, s.mu.stamps = cur, stamps
	s.log.Info("TLS certificates reloaded", "subject", cur.Certificates[0].Leaf.Subject.String(),
		"not_after", cur.Certificates[0].Leaf.NotAfter)
	return cur
}

func (s *Source) files() []string {
	var fs []string
	if s.cfg.KeystoreLocation != "" {
		fs = append(fs, s.cfg.KeystoreLocation)
	}
	if s.cfg.TruststoreLocation != "" {
		fs = append(fs, s.cfg.TruststoreLocation)
	}
	return fs
}

func (s *Source) stampFiles() []fileStamp {
	var st []fileStamp
	for _, f := range s.files() {
		fi, err := os.Stat(f)
		if err != nil {
			st = append(st, fileStamp{path: f, size: -1})
			continue
		}
		st = append(st, fileStamp{path: f, size: fi.Size(), mtime: fi.ModTime()})
	}
	return st
}

func stampsEqual(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].path != b[i].path || a[i].size != b[i].size || !a[i].mtime.Equal(b[i].mtime) {
			return false
		}
	}
	return true
}

// load reads the keystore and truststore into a fresh *tls.Config, with
// the files' stamps taken before reading (so a write during the read is
// seen as a change next time).
func (s *Source) load() (*tls.Config, []fileStamp, error) {
	stamps := s.stampFiles()
	c := s.cfg
	chain, key := []byte(c.KeystoreCertificateChain), []byte(c.KeystoreKey)
	keyKey := "ssl.keystore.key"
	if c.KeystoreLocation != "" {
		b, err := os.ReadFile(c.KeystoreLocation)
		if err != nil {
			return nil, nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		chain, key, keyKey = b, b, "ssl.keystore.location"
	}
	cert, err := keyPair(chain, key)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyKey, err)
	}
	tc := &tls.Config{MinVersion: c.MinVersion, Certificates: []tls.Certificate{cert}}
	var roots []byte
	rootsKey := "ssl.truststore.certificates"
	if c.TruststoreLocation != "" {
		b, err := os.ReadFile(c.TruststoreLocation)
		if err != nil {
			return nil, nil, fmt.Errorf("ssl.truststore.location: %w", err)
		}
		roots, rootsKey = b, "ssl.truststore.location"
	} else if c.TruststoreCertificates != "" {
		roots = []byte(c.TruststoreCertificates)
	}
	if roots != nil {
		pool := x509.NewCertPool()
		certs, err := parseCertificates(roots)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", rootsKey, err)
		}
		if len(certs) == 0 {
			return nil, nil, fmt.Errorf("%s: no PEM CERTIFICATE block", rootsKey)
		}
		for _, ct := range certs {
			pool.AddCert(ct)
		}
		tc.ClientCAs = pool
	}
	switch c.ClientAuth {
	case ClientAuthRequired:
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	case ClientAuthRequested:
		tc.ClientAuth = tls.VerifyClientCertIfGiven
	default:
		tc.ClientAuth = tls.NoClientCert
	}
	return tc, stamps, nil
}

// keyPair takes the certificate chain from chainPEM's CERTIFICATE blocks
// and the private key from keyPEM's key block (the two may be one text).
// An encrypted key is refused: ssl.key.password is not supported.
func keyPair(chainPEM, keyPEM []byte) (tls.Certificate, error) {
	var certs, keys []byte
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, pem.EncodeToMemory(b)...)
		}
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY" || b.Headers["Proc-Type"] != "":
			return tls.Certificate{}, errors.New("encrypted private keys are not supported (ssl.key.password): store the key unencrypted and protect the file")
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			if keys != nil {
				return tls.Certificate{}, errors.New("more than one private key")
			}
			keys = pem.EncodeToMemory(b)
		}
	}
	if certs == nil {
		return tls.Certificate{}, errors.New("no PEM CERTIFICATE block")
	}
	if keys == nil {
		return tls.Certificate{}, errors.New("no PEM PRIVATE KEY block")
	}
	cert, err := tls.X509KeyPair(certs, keys)
	if err != nil {
		return tls.Certificate{}, err
	}
	return cert, nil // Leaf is set by X509KeyPair.
}

func parseCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return out, nil
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}
