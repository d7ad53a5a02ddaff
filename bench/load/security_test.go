package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/certtest"
)

// TestSecurityFlags: -tls-ca, -sasl-plain and -sasl-scram512 become client options for a
// running sidecar alone; bad values and other targets are refused.
func TestSecurityFlags(t *testing.T) {
	t.Cleanup(func() { securityOpts = nil })
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certtest.NewCA(t, "load-ca").PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if _, _, err := parseFlags([]string{"-tls-ca", ca, "-sasl-plain", "alice:secret"}, &stderr); err != nil {
		t.Fatal(err)
	}
	if len(securityOpts) != 2 {
		t.Fatalf("%d security options, want TLS and SASL", len(securityOpts))
	}
	if _, _, err := parseFlags([]string{"-tls-ca", ca, "-sasl-scram512", "alice:secret"}, &stderr); err != nil || len(securityOpts) != 2 {
		t.Fatalf("-sasl-scram512: %v, %d options", err, len(securityOpts))
	}
	for _, bad := range [][]string{
		{"-sasl-scram512", "alice"},
		{"-sasl-scram512", "a:b", "-sasl-plain", "a:b"},
		{"-tls-ca", filepath.Join(t.TempDir(), "none.pem")},
		{"-tls-ca", os.Args[0]},
		{"-sasl-plain", "alice"},
		{"-sasl-plain", "a:b", "-kfake"},
		{"-tls-ca", ca, "-kafka-brokers", "x:1"},
	} {
		if _, _, err := parseFlags(bad, &stderr); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
