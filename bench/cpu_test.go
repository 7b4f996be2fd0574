//go:build linux

package bench

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseProcStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 631 0 0 0 180 33 0 0 20 0 7 0 141576 1748209664 1694\n"
	got, err := parseProcStat(line)
	if err != nil || got != 2130*time.Millisecond {
		t.Fatalf("got %v, %v; want 2.13s (213 ticks)", got, err)
	}
	for _, bad := range []string{"", "4242 no parens S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 3"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// The process CPU clock must count CPU burnt on any thread (a Go server
// works on many), and agree with /proc/<pid>/stat.
func TestProcessCPUCountsAllThreads(t *testing.T) {
	pid := os.Getpid()
	before, err := processCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Burn at least 60 ms of CPU on one locked thread, as that thread's own
	// clock counts it (bounded by 5 s of wall time on a busy machine).
	burnt := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var start, now unix.Rusage
		unix.Getrusage(unix.RUSAGE_THREAD, &start)
		x := 0
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			for i := range 10000 {
				x += i
			}
			unix.Getrusage(unix.RUSAGE_THREAD, &now)
			if d := rusageCPU(now) - rusageCPU(start); d >= 60*time.Millisecond {
				runtime.KeepAlive(x)
				burnt <- d
				return
			}
		}
		runtime.KeepAlive(x)
		burnt <- rusageCPU(now) - rusageCPU(start)
	}()
	thread := <-burnt
	after, err := processCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	if thread < 60*time.Millisecond {
		t.Skipf("could not burn 60ms of CPU in 5s (got %v)", thread)
	}
	if d := after - before; d < thread*9/10 {
		t.Fatalf("process CPU advanced by %v while one of its threads used %v", d, thread)
	}
	stat, err := procStatCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	if diff := stat - after; diff < -100*time.Millisecond || diff > 500*time.Millisecond {
		t.Fatalf("/proc stat says %v, the CPU clock %v", stat, after)
	}
}

func rusageCPU(r unix.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func TestRunMeasuresServerCPU(t *testing.T) {
	s, _ := startRedis(t)
	target := redisTarget(s)
	target.Pid = s.Pid()
	res, err := Run(context.Background(), Config{
		Target: target, Mode: "lua-gcra", Requests: 20000, Conns: 4, Pipeline: 16, Keys: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ServerCPU <= 0 || res.CPUError != "" {
		t.Fatalf("server CPU %v (%s)", res.ServerCPU, res.CPUError)
	}
	// A Lua decision costs Redis microseconds, not nanoseconds or
	// milliseconds, and one process cannot use much more than a core.
	if res.ServerCPUPerOp < 0.3 || res.ServerCPUPerOp > 500 {
		t.Fatalf("%.2f us of server CPU per decision", res.ServerCPUPerOp)
	}
	if res.ServerCPUUtil <= 0 || res.ServerCPUUtil > 1.5 {
		t.Fatalf("server CPU utilisation %.2f", res.ServerCPUUtil)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, []Result{res}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "us") || strings.Contains(table.String(), "not measured") {
		t.Fatalf("table:\n%s", table.String())
	}

	// Without a pid nothing is measured and the table says so.
	res, err = Run(context.Background(), Config{Target: redisTarget(s), Mode: "ping", Requests: 100, Conns: 1})
	if err != nil || res.ServerCPU != 0 || res.ServerCPUPerOp != 0 {
		t.Fatalf("unmeasured run: %v %+v", err, res)
	}

	// A pid that is gone (pid_max is at most 2^22) is reported, not fatal.
	target.Pid = 1<<22 + 1
	res, err = Run(context.Background(), Config{Target: target, Mode: "ping", Requests: 100, Conns: 1})
	if err != nil || res.CPUError == "" || res.ServerCPU != 0 {
		t.Fatalf("bad pid: %v %+v", err, res)
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Fatal("a pid that overflows the clock id was accepted")
	}
}
