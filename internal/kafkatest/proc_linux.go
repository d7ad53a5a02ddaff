package kafkatest

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel SIGKILL cmd's process when the test
// binary dies (PR_SET_PDEATHSIG).
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
