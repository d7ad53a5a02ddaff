package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/diskless-sidecar/sidecar/internal/sasl"
	"github.com/diskless-sidecar/sidecar/server"
)

// The sidecar's own clients (SPEC §14, Inter-sidecar traffic): its calls
// to the other sidecars on the inter-sidecar listener, authenticated as a
// Kafka broker authenticates on its inter-broker listener, and its Kafka
// clients of the cluster holding the metadata topic, configured with
// Kafka's client keys under the prefix diskless.metadata.kafka.

// securityOptions are the keys of both.
var securityOptions = []option{
	{key: "inter.broker.listener.name", def: "",
		doc: "The listener the sidecars of a cluster call each other on (coordinator RPCs, forwarded admin requests), which membership announces; empty: the listener named as security.inter.broker.protocol. Its protocol decides how they authenticate: TLS client certificates (the listener's keystore, verified against its truststore) and/or SASL with sasl.mechanism.inter.broker.protocol.",
		set: func(c *Config, v string) error {
			c.InterBrokerListener = strings.ToUpper(strings.TrimSpace(v))
			return nil
		}},
	{key: "security.inter.broker.protocol", def: "",
		doc: "The security protocol of the inter-sidecar listener when inter.broker.listener.name is empty: the listener of that name (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL); empty: PLAINTEXT. Not together with inter.broker.listener.name.",
		set: func(c *Config, v string) error {
			v = strings.ToUpper(strings.TrimSpace(v))
			if v != "" {
				if _, err := server.ParseSecurityProtocol(v); err != nil {
					return err
				}
			}
			c.InterBrokerProtocol = v
			return nil
		}},
	{key: "sasl.mechanism.inter.broker.protocol", def: "PLAIN",
		doc: "The SASL mechanism a sidecar logs in to the others with on a SASL inter-sidecar listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (one of the listener's sasl.enabled.mechanisms); the login is username and password of listener.name.<listener>.<mechanism, lower case>.sasl.jaas.config.",
		set: func(c *Config, v string) error { c.InterBrokerSASLMechanism = strings.TrimSpace(v); return nil }},
	{key: "diskless.metadata.kafka.security.protocol", def: "PLAINTEXT",
		doc: "How the sidecar's Kafka clients (metadata log, cluster membership) connect to diskless.metadata.kafka.bootstrap.servers: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (Kafka's security.protocol).",
		set: func(c *Config, v string) (err error) {
			c.KafkaClient.Protocol, err = server.ParseSecurityProtocol(strings.ToUpper(strings.TrimSpace(v)))
			return err
		}},
	{key: "diskless.metadata.kafka.sasl.mechanism", def: "PLAIN",
		doc: "The SASL mechanism of those clients with SASL_PLAINTEXT or SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's sasl.mechanism).",
		set: func(c *Config, v string) error { c.KafkaClient.Mechanism = strings.TrimSpace(v); return nil }},
	{key: "diskless.metadata.kafka.sasl.jaas.config", def: "",
		doc: "Their login, as Kafka's sasl.jaas.config: org.apache.kafka.common.security.plain.PlainLoginModule (or scram.ScramLoginModule) required username=\"…\" password=\"…\"; never logged.",
		set: func(c *Config, v string) error { c.KafkaClient.JAAS = v; return nil }},
	{key: "diskless.metadata.kafka.ssl.truststore.location", def: "",
		doc: "A PEM file of the CA certificates the brokers' certificates are verified against with SSL or SASL_SSL; empty: the system's.",
		set: func(c *Config, v string) error { c.KafkaClient.Truststore = strings.TrimSpace(v); return nil }},
	{key: "diskless.metadata.kafka.ssl.keystore.location", def: "",
		doc: "A PEM file holding the client certificate chain and its private key (unencrypted) those clients present to the brokers; empty: none.",
		set: func(c *Config, v string) error { c.KafkaClient.Keystore = strings.TrimSpace(v); return nil }},
	{key: "diskless.metadata.kafka.ssl.endpoint.identification.algorithm", def: "https",
		doc: "https: the brokers' certificates must name the host dialed; empty: they are not checked against it (Kafka's ssl.endpoint.identification.algorithm).",
		set: func(c *Config, v string) error {
			switch v = strings.TrimSpace(v); v {
			case "", "https":
				c.KafkaClient.NoHostCheck = v == ""
				return nil
			}
			return fmt.Errorf("must be https or empty")
		}},
}

// KafkaClientSecurity is how the sidecar's Kafka clients connect to the
// metadata topic's cluster (the diskless.metadata.kafka.* security keys).
type KafkaClientSecurity struct {
	Protocol             server.SecurityProtocol
	Mechanism, JAAS      string
	Truststore, Keystore string
	NoHostCheck          bool
}

// interListener returns the inter-sidecar listener: inter.broker.listener.name,
// else the listener named as security.inter.broker.protocol (PLAINTEXT by
// default), as Kafka picks it — but with neither set, the one listener
// there is. An error names the key.
func (c *Config) interListener() (Listener, error) {
	name, key := c.InterBrokerListener, "inter.broker.listener.name"
	switch {
	case name != "" && c.InterBrokerProtocol != "":
		return Listener{}, &ConfigError{Key: "security.inter.broker.protocol", Value: c.InterBrokerProtocol,
			Err: fmt.Errorf("set together with inter.broker.listener.name; use one")}
	case name == "" && c.InterBrokerProtocol == "" && len(c.Listeners) == 1:
		// Neither set and one listener: that one (Kafka would look
		// for a listener named PLAINTEXT).
		return c.Listeners[0], nil
	case name == "":
		name, key = cmpOr(c.InterBrokerProtocol, string(server.Plaintext)), "security.inter.broker.protocol"
	}
	i := slices.IndexFunc(c.Listeners, func(l Listener) bool { return l.Name == name })
	if i < 0 {
		return Listener{}, &ConfigError{Key: key, Value: name,
			Err: fmt.Errorf("no listener %s in listeners (%s): the sidecars of a cluster call each other on it", name, listenersString(c.Listeners))}
	}
	return c.Listeners[i], nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkInterListener checks, for a cluster, that the inter-sidecar
// listener exists and that a sidecar can log in on it.
func (c *Config) checkInterListener() error {
	l, err := c.interListener()
	if err != nil {
		return err
	}
	proto := c.ProtocolMap[l.Name]
	if proto != server.SASLPlaintext && proto != server.SASLSSL {
		return nil
	}
	if _, _, err := c.interSASLLogin(l.Name); err != nil {
		return err
	}
	return nil
}

// interSASLLogin returns the mechanism and login of a sidecar's SASL
// logins to the others on listener name, checking that the listener
// offers the mechanism (Kafka's rule) and that its JAAS configuration
// holds a username and password.
func (c *Config) interSASLLogin(name string) (mech string, login [2]string, err error) {
	mech = c.InterBrokerSASLMechanism
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return "", login, &ConfigError{Key: "sasl.mechanism.inter.broker.protocol", Value: mech,
			Err: fmt.Errorf("must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")}
	}
	enabled := c.SASLMechanisms
	if v, ok := c.ListenerOverrides[name]["sasl.enabled.mechanisms"]; ok {
		enabled = v
	}
	if !slices.ContainsFunc(strings.Split(enabled, ","), func(m string) bool { return strings.TrimSpace(m) == mech }) {
		return "", login, &ConfigError{Key: "sasl.mechanism.inter.broker.protocol", Value: mech,
			Err: fmt.Errorf("listener %s, the inter-sidecar listener, does not offer it (sasl.enabled.mechanisms: %s)", name, enabled)}
	}
	jaasKey := strings.ToLower(mech) + ".sasl.jaas.config"
	full := "listener.name." + strings.ToLower(name) + "." + jaasKey
	jaas, ok := c.ListenerOverrides[name][jaasKey]
	if !ok {
		return "", login, &ConfigError{Key: full, Value: "", Err: fmt.Errorf("the sidecars log in to each other with %s on listener %s: their username and password are needed", mech, name)}
	}
	user, pass, err := sasl.ParseJAASLogin(jaas)
	if err != nil {
		return "", login, &ConfigError{Key: full, Value: "[hidden]", Err: err}
	}
	return mech, [2]string{user, pass}, nil
}

// saslMechanism is kgo's client mechanism of name with a login.
func saslMechanism(name, user, pass string) kgosasl.Mechanism {
	switch name {
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
	}
	return plain.Auth{User: user, Pass: pass}.AsMechanism()
}

// peerSecurity is how this sidecar calls the others: the inter-sidecar
// listener's TLS as a client (its keystore's certificate, its truststore)
// and its SASL login, each nil when the listener's protocol has none.
func peerSecurity(c Config, log *slog.Logger) (*tls.Config, kgosasl.Mechanism, error) {
	l, err := c.interListener()
	if err != nil {
		return nil, nil, err
	}
	proto := c.ProtocolMap[l.Name]
	var tc *tls.Config
	if proto.TLS() {
		src, _, err := listenerTLSSource(c, l.Name, proto, log)
		if err != nil {
			return nil, nil, err
		}
		tc = src.ClientConfig()
	}
	var mech kgosasl.Mechanism
	if proto == server.SASLPlaintext || proto == server.SASLSSL {
		name, login, err := c.interSASLLogin(l.Name)
		if err != nil {
			return nil, nil, err
		}
		mech = saslMechanism(name, login[0], login[1])
	}
	return tc, mech, nil
}

// kafkaClientOpts are the security options of every Kafka client of the
// metadata topic's cluster. An error names the key.
func kafkaClientOpts(c Config) ([]kgo.Opt, error) {
	k := c.KafkaClient
	var opts []kgo.Opt
	if k.Protocol.TLS() {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if k.Truststore != "" {
			b, err := os.ReadFile(k.Truststore)
			if err != nil {
				return nil, &ConfigError{Key: "diskless.metadata.kafka.ssl.truststore.location", Value: k.Truststore, Err: err}
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(b) {
				return nil, &ConfigError{Key: "diskless.metadata.kafka.ssl.truststore.location", Value: k.Truststore, Err: fmt.Errorf("no PEM CERTIFICATE block")}
			}
		}
		if k.Keystore != "" {
			b, err := os.ReadFile(k.Keystore)
			if err == nil {
				var cert tls.Certificate
				if cert, err = tls.X509KeyPair(b, b); err == nil {
					tc.Certificates = []tls.Certificate{cert}
				}
			}
			if err != nil {
				return nil, &ConfigError{Key: "diskless.metadata.kafka.ssl.keystore.location", Value: k.Keystore, Err: err}
			}
		}
		tc.InsecureSkipVerify = k.NoHostCheck
		if k.NoHostCheck {
			// Still verify the chain, only not the host name.
			tc.VerifyConnection = verifyChainOnly(tc.RootCAs)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if k.Protocol == server.SASLPlaintext || k.Protocol == server.SASLSSL {
		switch k.Mechanism {
		case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		default:
			return nil, &ConfigError{Key: "diskless.metadata.kafka.sasl.mechanism", Value: k.Mechanism, Err: fmt.Errorf("must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")}
		}
		user, pass, err := sasl.ParseJAASLogin(k.JAAS)
		if err != nil {
			return nil, &ConfigError{Key: "diskless.metadata.kafka.sasl.jaas.config", Value: "[hidden]", Err: err}
		}
		opts = append(opts, kgo.SASL(saslMechanism(k.Mechanism, user, pass)))
	}
	return opts, nil
}

// verifyChainOnly verifies a server's chain against roots (nil: the
// system's) without its host name.
func verifyChainOnly(roots *x509.CertPool) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("the broker sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
		return err
	}
}
