package sasl

import (
	"maps"
	"strings"
	"testing"
)

func TestParseJAASUsers(t *testing.T) {
	got, err := ParseJAASUsers(`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw" user_alice="a b=c" user_bob="bob-pw";`)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"alice": "a b=c", "bob": "bob-pw"}; !maps.Equal(got, want) {
		t.Fatalf("users %v, want %v", got, want)
	}
}

// TestParseJAASUsersErrorsHidePasswords: a configuration that does not
// parse is refused with an error that shows no part of a password, even
// when the mistake is inside or right after one (a password holding a
// quote, text after the last option).
func TestParseJAASUsersErrorsHidePasswords(t *testing.T) {
	for _, jaas := range []string{
		`PlainLoginModule required user_a="top"secret";`,
		`PlainLoginModule required user_a="top"se=cret";`,
		`PlainLoginModule required user_a="x" topsecret;`,
		`PlainLoginModule required user_a=topsecret;`,
		`PlainLoginModule required user_a="topsecret;`,
		`PlainLoginModule required user_a="topsecret"`,
		`PlainLoginModule user_a="topsecret";`,
	} {
		_, err := ParseJAASUsers(jaas)
		if err == nil {
			t.Errorf("%s: parsed", jaas)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %q shows the password", jaas, err)
		}
	}
}

func TestParseJAASLogin(t *testing.T) {
	for jaas, want := range map[string][2]string{
		`org.apache.kafka.common.security.scram.ScramLoginModule required username="sc" password="p w";`:                  {"sc", "p w"},
		`org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b" user_a="b";`:          {"a", "b"},
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret-pw";`:                            {},
		`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required username="a" password="secret-pw";`: {},
	} {
		u, p, err := ParseJAASLogin(jaas)
		if (want == [2]string{}) != (err != nil) || [2]string{u, p} != want {
			t.Errorf("%s: %q %q %v, want %v", jaas, u, p, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("error %v shows the password", err)
		}
	}
}
