//go:build !linux

package bench

import "errors"

// PinSelf is supported on Linux only.
func PinSelf(cpu int) error {
	return errors.New("pinning to a CPU is supported on Linux only")
}
