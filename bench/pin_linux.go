package bench

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// PinSelf makes the whole process run on one CPU. Affinity set on one
// thread is not inherited by the Go runtime's threads that already exist,
// so PinSelf pins the calling thread and re-executes the binary with the
// same arguments and environment: the new process starts with that one-CPU
// mask, every thread it creates inherits it, and the runtime sizes
// GOMAXPROCS from it (to 1). In the re-executed process the mask already
// matches and PinSelf returns nil at once. On success the first call does
// not return.
func PinSelf(cpu int) error {
	var cur unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cur); err != nil {
		return fmt.Errorf("read CPU affinity: %w", err)
	}
	if cur.Count() == 1 && cur.IsSet(cpu) {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	err = syscall.Exec(exe, os.Args, os.Environ())
	// Exec failed: undo the pin on this thread before reporting.
	unix.SchedSetaffinity(0, &cur)
	return fmt.Errorf("pin to CPU %d: re-exec %s: %w", cpu, exe, err)
}
