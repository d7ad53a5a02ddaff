package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/diskless-sidecar/sidecar/internal/certtest"
)

// TestSecurityFlags: -tls-ca and -sasl-plain become client options for a
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
	for _, bad := range [][]string{
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
