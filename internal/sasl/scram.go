package sasl

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strings"

	"github.com/xdg-go/scram"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// ScramLookup returns user's credential of a mechanism, ok false when it
// has none. It is called once per login, on the connection's reader.
type ScramLookup func(user string, mech diskless.ScramMechanism) (cred diskless.ScramCredential, ok bool)

// Scram is one SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512: RFC 5802
// with RFC 7677's hash, as Kafka serves them, without channel binding and
// without Kafka's delegation-token extension) over credentials looked up
// at each login. The exchange itself is github.com/xdg-go/scram's server
// conversation.
type Scram struct {
	mech diskless.ScramMechanism
	srv  *scram.Server
}

// hashOf returns the mechanism's hash.
func hashOf(mech diskless.ScramMechanism) (func() hash.Hash, scram.HashGeneratorFcn) {
	if mech == diskless.ScramSHA512 {
		return sha512.New, scram.SHA512
	}
	return sha256.New, scram.SHA256
}

// errUnknownUser is the lookup's refusal; like every SCRAM failure but
// the authorization id's, the client is sent Kafka's generic message.
var errUnknownUser = errors.New("SCRAM: unknown user")

// NewScram returns the SCRAM mechanism mech over lookup.
func NewScram(mech diskless.ScramMechanism, lookup ScramLookup) (*Scram, error) {
	if mech.KeySize() == 0 {
		return nil, fmt.Errorf("SCRAM mechanism %d", mech)
	}
	_, gen := hashOf(mech)
	srv, err := gen.NewServer(func(user string) (scram.StoredCredentials, error) {
		c, ok := lookup(user, mech)
		if !ok || !c.Valid() || c.Mechanism != mech {
			return scram.StoredCredentials{}, errUnknownUser
		}
		return scram.StoredCredentials{
			KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey,
			ServerKey:  c.ServerKey,
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return &Scram{mech: mech, srv: srv}, nil
}

// Name is the mechanism's name in SaslHandshake.
func (s *Scram) Name() string { return s.mech.Name() }

// Start begins one SCRAM exchange: client-first, server-first,
// client-final, server-final.
func (s *Scram) Start() Exchange { return &scramExchange{conv: s.srv.NewConversation()} }

type scramExchange struct {
	conv  *scram.ServerConversation
	steps int
}

// Step takes the client-first message (answered with the server-first)
// or the client-final message (answered with the server-final, done).
// A client-first with extensions (Kafka's tokenauth: no delegation
// tokens here) or with an authorization id other than the user is
// refused, as Kafka refuses them.
func (e *scramExchange) Step(msg []byte) ([]byte, bool, string, error) {
	e.steps++
	switch e.steps {
	case 1:
		// gs2 header (flag, authzid), n=, r=: more fields are extensions.
		if strings.Count(string(msg), ",") > 3 {
			return nil, false, "", errors.New("SCRAM: extensions in the client-first message are not supported")
		}
		answer, err := e.conv.Step(string(msg))
		if err != nil {
			return nil, false, "", err
		}
		if a := e.conv.AuthzID(); a != "" && a != e.conv.Username() {
			return nil, false, "", RefusedError("Authentication failed: Client requested an authorization id that is different from username")
		}
		return []byte(answer), false, "", nil
	case 2:
		answer, err := e.conv.Step(string(msg))
		if err != nil || !e.conv.Valid() {
			return nil, false, "", errors.Join(errors.New("SCRAM: invalid client credentials"), err)
		}
		return []byte(answer), true, e.conv.Username(), nil
	}
	return nil, false, "", errors.New("SCRAM: a message after the exchange ended")
}

// ScramKeys returns StoredKey and ServerKey of a salted password
// (RFC 5802 §3: ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey
// = H(ClientKey), ServerKey = HMAC(SaltedPassword, "Server Key")), as
// AlterUserScramCredentials turns the salted password a client sends into
// what the sidecar keeps.
func ScramKeys(mech diskless.ScramMechanism, saltedPassword []byte) (storedKey, serverKey []byte) {
	h, _ := hashOf(mech)
	mac := func(msg string) []byte {
		m := hmac.New(h, saltedPassword)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	hh := h()
	hh.Write(mac("Client Key"))
	return hh.Sum(nil), mac("Server Key")
}

// NewScramCredential returns the credential of password (tests, tools):
// SaltedPassword = PBKDF2-HMAC(password, salt, iterations), as a client
// computes it for AlterUserScramCredentials.
func NewScramCredential(mech diskless.ScramMechanism, password string, salt []byte, iterations int) diskless.ScramCredential {
	h, _ := hashOf(mech)
	salted, err := pbkdf2.Key(h, password, salt, iterations, mech.KeySize())
	if err != nil {
		// Only FIPS 140-only mode refuses (a salt under 16 bytes).
		panic(fmt.Sprintf("sasl: PBKDF2: %v", err))
	}
	stored, server := ScramKeys(mech, salted)
	return diskless.ScramCredential{Mechanism: mech, Iterations: int32(iterations), Salt: salt, StoredKey: stored, ServerKey: server}
}
