package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the CPU time (user + system) that process pid has used
// so far, over all its threads, including threads that have exited.
//
// It reads the process's CPU-time clock (clock_gettime on the clock id
// clock_getcpuclockid(3) would return; Linux lets any process read it),
// which counts scheduler nanoseconds for the whole thread group. Neither
// /proc/<pid>/schedstat (the main thread only: a Go server does its work on
// other threads) nor /proc/<pid>/stat (whole process, but in 10 ms clock
// ticks) is as good; the latter is the fallback.
func processCPU(pid int) (time.Duration, error) {
	// Linux pids stay below 2^22; a larger one would overflow the clock id
	// into some other, valid clock.
	if pid <= 0 || pid >= 1<<28 {
		return 0, fmt.Errorf("server CPU time: bad pid %d", pid)
	}
	// MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED) from the kernel's
	// include/linux/posix-timers.h.
	clock := int32((^pid)<<3 | 2)
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err == nil {
		return time.Duration(ts.Nano()), nil
	}
	return procStatCPU(pid)
}

// clockTicks is sysconf(_SC_CLK_TCK): USER_HZ, which the kernel fixes at 100
// for every architecture Go supports.
const clockTicks = 100

// procStatCPU reads utime + stime (fields 14 and 15) from /proc/<pid>/stat.
func procStatCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("server CPU time: %w", err)
	}
	return parseProcStat(string(b))
}

func parseProcStat(s string) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself; the fields after the last ')' are plain.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("server CPU time: malformed /proc stat %q", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state), so utime (14) and stime (15) are f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("server CPU time: short /proc stat %q", s)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("server CPU time: /proc stat field %q: %w", v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / clockTicks), nil
}
