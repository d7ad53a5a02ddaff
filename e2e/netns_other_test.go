//go:build !linux

package e2e

import (
	"context"
	"net"
	"os/exec"
	"testing"
)

// netHost is Linux's (netns_linux_test.go): network namespaces.
type netHost struct{}

func newNetHost(t *testing.T) *netHost {
	t.Helper()
	requireNetHost(t)
	return nil
}

func netHostOK() bool { return false }

func requireNetHost(t *testing.T) {
	t.Helper()
	t.Skip("network namespaces are Linux's")
}

func (*netHost) Command(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
func (*netHost) Cut()                                          {}
func (*netHost) Heal()                                         {}
func (*netHost) Reach(...string)                               {}
func (*netHost) ReachDirect(string)                            {}
func (*netHost) Expose() (string, string)                      { return "", "" }
func (*netHost) HostAddr(string) string                        { return "" }
func (*netHost) ClientNet(int) (func(context.Context, string, string) (net.Conn, error), string) {
	return nil, ""
}
