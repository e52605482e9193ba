//go:build linux

package zkserver

import "syscall"

// sysProcAttr puts the server in its own process group, so Close can kill
// the JVM and anything it spawned, and asks the kernel to kill it when the
// test process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
