//go:build !linux

package cluster

import "syscall"

// sysProcAttr puts a broker in its own process group, so a kill reaches
// anything it spawned.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
