package sasl

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/xdg-go/scram"

	"github.com/diskless-sidecar/sidecar/diskless"
)

// TestScramKeysMatchClient: the credential the sidecar derives from a
// salted password is the one xdg-go's client derives from the password.
func TestScramKeysMatchClient(t *testing.T) {
	for _, mech := range []diskless.ScramMechanism{diskless.ScramSHA256, diskless.ScramSHA512} {
		_, gen := hashOf(mech)
		cl, err := gen.NewClientUnprepped("alice", "pencil", "")
		if err != nil {
			t.Fatal(err)
		}
		want, err := cl.GetStoredCredentialsWithError(scram.KeyFactors{Salt: "saltsalt", Iters: 4096})
		if err != nil {
			t.Fatal(err)
		}
		got := NewScramCredential(mech, "pencil", []byte("saltsalt"), 4096)
		if !reflect.DeepEqual(got.StoredKey, want.StoredKey) || !reflect.DeepEqual(got.ServerKey, want.ServerKey) || !got.Valid() {
			t.Fatalf("%s: credential %+v, xdg-go's %+v", mech.Name(), got, want)
		}
	}
}

// login runs one exchange of the client's conversation against m's.
func login(t *testing.T, m *Scram, cl *scram.Client) (user string, err error) {
	t.Helper()
	conv := cl.NewConversation()
	ex := m.Start()
	msg, err := conv.Step("")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		answer, done, u, err := ex.Step([]byte(msg))
		if err != nil {
			return "", err
		}
		if msg, err = conv.Step(string(answer)); err != nil {
			t.Fatalf("client refuses the server's answer: %v", err)
		}
		if done {
			if !conv.Valid() {
				t.Fatal("client did not verify the server signature")
			}
			return u, nil
		}
	}
	t.Fatal("exchange did not end")
	return "", nil
}

func TestScramExchange(t *testing.T) {
	creds := map[string]diskless.ScramCredential{
		"alice": NewScramCredential(diskless.ScramSHA512, "pencil", []byte("0123456789abcdef"), 4096),
		"a,b=c": NewScramCredential(diskless.ScramSHA512, "x", []byte("s"), 4096),
		"bob":   NewScramCredential(diskless.ScramSHA256, "pencil", []byte("0123456789abcdef"), 4096),
	}
	lookup := func(user string, mech diskless.ScramMechanism) (diskless.ScramCredential, bool) {
		c, ok := creds[user]
		return c, ok && c.Mechanism == mech
	}
	m, err := NewScram(diskless.ScramSHA512, lookup)
	if err != nil {
		t.Fatal(err)
	}
	client := func(user, pw, authz string) *scram.Client {
		c, err := scram.SHA512.NewClient(user, pw, authz)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name, user, pw, authz string
		refused               string // "" accepted; "generic" not a RefusedError
	}{
		{"good", "alice", "pencil", "", ""},
		{"authzid the user", "alice", "pencil", "alice", ""},
		{"escaped name", "a,b=c", "x", "", ""},
		{"wrong password", "alice", "pen", "", "generic"},
		{"unknown user", "carol", "pencil", "", "generic"},
		{"other mechanism's user", "bob", "pencil", "", "generic"},
		{"authzid another user", "alice", "pencil", "bob", "Authentication failed: Client requested an authorization id that is different from username"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			user, err := login(t, m, client(tc.user, tc.pw, tc.authz))
			var refused RefusedError
			switch {
			case tc.refused == "" && (err != nil || user != tc.user):
				t.Fatalf("login: %q %v", user, err)
			case tc.refused == "generic" && (err == nil || errors.As(err, &refused)):
				t.Fatalf("want a generic refusal, got %v", err)
			case tc.refused != "" && tc.refused != "generic" && (!errors.As(err, &refused) || string(refused) != tc.refused):
				t.Fatalf("want %q, got %v", tc.refused, err)
			}
		})
	}
	for _, bad := range []string{"", "n,,n=alice,r=abc,tokenauth=true", "garbage", "p=tls-unique,,n=alice,r=x", strings.Repeat(",", 1000)} {
		if _, _, _, err := m.Start().Step([]byte(bad)); err == nil {
			t.Errorf("client-first %q accepted", bad)
		}
	}
	ex := m.Start()
	if _, _, _, err := ex.Step([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ex.Step([]byte("c=biws,r=abcXYZ,p=AAAA")); err == nil {
		t.Error("a client-final with another nonce accepted")
	}
	if _, _, _, err := ex.Step([]byte("x")); err == nil {
		t.Error("a third message accepted")
	}
}
