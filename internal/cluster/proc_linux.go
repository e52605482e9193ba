//go:build linux

package cluster

import "syscall"

// sysProcAttr puts a broker in its own process group, so a kill reaches
// anything it spawned, and asks the kernel to kill it when its parent dies,
// so no broker outlives a crashed test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
