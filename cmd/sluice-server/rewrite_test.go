package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// CONFIG SET maxmemory takes effect at once, and CONFIG REWRITE keeps it
// (and loglevel: verbose, since the ready line the test waits for is not
// logged at warning; and the command line's flags) across a restart, editing
// the file as Redis does: comments and order kept, a setting's first line
// rewritten in place and its repeats dropped, new settings appended under
// the signature, defaults not written.
func TestConfigRewriteSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sluice.conf")
	original := "# the team's limiter\nmaxmemory 100mb\n\n# noisy\nloglevel notice\nmaxmemory 200mb\n"
	if err := os.WriteFile(conf, []byte(original), 0o600); err != nil {
		t.Fatal(err)
	}
	ready, cmd := startBinaryReady(t, conf, "--port", "auto", "--dir", dir, "--appendonly", "no")
	c := sluicetest.DialRaw(t, "tcp", ready["addr"])
	if got := c.Do(t, "CONFIG", "GET", "maxmemory"); !strings.Contains(got, "209715200") {
		t.Fatalf("maxmemory from the file's last line: %q", got)
	}
	// At once: a limit below what is stored refuses new state.
	c.Do(t, "CL.THROTTLE", "a", "5", "10", "60")
	if got := c.Do(t, "CONFIG", "SET", "maxmemory", "1"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET maxmemory 1: %q", got)
	}
	if got := c.Do(t, "CL.THROTTLE", "b", "5", "10", "60"); !strings.HasPrefix(got, "-OOM") {
		t.Fatalf("a new limiter past maxmemory: %q", got)
	}
	for _, set := range [][]string{{"maxmemory", "64mb"}, {"loglevel", "verbose"}, {"timeout", "77"}} {
		if got := c.Do(t, append([]string{"CONFIG", "SET"}, set...)...); got != "+OK\r\n" {
			t.Fatalf("CONFIG SET %q: %q", set, got)
		}
	}
	if got := c.Do(t, "CL.THROTTLE", "b", "5", "10", "60"); strings.HasPrefix(got, "-") {
		t.Fatalf("a new limiter under the raised maxmemory: %q", got)
	}
	if got := c.Do(t, "CONFIG", "REWRITE"); got != "+OK\r\n" {
		t.Fatalf("CONFIG REWRITE: %q", got)
	}
	written, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	want := "# the team's limiter\nmaxmemory 67108864\n\n# noisy\nloglevel verbose\n" + rewriteSignature + "\n"
	text := string(written)
	if !strings.HasPrefix(text, want) {
		t.Fatalf("rewritten file:\n%s\nwant it to begin:\n%s", text, want)
	}
	for _, line := range []string{"timeout 77\n", "port auto\n", "dir " + dir + "\n", "appendonly no\n"} {
		if !strings.Contains(text, "\n"+line) {
			t.Errorf("rewritten file lacks %q:\n%s", line, text)
		}
	}
	// Defaults stay out of the file.
	for _, name := range []string{"maxclients", "reqid-window", "lua-time-limit", "check-log"} {
		if strings.Contains(text, "\n"+name+" ") {
			t.Errorf("rewritten file names %s, at its default or not a setting:\n%s", name, text)
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not exit after SIGTERM")
	}

	ready, _ = startBinaryReady(t, conf)
	c = sluicetest.DialRaw(t, "tcp", ready["addr"])
	for name, value := range map[string]string{"maxmemory": "67108864", "loglevel": "verbose", "timeout": "77", "appendonly": "no",
		"ready-max-apply-lag": "1000", "ready-max-last-contact": "5s"} {
		if got := c.Do(t, "CONFIG", "GET", name); !strings.Contains(got, "\r\n"+value+"\r\n") {
			t.Errorf("after the restart, CONFIG GET %s: %q, want %s", name, got, value)
		}
	}
	// A second rewrite with nothing changed leaves the file as it was.
	if got := c.Do(t, "CONFIG", "REWRITE"); got != "+OK\r\n" {
		t.Fatalf("CONFIG REWRITE again: %q", got)
	}
	if again, _ := os.ReadFile(conf); string(again) != text {
		t.Fatalf("a rewrite with nothing changed:\n%s\nbefore:\n%s", again, text)
	}
}

// The rewrite's own cases: a missing file is created, a setting named
// twice keeps one line, aliases are rewritten where named and never
// appended, lines that are not settings are kept.
func TestRewriteConfigFile(t *testing.T) {
	var o options
	fs := newFlagSet(&o, io.Discard)
	path := filepath.Join(t.TempDir(), "new.conf")
	running := map[string]string{"maxmemory": "0", "busy-reply-threshold": "7000", "timeout": "0"}
	if err := rewriteConfigFile(path, fs, running); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != rewriteSignature+"\nbusy-reply-threshold 7000\n" {
		t.Fatalf("a new file: %q", got)
	}
	os.WriteFile(path, []byte("lua-time-limit 5000\ntimeout 5\nTIMEOUT 6\n"), 0o600)
	if err := rewriteConfigFile(path, fs, running); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	if string(got) != "lua-time-limit 7000\ntimeout 0\n" {
		t.Fatalf("an alias and a repeated setting: %q", got)
	}
	// What the rewrite wrote loads back.
	var o2 options
	fs2 := newFlagSet(&o2, io.Discard)
	if err := loadConfigFile(path, fs2); err != nil {
		t.Fatal(err)
	}
	var seen []string
	fs2.Visit(func(f *flag.Flag) { seen = append(seen, f.Name+"="+f.Value.String()) })
	if strings.Join(seen, " ") != "lua-time-limit=7000 timeout=0" || o2.busyMS != 7000 {
		t.Fatalf("loaded back: %v (busy-reply-threshold %d)", seen, o2.busyMS)
	}
}

// CONFIG SET appendfsync at run time: the policy in force changes at once
// (INFO, CONFIG GET), what was written under either policy survives kill
// -9, and a bad value gets Redis's refusal, changing nothing.
func TestConfigSetAppendFsync(t *testing.T) {
	dir := t.TempDir()
	args := []string{"--dir", dir, "--appendfsync", "everysec"}
	addr, cmd := startBinary(t, args...)
	c := sluicetest.DialRaw(t, "tcp", addr)
	r := sluicetest.StartRedis(t)
	oracle := sluicetest.DialRaw(t, r.Network, r.Addr)
	for _, bad := range []string{"bogus", "sometimes", ""} {
		want := oracle.Do(t, "CONFIG", "SET", "appendfsync", bad)
		if got := c.Do(t, "CONFIG", "SET", "appendfsync", bad); got != want {
			t.Errorf("CONFIG SET appendfsync %q: %q, redis %q", bad, got, want)
		}
	}
	for i := range 50 {
		c.Do(t, "SET", "before:"+strconv.Itoa(i), "v")
	}
	if got := c.Do(t, "CONFIG", "SET", "appendfsync", "ALWAYS"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET appendfsync ALWAYS: %q", got)
	}
	if got := c.Do(t, "CONFIG", "GET", "appendfsync"); got != oracleGet(t, oracle, "ALWAYS") {
		t.Errorf("CONFIG GET appendfsync after the change: %q", got)
	}
	if got := c.Do(t, "INFO", "persistence"); !strings.Contains(got, "aof_fsync_policy:always\r\n") {
		t.Errorf("INFO persistence after the change: %q", got)
	}
	for i := range 50 {
		c.Do(t, "SET", "after:"+strconv.Itoa(i), "v")
	}
	// The same policy again changes nothing.
	if got := c.Do(t, "CONFIG", "SET", "appendfsync", "always"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET appendfsync always again: %q", got)
	}
	killHard(t, cmd)
	addr, _ = startBinary(t, args...)
	c = sluicetest.DialRaw(t, "tcp", addr)
	if got := c.Do(t, "DBSIZE"); got != ":100\r\n" {
		t.Fatalf("after kill -9: DBSIZE %q, want every key written under both policies", got)
	}
	// The restart takes the command line's policy again (CONFIG REWRITE
	// would keep the change).
	if got := c.Do(t, "INFO", "persistence"); !strings.Contains(got, "aof_fsync_policy:everysec\r\n") {
		t.Errorf("INFO persistence after the restart: %q", got)
	}
}

// oracleGet is what redis-server answers CONFIG GET appendfsync with after
// CONFIG SET appendfsync to.
func oracleGet(t *testing.T, oracle *sluicetest.RawConn, to string) string {
	t.Helper()
	oracle.Do(t, "CONFIG", "SET", "appendfsync", to)
	return oracle.Do(t, "CONFIG", "GET", "appendfsync")
}
