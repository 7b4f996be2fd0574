//go:build !linux

package bench

import "syscall"

func serverProcAttr() *syscall.SysProcAttr { return nil }
