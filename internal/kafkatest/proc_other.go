//go:build !linux

package kafkatest

import "os/exec"

// killWithParent does nothing: only Linux kills a child with its parent
// (PR_SET_PDEATHSIG); elsewhere the test's cleanups stop the node.
func killWithParent(*exec.Cmd) {}
