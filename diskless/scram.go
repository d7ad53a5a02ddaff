package diskless

import "unicode/utf8"

// ScramMechanism is a SCRAM mechanism as Kafka's admin protocol numbers
// it (the Mechanism of AlterUserScramCredentials and
// DescribeUserScramCredentials; SPEC §14, SCRAM).
type ScramMechanism int8

// The SCRAM mechanisms the sidecar serves (RFC 7677; RFC 5802 with
// SHA-512).
const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// SCRAM credential bounds: Kafka's (4096 is both mechanisms' least
// iteration count, 16384 the most AlterUserScramCredentials takes); the
// byte bounds are the sidecar's (docs/format/metadata-records.md
// §Limits).
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
	MaxScramUserBytes  = 1024
	MaxScramSaltBytes  = 1024
)

// Name is the mechanism's SASL name ("SCRAM-SHA-256", "SCRAM-SHA-512"),
// "" for another value.
func (m ScramMechanism) Name() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

// KeySize is the bytes of the mechanism's hash (32, 64), and so of its
// StoredKey and ServerKey; 0 for another value.
func (m ScramMechanism) KeySize() int {
	switch m {
	case ScramSHA256:
		return 32
	case ScramSHA512:
		return 64
	}
	return 0
}

// ScramMechanismNamed returns the mechanism of a SASL name.
func ScramMechanismNamed(name string) (ScramMechanism, bool) {
	for _, m := range []ScramMechanism{ScramSHA256, ScramSHA512} {
		if m.Name() == name {
			return m, true
		}
	}
	return 0, false
}

// ScramCredential is what the sidecar keeps of a user's password for one
// mechanism (RFC 5802 §3): salt and iteration count of the salted
// password, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"), each Mechanism.KeySize()
// bytes. Never the password.
type ScramCredential struct {
	Mechanism  ScramMechanism
	Iterations int32
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
}

// Valid reports whether c is a credential a shard may hold: a known
// mechanism, iterations within bounds, a salt of 1 … MaxScramSaltBytes
// bytes and keys of the mechanism's size.
func (c *ScramCredential) Valid() bool {
	n := c.Mechanism.KeySize()
	return n > 0 && c.Iterations >= MinScramIterations && c.Iterations <= MaxScramIterations &&
		len(c.Salt) > 0 && len(c.Salt) <= MaxScramSaltBytes && len(c.StoredKey) == n && len(c.ServerKey) == n
}

// ValidScramUser reports whether name may name a SCRAM user: 1 …
// MaxScramUserBytes bytes of UTF-8.
func ValidScramUser(name string) bool {
	return name != "" && len(name) <= MaxScramUserBytes && utf8.ValidString(name)
}

// ScramChange is one change of AlterUserScramCredentials: set User's
// credential of Credential.Mechanism to Credential, or, with Remove,
// remove it (only Credential.Mechanism is read).
type ScramChange struct {
	User       string
	Remove     bool
	Credential ScramCredential
}
