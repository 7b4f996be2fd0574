package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/replication"
)

// startBinary builds sluice-server, starts it on a free port and returns
// its address once it logs that it is ready.
func startBinary(t *testing.T, args ...string) (addr string, cmd *exec.Cmd) {
	t.Helper()
	ready, cmd := startBinaryReady(t, append([]string{"--port", "auto"}, args...)...)
	return ready["addr"], cmd
}

// startBinaryReady starts sluice-server with args and returns the fields of
// its ready line (addr, tls_addr) once it logs it.
func startBinaryReady(t *testing.T, args ...string) (map[string]string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(sluicetest.Binary(t), withTestRaftTimings(args)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	ready := make(chan map[string]string, 1)
	go func() {
		field := regexp.MustCompile(`(\w+)=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			t.Log(line)
			if strings.Contains(line, `msg="Ready to accept connections"`) {
				f := map[string]string{}
				for _, m := range field.FindAllStringSubmatch(line, -1) {
					f[m[1]] = m[2]
				}
				ready <- f
			}
		}
	}()
	select {
	case f := <-ready:
		return f, cmd
	case <-time.After(30 * time.Second):
		t.Fatal("sluice-server did not log its ready line")
	}
	return nil, cmd
}

// testRaftTimings are the Raft timings of the cluster members tests start,
// unless a test sets its own: longer than the defaults, so that a loaded
// machine (two cores running race-instrumented test binaries) does not
// depose a leader in the middle of a test that is not about failover. The
// failover tests run on the defaults (defaultRaftTimings).
var testRaftTimings = []string{"--cluster-heartbeat-timeout", "1s", "--cluster-election-timeout", "1s", "--cluster-lease-timeout", "500ms"}

func withTestRaftTimings(args []string) []string {
	if !slices.Contains(args, "--cluster-enabled") || slices.Contains(args, "--cluster-heartbeat-timeout") {
		return args
	}
	return append(slices.Clone(args), testRaftTimings...)
}

// defaultRaftTimings are the server's default Raft timings, spelled out,
// for the tests that exercise failover as users get it.
func defaultRaftTimings() []string {
	return []string{"--cluster-heartbeat-timeout", replication.DefaultHeartbeatTimeout.String(),
		"--cluster-election-timeout", replication.DefaultElectionTimeout.String(),
		"--cluster-lease-timeout", replication.DefaultLeaderLease.String()}
}

// TestBinaryWithRedisCLI drives the real binary with redis-cli and stops it
// with SIGTERM.
func TestBinaryWithRedisCLI(t *testing.T) {
	cli := sluicetest.Require(t, "redis-cli")
	addr, cmd := startBinary(t, "--enable-debug-command", "local", "--requirepass", "pw", "--dir", t.TempDir())
	host, port, _ := strings.Cut(addr, ":")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		full := append([]string{"-h", host, "-p", port, "-a", "pw", "--no-auth-warning"}, args...)
		out, err := exec.CommandContext(ctx, cli, full...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// Freeze the clock a little ahead: the server has already used now.
	ms, err := strconv.ParseInt(run("DEBUG", "CLOCK", "GET"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	base := strconv.FormatInt(ms+1000, 10)
	transcript := []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"DEBUG", "CLOCK", "SET", base}, "OK"},
		{[]string{"CL.THROTTLE", "user:42", "4", "1", "1"}, "0\n5\n4\n-1\n1"},
		{[]string{"CL.THROTTLE", "user:42", "4", "1", "1", "5"}, "1\n5\n4\n1\n1"},
		{[]string{"SW.CHECK", "ip:1", "100", "60", "0"}, "0\n100\n100\n-1\n0"},
		{[]string{"TYPE", "user:42"}, "gcra"},
		{[]string{"GET", "user:42"}, "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{[]string{"CL.THROTTLE", "user:42", "-1", "1", "1"}, "ERR invalid max_burst '-1': must not be negative"},
		{[]string{"DBSIZE"}, "1"},
	}
	for _, step := range transcript {
		if got := run(step.args...); got != step.want {
			t.Fatalf("redis-cli %v:\n got %q\nwant %q", step.args, got, step.want)
		}
	}
	// Commands on standard input: redis-cli then reads COMMAND DOCS for
	// its hints first (a oneof without its choices crashed it).
	piped := exec.Command(cli, "-h", host, "-p", port, "-a", "pw", "--no-auth-warning")
	piped.Stdin = strings.NewReader("PING\nDBSIZE\n")
	if out, err := piped.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "PONG\n1" {
		t.Fatalf("redis-cli reading commands from stdin: %v %q", err, out)
	}
	// Without the password every command is refused.
	out, _ := exec.Command(cli, "-h", host, "-p", port, "PING").CombinedOutput()
	if !strings.Contains(string(out), "NOAUTH") {
		t.Fatalf("PING without AUTH: %q", out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) || err != nil {
			t.Fatalf("sluice-server after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sluice-server did not exit after SIGTERM")
	}
}

func TestConfigFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sluice.conf")
	os.WriteFile(conf, []byte("# a comment\nport 7777\nmaxmemory 10mb\nshards 3\nenable-debug-command yes\n"), 0o644)
	var o options
	fs := newFlagSet(&o, os.Stderr)
	if err := loadConfigFile(conf, fs); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--port", "0", "--loglevel", "warning"}); err != nil {
		t.Fatal(err)
	}
	if o.port != (portFlag{}) || o.maxMemory != "10mb" || o.shards != 3 || o.debug != "yes" || o.logLevel != "warning" {
		t.Fatalf("config file then flags: %+v", o)
	}
	os.WriteFile(conf, []byte("nosuch 1\n"), 0o644)
	if err := loadConfigFile(conf, newFlagSet(&o, &strings.Builder{})); err == nil {
		t.Fatal("an unknown directive was accepted")
	}
}
