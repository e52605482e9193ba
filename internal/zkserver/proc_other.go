//go:build !linux

package zkserver

import "syscall"

// sysProcAttr puts the server in its own process group, so Close can kill
// the JVM and anything it spawned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
