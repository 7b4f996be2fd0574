package bench

import "syscall"

// serverProcAttr makes the kernel send SIGTERM to a started server if this
// process dies without stopping it, so a crashed or killed bench does not
// leave servers behind.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
