package server

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/diskless-sidecar/sidecar/internal/sasl"
)

// SASLMechanism is one SASL mechanism's server side (internal/sasl's
// PLAIN): its name as SaslHandshake carries it, and a fresh exchange per
// authentication.
type SASLMechanism interface {
	Name() string
	Start() sasl.Exchange
}

// DefaultFailedAuthDelay is Kafka's connection.failed.authentication.delay.ms
// default: a connection whose authentication failed is closed this long
// after its answer is written, which slows a client guessing passwords.
const DefaultFailedAuthDelay = 100 * time.Millisecond

// saslMaxReceive bounds a frame read before a SASL connection is
// authenticated (Kafka's sasl.server.max.receive.size default, 512 KiB):
// a client that has not logged in cannot make the sidecar hold
// socket.request.max.bytes for it. A larger frame closes the connection.
const saslMaxReceive = 524288

// saslStep is where a SASL connection's authentication stands (SPEC §14,
// SASL).
type saslStep int

const (
	// saslHandshake: only ApiVersions and SaslHandshake are read.
	saslHandshake saslStep = iota
	// saslToken: a handshake v1 chose the mechanism; only SaslAuthenticate
	// is read.
	saslToken
	// saslRawToken: a handshake v0 chose the mechanism; the next frames
	// are the mechanism's messages, unwrapped.
	saslRawToken
	// saslDone: authenticated; a SaslHandshake starts a
	// re-authentication (KIP-368).
	saslDone
)

// saslConn is a SASL connection's authentication state, touched only by
// its reader.
type saslConn struct {
	mechs []SASLMechanism
	step  saslStep
	// versioned is set once an ApiVersions was read in saslHandshake:
	// Kafka answers one before the handshake.
	versioned bool
	mech      SASLMechanism
	ex        sasl.Exchange
	// user is the authenticated user; a re-authentication must keep it.
	user string
	// reauth is set while a re-authentication runs; badMech is its
	// refusal when it asked for another mechanism than the first.
	reauth  bool
	badMech string
	// expires ends the session (connections.max.reauth.ms); zero: never.
	expires time.Time
}

// errSASLState: a request the SASL state does not allow (before or during
// authentication, or after the session expired); the connection closes
// without an answer, as Kafka closes it.
var errSASLState = errors.New("SASL")

// errUnsupportedMechanism is the logged cause of a SaslHandshake naming a
// mechanism the listener does not offer.
var errUnsupportedMechanism = errors.New("unsupported SASL mechanism")

// errReauthOtherUser is the logged cause of a re-authentication as
// another user; the client's answer names both, as Kafka's does.
var errReauthOtherUser = errors.New("re-authentication as another user")

// saslAdmit checks that a request of header h may be read now.
func (c *conn) saslAdmit(h header) error {
	sc := c.sasl
	key := h.key
	switch sc.step {
	case saslHandshake:
		if key != apiVersionsKey && key != saslHandshakeVersions.ApiKey {
			return fmt.Errorf("%w: unexpected Kafka request of type %s during SASL handshake", errSASLState, nameForKey(key))
		}
		// One ApiVersions of a version the server reads; one it does
		// not (answered UNSUPPORTED_VERSION) may be followed by another.
		if lo, hi, _ := c.s.versionRange(apiVersionsKey); key == apiVersionsKey && h.version >= lo && h.version <= hi {
			if sc.versioned {
				return fmt.Errorf("%w: unexpected ApiVersions request received during SASL authentication", errSASLState)
			}
			sc.versioned = true
		}
	case saslToken:
		if key != saslAuthenticateVersions.ApiKey {
			return fmt.Errorf("%w: unexpected Kafka request of type %s during SASL authentication", errSASLState, nameForKey(key))
		}
	case saslDone:
		if !sc.expires.IsZero() && key != saslHandshakeVersions.ApiKey && c.s.now().After(sc.expires) {
			return fmt.Errorf("%w: session expired (connections.max.reauth.ms) without re-authentication", errSASLState)
		}
	}
	return nil
}

// saslRequest answers a SaslHandshake or SaslAuthenticate of a SASL
// connection that is authenticating, or re-authenticating; ok is false
// for one the ordinary handler answers (ILLEGAL_SASL_STATE).
func (c *conn) saslRequest(req kmsg.Request) (resp kmsg.Response, closeAfter, ok bool) {
	sc := c.sasl
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		if sc.step == saslDone && r.Version < 1 {
			return nil, false, false
		}
		return c.saslHandshake(r)
	case *kmsg.SASLAuthenticateRequest:
		if sc.step != saslToken {
			return nil, false, false
		}
		return c.saslAuthenticate(r)
	}
	return nil, false, false
}

func (c *conn) saslHandshake(r *kmsg.SASLHandshakeRequest) (kmsg.Response, bool, bool) {
	sc := c.sasl
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	for _, m := range sc.mechs {
		resp.SupportedMechanisms = append(resp.SupportedMechanisms, m.Name())
	}
	i := slices.IndexFunc(sc.mechs, func(m SASLMechanism) bool { return m.Name() == r.Mechanism })
	if i < 0 {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		// The name is logged only as authFailed cuts it: a client's
		// string of up to 32,767 bytes.
		c.authFailed(r.Mechanism, errUnsupportedMechanism)
		return resp, true, true
	}
	if sc.step == saslDone {
		sc.reauth, sc.badMech = true, ""
		if sc.mech.Name() != r.Mechanism {
			sc.badMech = fmt.Sprintf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'",
				r.Mechanism, sc.mech.Name())
		}
	}
	sc.mech, sc.ex = sc.mechs[i], sc.mechs[i].Start()
	sc.step = saslToken
	if r.Version == 0 {
		sc.step = saslRawToken
	}
	return resp, false, true
}

func (c *conn) saslAuthenticate(r *kmsg.SASLAuthenticateRequest) (kmsg.Response, bool, bool) {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	answer, done, err := c.saslStep(r.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, true, true
	}
	resp.SASLAuthBytes = answer
	if done && r.Version >= 1 && !c.sasl.expires.IsZero() {
		resp.SessionLifetimeMillis = c.s.cfg.MaxReauth.Milliseconds()
	}
	return resp, false, true
}

// saslRawTokenPending answers a v0 handshake's next frame, a bare
// mechanism message; a refusal closes the connection without an answer,
// as Kafka does for v0.
func (c *conn) saslRawTokenPending(frame []byte) *pending {
	answer, _, err := c.saslStep(frame)
	p := &pending{key: -1, done: make(chan struct{}), raw: true, rawAnswer: answer}
	close(p.done)
	if err != nil {
		p.noResponse, p.closeAfter = true, true
	}
	return p
}

// saslStep feeds one client message to the exchange. A refusal is the
// error the client is sent: a sasl.RefusedError's own text, Kafka's
// generic message for anything else; it is logged rate-limited.
func (c *conn) saslStep(msg []byte) (answer []byte, done bool, err error) {
	sc := c.sasl
	what := "authentication"
	if sc.reauth {
		what = "re-authentication"
	}
	// logged is what authFailed logs when the answer names a user.
	var logged error
	if sc.badMech != "" {
		err = sasl.RefusedError(sc.badMech)
	} else {
		var user string
		answer, done, user, err = sc.ex.Step(msg)
		if err == nil && done {
			if sc.reauth && user != sc.user {
				err = sasl.RefusedError(fmt.Sprintf("Cannot change principals during re-authentication from User:%s: User:%s", sc.user, user))
				logged = errReauthOtherUser
			} else {
				sc.user = user
			}
		}
	}
	if err != nil {
		var refused sasl.RefusedError
		if !errors.As(err, &refused) {
			err = sasl.RefusedError(fmt.Sprintf("Authentication failed during %s due to invalid credentials with SASL mechanism %s", what, sc.mech.Name()))
		}
		if logged == nil {
			logged = err
		}
		c.authFailed(sc.mech.Name(), logged)
		sc.ex = nil
		return nil, false, err
	}
	if !done {
		return answer, false, nil
	}
	sc.step, sc.ex, sc.reauth = saslDone, nil, false
	if c.s.cfg.MaxReauth > 0 {
		sc.expires = c.s.now().Add(c.s.cfg.MaxReauth)
	}
	principal := "User:" + sc.user
	c.principal.set(principal)
	c.log.Load().Debug("SASL "+what+" done", "principal", principal, "mechanism", sc.mech.Name())
	return answer, true, nil
}

// authFailed writes the rate-limited line of a failed authentication
// (DESIGN §Logging): never the password, nor the user, whose existence a
// log reader could learn.
func (c *conn) authFailed(mechanism string, err error) {
	c.limited(slog.LevelInfo, "", "failed authentication: SASL", slog.String("listener", c.listener.Name),
		slog.String("mechanism", strings.ToValidUTF8(mechanism[:min(len(mechanism), 64)], "?")), slog.Any("err", err))
}
