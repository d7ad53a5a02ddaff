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
