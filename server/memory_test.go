package server_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// MEMORY's errors and missing keys as a real redis-server answers them;
// the sizes are Sluice's own (its records), so they are checked for what
// they must mean: a key's usage grows by what its value grows, and STATS
// counts the keys there are.
func TestMemoryMatchesRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t, "--databases", "1"))
	w.same("SET", "k", "v")
	for _, args := range [][]string{
		{"MEMORY", "USAGE", "nokey"}, {"MEMORY", "USAGE", "nokey", "SAMPLES", "0"}, {"MEMORY", "USAGE", "k", "SAMPLES", "x"},
		{"MEMORY", "USAGE", "k", "SAMPLES", "-1"}, {"MEMORY", "USAGE", "k", "foo"}, {"MEMORY", "USAGE", "k", "SAMPLES"},
		{"MEMORY", "USAGE"}, {"MEMORY", "NOSUCH"}, {"MEMORY", "STATS", "x"}, {"MEMORY", "HELP"}, {"MEMORY", "PURGE"},
		{"ACL", "SETUSER", "narrow", "on", "nopass", "~a*", "+@all"},
	} {
		w.same(args...)
	}
	narrow := sluicetest.DialRaw(t, "tcp", ts.Addr)
	narrow.Do(t, "AUTH", "narrow", "x")
	if got := narrow.Do(t, "MEMORY", "USAGE", "k"); !strings.HasPrefix(got, "-NOPERM") {
		t.Fatalf("MEMORY USAGE of a key the user may not read: %q", got)
	}

	usage := func(key string) int {
		r := w.sluice.Do(t, "MEMORY", "USAGE", key)
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(r, ":")))
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %q", key, r)
		}
		return n
	}
	w.sluice.Do(t, "SET", "small", "0123456789")
	w.sluice.Do(t, "SET", "big", strings.Repeat("x", 1010))
	if small, big := usage("small"), usage("big"); small < 10+len("small") || big-small < 990 {
		t.Fatalf("MEMORY USAGE: %d for a 10-byte value, %d for 1010 bytes", small, big)
	}
	stats := w.sluice.Do(t, "MEMORY", "STATS")
	if !strings.Contains(stats, "$10\r\nkeys.count\r\n:3\r\n") {
		t.Fatalf("MEMORY STATS with 3 keys: %q", stats)
	}
}
