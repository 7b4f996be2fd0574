package server_test

import (
	"bufio"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// monitorPrefix is a MONITOR line's timestamp and client address, which
// differ between servers and runs: masked, its shape checked.
var monitorPrefix = regexp.MustCompile(`^\+\d+\.\d{6} \[0 [^\]]+\] `)

// monitorLines reads a monitor's lines up to and including the one for
// ECHO "end", masked.
func monitorLines(t *testing.T, r *bufio.Reader) []string {
	t.Helper()
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("monitor: %v after %q", err, lines)
		}
		if !monitorPrefix.MatchString(line) {
			t.Fatalf("monitor line %q: not a timestamp and an address", line)
		}
		line = monitorPrefix.ReplaceAllString(line, "+T [0 A] ")
		lines = append(lines, line)
		if line == "+T [0 A] \"echo\" \"end\"\r\n" {
			return lines
		}
	}
}

// TestMonitorMatchesRedis sends the same commands to Sluice and
// redis-server 7.0.15 with a monitor attached to each, and compares the
// monitors' lines byte for byte, timestamp and address masked: quoting of
// spaces, quotes, backslashes, control and binary bytes; AUTH and HELLO
// AUTH redacted; administrative and refused commands left out; a
// transaction's commands shown as EXEC runs them; a monitor's keyspace
// commands refused.
func TestMonitorMatchesRedis(t *testing.T) {
	r := sluicetest.StartRedis(t)
	s := sluicetest.Start(t, sluicetest.Options{})
	cmds := [][]string{
		{"set", "a b", "x\"\r\n\x01\xff\\\t\a\b\x7f~ "},
		{"get", "a b"},
		{"set", "every byte", everyByte()},
		{"ping"},
		{"echo", ""},
		{"incr", "123"},
		{"incrby", "123", "-0007"},
		{"auth", "secret"},
		{"auth", "user", "secret"},
		{"auth", "a", "b", "c"},
		{"hello", "2", "AUTH", "user", "secret"},
		{"hello", "2", "SETNAME", "n", "AUTH", "user", "secret"},
		{"config", "get", "port"}, // admin: not shown
		{"client", "list"},        // admin: not shown
		{"client", "id"},
		{"client", "setname", "watched"},
		{"nosuchcommand", "x"}, // refused: not shown
		{"get"},                // refused: not shown
		{"multi"},
		{"set", "t", "1"},
		{"incr", "t"},
		{"exec"},
		{"echo", "end"},
	}
	run := func(network, addr string) ([]string, string) {
		mon := sluicetest.DialRaw(t, network, addr)
		if got := mon.Do(t, "MONITOR"); got != "+OK\r\n" {
			t.Fatalf("MONITOR: %q", got)
		}
		// Its keyspace commands are refused; MONITOR again says nothing.
		refused := mon.Do(t, "GET", "a b")
		mon.Conn().Write(sluicetest.EncodeCommand("MONITOR"))
		c := sluicetest.DialRaw(t, network, addr)
		for _, cmd := range cmds {
			c.Do(t, cmd...)
		}
		mon.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
		return monitorLines(t, bufio.NewReader(mon.Conn())), refused
	}
	want, wantRefused := run(r.Network, r.Addr)
	got, gotRefused := run("tcp", s.Addr)
	if gotRefused != wantRefused {
		t.Errorf("a monitor's GET: sluice %q, redis %q", gotRefused, wantRefused)
	}
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("monitor lines:\n sluice %q\n redis  %q", got, want)
	}
}

// TestMonitorSlowIsCutOff: a monitor that never reads cannot slow the
// connections it watches: they finish, and the monitor is closed when its
// queue passes client-output-buffer-limit normal's hard limit, counted
// as an output buffer disconnection.
func TestMonitorSlowIsCutOff(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	s.Do(t, "CONFIG", "SET", "client-output-buffer-limit", "normal 1mb 0 0")
	mon := sluicetest.DialRaw(t, "tcp", s.Addr)
	if got := mon.Do(t, "MONITOR"); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	value := strings.Repeat("v", 64<<10)
	// 8 MiB of lines, far past the limit plus what the sockets buffer.
	for range 128 {
		s.Do(t, "SET", "k", value)
	}
	sluicetest.WaitFor(t, 10*time.Second, "the monitor to be closed", func() bool {
		return !strings.Contains(s.Do(t, "CLIENT", "LIST").(string), "flags=O")
	})
	info := s.Do(t, "INFO", "stats").(string)
	if !strings.Contains(info, "client_output_buffer_limit_disconnections:1\r\n") {
		t.Fatalf("INFO stats: %s", info)
	}
	// What the monitor gets ends: the socket is closed.
	mon.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1<<20)
	for {
		if _, err := mon.Conn().Read(buf); err != nil {
			if strings.Contains(err.Error(), "timeout") {
				t.Fatal("the cut-off monitor's socket stayed open")
			}
			break
		}
	}
}

// everyByte is the 256 byte values in order.
func everyByte() string {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return string(b)
}

// TestMonitorCountedBeforeItsReply: as in Redis, MONITOR is in the slow
// log (and commandstats) by the time its +OK reaches the client, so a
// SLOWLOG RESET sent after the +OK clears it. (MONITOR once handed the
// socket over, its +OK written, before it was counted.)
func TestMonitorCountedBeforeItsReply(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	c := sluicetest.DialRaw(t, "tcp", s.Addr)
	if got := c.Do(t, "CONFIG", "SET", "slowlog-log-slower-than", "0"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET: %q", got)
	}
	for round := range 30 {
		mon := sluicetest.DialRaw(t, "tcp", s.Addr)
		if got := mon.Do(t, "MONITOR"); got != "+OK\r\n" {
			t.Fatalf("MONITOR: %q", got)
		}
		c.Do(t, "SLOWLOG", "RESET")
		// The log holds the RESET alone (it logs itself after it ran).
		if got := c.Do(t, "SLOWLOG", "GET", "-1"); strings.Contains(strings.ToLower(got), "monitor") {
			t.Fatalf("round %d: the slow log after a RESET sent after MONITOR's +OK still holds MONITOR (counted after its reply): %q", round, got)
		}
		mon.Conn().Close()
	}
}
