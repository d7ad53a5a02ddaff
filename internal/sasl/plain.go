// Package sasl holds the server side of the SASL mechanisms the Kafka
// listeners offer (SPEC §14, SASL): PLAIN (RFC 4616) over a fixed table
// of users, SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; SPEC
// §14, SCRAM) over credentials looked up at each login. Each exchange is
// a value of its own, driven one client message at a time by the
// listener's connection.
package sasl

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// RefusedError is a refusal whose text the client is sent as it is
// (SaslAuthenticate's error message); any other error of an exchange is
// sent as Kafka's generic "invalid credentials" message.
type RefusedError string

func (e RefusedError) Error() string { return string(e) }

// ErrAuthentication is every refused PLAIN login: Kafka's message, which
// says nothing of whether the user exists.
const ErrAuthentication = RefusedError("Authentication failed: Invalid username or password")

// maxPlainMessage bounds a PLAIN message: authorization id, user and
// password of at most 255 bytes each (RFC 4616 allows up to 255 octets per
// field) and two separators.
const maxPlainMessage = 3*255 + 2

// Plain is the PLAIN mechanism over a fixed set of users and passwords.
type Plain struct {
	// users maps a user name to its password's SHA-256: the compare is
	// constant-time and the table holds no password in the clear.
	users map[string][sha256.Size]byte
}

// NewPlain returns PLAIN over users (name → password); names and
// passwords must be non-empty UTF-8 without NUL.
func NewPlain(users map[string]string) (*Plain, error) {
	p := &Plain{users: make(map[string][sha256.Size]byte, len(users))}
	for u, pw := range users {
		if !validField(u) || !validField(pw) {
			return nil, fmt.Errorf("user %q: names and passwords must be non-empty UTF-8 without NUL, at most 255 bytes", u)
		}
		p.users[u] = sha256.Sum256([]byte(pw))
	}
	return p, nil
}

func validField(s string) bool {
	return s != "" && len(s) <= 255 && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// Name is the mechanism's name in SaslHandshake.
func (p *Plain) Name() string { return "PLAIN" }

// Start begins one PLAIN exchange.
func (p *Plain) Start() Exchange { return &plainExchange{p: p} }

// Exchange is one authentication's server side.
type Exchange interface {
	// Step takes the client's next message and returns the server's
	// answer; done when authenticated, with the user's name. An error
	// ends the exchange: a RefusedError for refused credentials, another
	// for a malformed message.
	Step(msg []byte) (answer []byte, done bool, user string, err error)
}

type plainExchange struct {
	p    *Plain
	used bool
}

// Step checks "authzid NUL authcid NUL passwd" (RFC 4616 §2). An
// authorization id other than empty or the user itself is refused, as
// Kafka does.
func (e *plainExchange) Step(msg []byte) ([]byte, bool, string, error) {
	if e.used {
		return nil, false, "", errors.New("PLAIN: a second message")
	}
	e.used = true
	if len(msg) > maxPlainMessage {
		return nil, false, "", errors.New("PLAIN: message too long")
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, "", errors.New("PLAIN: want authzid NUL authcid NUL passwd")
	}
	authz, user, pw := string(parts[0]), string(parts[1]), parts[2]
	if user == "" || len(pw) == 0 {
		return nil, false, "", ErrAuthentication
	}
	if authz != "" && authz != user {
		return nil, false, "", RefusedError("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := e.p.users[user]
	got := sha256.Sum256(pw)
	if subtle.ConstantTimeCompare(want[:], got[:]) != 1 || !ok {
		return nil, false, "", ErrAuthentication
	}
	return []byte{}, true, user, nil
}

// ParseJAASUsers reads the users of a PlainLoginModule JAAS configuration
// (the value of listener.name.<name>.plain.sasl.jaas.config): each option
// user_<name>="<password>" is one user. Other options (username,
// password: the broker's own client login) are ignored.
func ParseJAASUsers(jaas string) (map[string]string, error) {
	module, options, err := parseJAAS(jaas)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(module, "PlainLoginModule") {
		return nil, errors.New("want org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\" …;")
	}
	users := map[string]string{}
	for k, v := range options {
		if name, isUser := strings.CutPrefix(k, "user_"); isUser {
			if name == "" {
				return nil, errors.New("option user_: no user name")
			}
			users[name] = v
		}
	}
	if len(users) == 0 {
		return nil, errors.New("no user_<name>=\"<password>\" option: no one could log in")
	}
	return users, nil
}

// ParseJAASLogin reads the client login of a JAAS configuration (the
// value of listener.name.<name>.<mechanism>.sasl.jaas.config for a
// sidecar's logins to the others, or of
// diskless.metadata.kafka.sasl.jaas.config; SPEC §14, Inter-sidecar
// traffic): the options username and password of a PlainLoginModule or a
// ScramLoginModule, as Kafka's clients read them. Errors never quote the
// text (it holds a password).
func ParseJAASLogin(jaas string) (user, pass string, err error) {
	module, options, err := parseJAAS(jaas)
	if err != nil {
		return "", "", err
	}
	if !strings.HasSuffix(module, "PlainLoginModule") && !strings.HasSuffix(module, "ScramLoginModule") {
		return "", "", errors.New("want a PlainLoginModule or ScramLoginModule with username=\"…\" password=\"…\"")
	}
	user, uok := options["username"]
	pass, pok := options["password"]
	if !uok || !pok || user == "" {
		return "", "", errors.New("no username and password options: the login needs both")
	}
	return user, pass, nil
}

// parseJAAS reads a one-module JAAS configuration: the login module, a
// control flag, options name="value", a closing semicolon.
func parseJAAS(jaas string) (module string, options map[string]string, err error) {
	s := strings.TrimSpace(jaas)
	module, rest, ok := strings.Cut(s, " ")
	if !ok || !strings.HasSuffix(module, "LoginModule") {
		return "", nil, errors.New("want org.apache.kafka.common.security.<plain.PlainLoginModule|scram.ScramLoginModule> required name=\"value\" …;")
	}
	rest = strings.TrimSpace(rest)
	flag, rest, _ := strings.Cut(rest, " ")
	switch strings.TrimSuffix(flag, ";") {
	case "required", "requisite", "sufficient", "optional":
	default:
		// Not quoted back: without a flag this is the first option,
		// a password in it.
		return "", nil, errors.New("want a control flag (required) after the login module")
	}
	options = map[string]string{}
	rest = strings.TrimSpace(rest)
	after := "the control flag"
	for rest != "" && rest != ";" {
		k, v, ok := strings.Cut(rest, "=")
		// Errors name the option before, not this text: after a
		// password that held a quote, the text is the password's end.
		if !ok {
			return "", nil, fmt.Errorf("after %s: want name=\"value\"", after)
		}
		k = strings.TrimSpace(k)
		v = strings.TrimLeft(v, " ")
		if !strings.HasPrefix(v, `"`) {
			return "", nil, fmt.Errorf("after %s: an option's value must be quoted", after)
		}
		end := strings.IndexByte(v[1:], '"')
		if end < 0 {
			return "", nil, fmt.Errorf("after %s: unterminated quote", after)
		}
		options[k] = v[1 : 1+end]
		rest = strings.TrimSpace(v[2+end:])
		after = "option " + k
	}
	if !strings.HasSuffix(s, ";") {
		return "", nil, errors.New("must end with ;")
	}
	return module, options, nil
}
