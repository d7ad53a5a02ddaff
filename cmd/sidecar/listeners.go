package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/diskless-sidecar/sidecar/diskless"
	"github.com/diskless-sidecar/sidecar/internal/sasl"
	"github.com/diskless-sidecar/sidecar/internal/tlsconfig"
	"github.com/diskless-sidecar/sidecar/server"
)

// Listener is one NAME://host:port endpoint of listeners or
// advertised.listeners; Name is upper case, as Kafka compares them.
type Listener struct {
	Name string
	Host string
	Port int
}

func (l Listener) String() string {
	return l.Name + "://" + net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
}

// defaultProtocolMap is Kafka's listener.security.protocol.map default:
// each protocol's name stands for itself (SPEC §14, Listeners).
const defaultProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// parseListeners parses a comma-separated list of NAME://host:port (host
// may be empty or a bracketed IPv6 address); names are unique.
func parseListeners(v string) ([]Listener, error) {
	var out []Listener
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rest, ok := strings.Cut(part, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME://host:port", part)
		}
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", part, port)
		}
		l := Listener{Name: strings.ToUpper(name), Host: host, Port: p}
		if slices.ContainsFunc(out, func(o Listener) bool { return o.Name == l.Name }) {
			return nil, fmt.Errorf("listener name %s used twice", l.Name)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener")
	}
	return out, nil
}

// parseProtocolMap parses listener.security.protocol.map: NAME:PROTOCOL
// pairs separated by commas.
func parseProtocolMap(v string) (map[string]server.SecurityProtocol, error) {
	m := map[string]server.SecurityProtocol{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, proto, ok := strings.Cut(part, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("%q: want NAME:PROTOCOL", part)
		}
		p, err := server.ParseSecurityProtocol(proto)
		if err != nil {
			return nil, err
		}
		name = strings.ToUpper(strings.TrimSpace(name))
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("listener name %s mapped twice", name)
		}
		m[name] = p
	}
	return m, nil
}

// sslKeys are the ssl.* keys a listener-name prefix may override
// (listener.name.<name>.<key>, SPEC §14, Listeners).
var sslKeys = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key",
	"ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
	"ssl.client.auth", "ssl.enabled.protocols", "ssl.principal.mapping.rules",
}

// listenerOnlyKeys exist only with a listener-name prefix: the PLAIN
// users of a listener (SPEC §14, SASL).
// A listener's <mechanism>.sasl.jaas.config also holds the username and
// password a sidecar logs in to the others with on the inter-sidecar
// listener (SPEC §14, Inter-sidecar traffic).
var listenerOnlyKeys = []string{"plain.sasl.jaas.config", "scram-sha-256.sasl.jaas.config", "scram-sha-512.sasl.jaas.config"}

// prefixableKeys are the keys listener.name.<name>. may prefix.
var prefixableKeys = append(append([]string{"sasl.enabled.mechanisms"}, sslKeys...), listenerOnlyKeys...)

// listenerPrefixed splits listener.name.<name>.<key> into the listener's
// name (upper case) and the key, for the keys a listener may override.
func listenerPrefixed(k string) (name, key string, ok bool) {
	rest, ok := strings.CutPrefix(k, "listener.name.")
	if !ok {
		return "", "", false
	}
	for _, sk := range prefixableKeys {
		if n, found := strings.CutSuffix(rest, "."+sk); found && n != "" && !strings.Contains(n, ".") {
			return strings.ToUpper(n), sk, true
		}
	}
	return "", "", false
}

// sslValue is key's value for listener name: its listener.name.<name>.
// override, else the broker-wide key — except ssl.client.auth on a
// SASL_SSL listener, which only the override sets (Kafka's rule, KIP-684).
func (c *Config) sslValue(name string, proto server.SecurityProtocol, key string) string {
	if v, ok := c.ListenerOverrides[name][key]; ok {
		return v
	}
	if key == "ssl.client.auth" && proto == server.SASLSSL {
		return "none"
	}
	return c.SSL[key]
}

// sslKeyName is the key a listener's value of key came from, for errors.
func (c *Config) sslKeyName(name, key string) string {
	if _, ok := c.ListenerOverrides[name][key]; ok {
		return "listener.name." + strings.ToLower(name) + "." + key
	}
	return key
}

// checkListeners enforces the rules between the listener keys: every
// listener's name has a protocol, advertised.listeners names only
// listeners, a wildcard host is advertised, overrides name a listener,
// and a TLS listener's ssl.* keys load.
func (c *Config) checkListeners() error {
	for _, l := range c.Listeners {
		if _, ok := c.ProtocolMap[l.Name]; !ok {
			return &ConfigError{Key: "listener.security.protocol.map", Value: protocolMapString(c.ProtocolMap),
				Err: fmt.Errorf("no security protocol for listener %s", l.Name)}
		}
	}
	for _, a := range c.Advertised {
		if !slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Name == a.Name }) {
			return &ConfigError{Key: "advertised.listeners", Value: a.String(),
				Err: fmt.Errorf("listener %s is not in listeners", a.Name)}
		}
	}
	for _, l := range c.Listeners {
		if _, ok := c.advertisedFor(l.Name); ok {
			continue
		}
		switch l.Host {
		case "", "0.0.0.0", "::":
			return &ConfigError{Key: "advertised.listeners", Value: "",
				Err: fmt.Errorf("listener %s binds the wildcard address %q: advertise an address for it", l.Name, l.Host)}
		}
	}
	for name, keys := range c.ListenerOverrides {
		if !slices.ContainsFunc(c.Listeners, func(l Listener) bool { return l.Name == name }) {
			for k, v := range keys {
				return &ConfigError{Key: "listener.name." + strings.ToLower(name) + "." + k, Value: shownValue(k, v),
					Err: fmt.Errorf("listener %s is not in listeners", name)}
			}
		}
	}
	if c.Cluster {
		return c.checkInterListener()
	}
	return nil
}

func (c *Config) advertisedFor(name string) (Listener, bool) {
	for _, a := range c.Advertised {
		if a.Name == name {
			return a, true
		}
	}
	return Listener{}, false
}

func listenersString(ls []Listener) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	return strings.Join(s, ",")
}

func protocolMapString(m map[string]server.SecurityProtocol) string {
	var s []string
	for k, v := range m {
		s = append(s, k+":"+string(v))
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// serverListeners builds the server's listeners, loading each TLS
// listener's keystore and truststore; SCRAM logins look their
// credentials up with scram (the coordinators'). An error names the key.
func serverListeners(c Config, log *slog.Logger, scram sasl.ScramLookup) ([]server.Listener, error) {
	var out []server.Listener
	for _, l := range c.Listeners {
		proto := c.ProtocolMap[l.Name]
		sl := server.Listener{Name: l.Name, Protocol: proto, Addr: net.JoinHostPort(l.Host, strconv.Itoa(l.Port))}
		if a, ok := c.advertisedFor(l.Name); ok {
			sl.AdvertisedHost, sl.AdvertisedPort = a.Host, int32(a.Port)
		}
		if proto.TLS() {
			tc, principal, err := listenerTLS(c, l.Name, proto, log)
			if err != nil {
				return nil, err
			}
			sl.TLS, sl.Principal = tc, principal
		}
		if proto == server.SASLPlaintext || proto == server.SASLSSL {
			mechs, err := listenerSASL(c, l.Name, proto, scram)
			if err != nil {
				return nil, err
			}
			sl.SASL = mechs
		}
		out = append(out, sl)
	}
	return out, nil
}

// listenerTLS builds listener name's TLS from its ssl.* keys.
func listenerTLS(c Config, name string, proto server.SecurityProtocol, log *slog.Logger) (*tls.Config, func(*x509.Certificate) (string, error), error) {
	src, principal, err := listenerTLSSource(c, name, proto, log)
	if err != nil {
		return nil, nil, err
	}
	return src.TLSConfig(), principal, nil
}

// listenerTLSSource loads listener name's certificates from its ssl.*
// keys; principal maps a client certificate to its principal.
func listenerTLSSource(c Config, name string, proto server.SecurityProtocol, log *slog.Logger) (_ *tlsconfig.Source, principal func(*x509.Certificate) (string, error), _ error) {
	get := func(k string) string { return strings.TrimSpace(c.sslValue(name, proto, k)) }
	bad := func(k string, err error) error {
		return &ConfigError{Key: c.sslKeyName(name, k), Value: shownValue(k, get(k)), Err: err}
	}
	for _, k := range []string{"ssl.keystore.type", "ssl.truststore.type"} {
		if v := get(k); v != "" && !strings.EqualFold(v, "PEM") {
			return nil, nil, bad(k, fmt.Errorf("only PEM is supported (JKS and PKCS12 are not)"))
		}
	}
	if get("ssl.key.password") != "" {
		return nil, nil, bad("ssl.key.password", fmt.Errorf("encrypted private keys are not supported: store the key unencrypted and protect the file"))
	}
	var minVersion uint16
	for _, p := range strings.Split(get("ssl.enabled.protocols"), ",") {
		var v uint16
		switch strings.TrimSpace(p) {
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		case "":
			continue
		default:
			return nil, nil, bad("ssl.enabled.protocols", fmt.Errorf("%q: only TLSv1.2 and TLSv1.3 are supported", strings.TrimSpace(p)))
		}
		if minVersion == 0 || v < minVersion {
			minVersion = v
		}
	}
	if minVersion == 0 {
		return nil, nil, bad("ssl.enabled.protocols", fmt.Errorf("no protocol enabled"))
	}
	auth := tlsconfig.ClientAuth(strings.ToLower(get("ssl.client.auth")))
	switch auth {
	case tlsconfig.ClientAuthNone, tlsconfig.ClientAuthRequested, tlsconfig.ClientAuthRequired:
	default:
		return nil, nil, bad("ssl.client.auth", fmt.Errorf("must be none, requested or required"))
	}
	mapper, err := tlsconfig.ParsePrincipalMappingRules(get("ssl.principal.mapping.rules"))
	if err != nil {
		return nil, nil, bad("ssl.principal.mapping.rules", err)
	}
	src, err := tlsconfig.New(tlsconfig.Config{
		KeystoreLocation:         get("ssl.keystore.location"),
		KeystoreCertificateChain: get("ssl.keystore.certificate.chain"),
		KeystoreKey:              get("ssl.keystore.key"),
		TruststoreLocation:       get("ssl.truststore.location"),
		TruststoreCertificates:   get("ssl.truststore.certificates"),
		ClientAuth:               auth,
		MinVersion:               minVersion,
		Logger:                   log.With(slog.String("listener", name)),
	})
	if err != nil {
		key, _, _ := strings.Cut(err.Error(), ":")
		if !slices.Contains(sslKeys, key) {
			key = "ssl.keystore.location"
		}
		return nil, nil, bad(key, err)
	}
	return src, mapper.Principal, nil
}

// listenerSASL builds listener name's SASL mechanisms from
// sasl.enabled.mechanisms: PLAIN over its users
// (listener.name.<name>.plain.sasl.jaas.config), SCRAM-SHA-256 and
// SCRAM-SHA-512 over the credentials scram looks up (record 116).
func listenerSASL(c Config, name string, proto server.SecurityProtocol, scram sasl.ScramLookup) ([]server.SASLMechanism, error) {
	mechKey := "sasl.enabled.mechanisms"
	enabled := c.SASLMechanisms
	if v, ok := c.ListenerOverrides[name][mechKey]; ok {
		mechKey, enabled = c.sslKeyName(name, mechKey), v
	}
	var out []server.SASLMechanism
	for _, m := range strings.Split(enabled, ",") {
		switch m = strings.TrimSpace(m); m {
		case "":
		case "PLAIN":
			jaasKey := "listener.name." + strings.ToLower(name) + ".plain.sasl.jaas.config"
			jaas, ok := c.ListenerOverrides[name]["plain.sasl.jaas.config"]
			if !ok {
				return nil, &ConfigError{Key: jaasKey, Value: "", Err: fmt.Errorf("listener %s offers PLAIN: its users are needed", name)}
			}
			users, err := sasl.ParseJAASUsers(jaas)
			if err != nil {
				return nil, &ConfigError{Key: jaasKey, Value: "[hidden]", Err: err}
			}
			p, err := sasl.NewPlain(users)
			if err != nil {
				return nil, &ConfigError{Key: jaasKey, Value: "[hidden]", Err: err}
			}
			out = append(out, p)
		case "SCRAM-SHA-256", "SCRAM-SHA-512":
			mech, _ := diskless.ScramMechanismNamed(m)
			sc, err := sasl.NewScram(mech, scram)
			if err != nil {
				return nil, &ConfigError{Key: mechKey, Value: enabled, Err: err}
			}
			out = append(out, sc)
		default:
			return nil, &ConfigError{Key: mechKey, Value: enabled, Err: fmt.Errorf("mechanism %q is not supported (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are)", m)}
		}
	}
	if len(out) == 0 {
		return nil, &ConfigError{Key: mechKey, Value: enabled, Err: fmt.Errorf("listener %s is %s: it needs a mechanism", name, proto)}
	}
	return out, nil
}

// shownValue is v as an error may show it: secrets (a private key, its
// password) never appear in a message or a log.
func shownValue(key, v string) string {
	if v != "" && (key == "ssl.keystore.key" || key == "ssl.key.password" || strings.HasSuffix(key, "sasl.jaas.config")) {
		return "[hidden]"
	}
	return v
}
