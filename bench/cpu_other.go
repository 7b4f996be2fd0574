//go:build !linux

package bench

import (
	"errors"
	"time"
)

// processCPU is only implemented on Linux; elsewhere server CPU is not
// reported.
func processCPU(pid int) (time.Duration, error) {
	return 0, errors.New("server CPU time is measured on Linux only")
}
