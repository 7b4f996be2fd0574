package server_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// client-output-buffer-limit and client-query-buffer-limit, valid and
// invalid, set and read back on Sluice and on a real redis-server, replies
// compared byte for byte: the words, units, C integer quirks, error texts
// and what CONFIG GET reports after each.
func TestBufferLimitConfigMatchesRedis(t *testing.T) { protocols(t, testBufferLimitConfig) }

func testBufferLimitConfig(t *testing.T, resp3 bool) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t))
	w.hello(resp3)
	const obuf, qbuf = "client-output-buffer-limit", "client-query-buffer-limit"
	w.same("CONFIG", "GET", obuf)
	w.same("CONFIG", "GET", qbuf)
	for _, v := range []string{
		"normal 1mb 0 0",
		"normal  1mb 0 0", // two spaces: an empty word
		"",                // nothing: no change
		"normal mb kb ",   // no digits is 0, and so is an empty soft-seconds
		"NORMAL 1MB 2Kb +3",
		"normal 1k 1K 0",
		"normal 1g 1gb 7",
		"normal 10b 0 0",
		"normal 1\x00junk 2 3", // C stops at the NUL
		"master 1 2 3",
		"foo 1 2 3",
		"normal -1 0 0",
		"normal 1 0 -1",
		"normal 1.5mb 0 0",
		"normal 0x10 0 0",
		"normal 1 1 1x",
		"normal 0 0 0\t",
		"normal 0 0 \t3",
		"normal 0 0  3",
		"normal 99999999999999999999 0 0",   // saturates
		"normal 18446744073709551615gb 0 0", // wraps
		"normal " + strings.Repeat("1", 127) + " 0 0",
		"normal " + strings.Repeat("1", 128) + " 0 0",
		"normal 0 0 4294967297", // an int: 1
		"normal 0 0 9223372036854775808",
		"normal 0 0 -9223372036854775809",
		"normal 1 2",
		"normal 1 1 1 pubsub 1 1",
		"normal 5 5 5 bad 1 1 1", // all or nothing
		"replica 1 2 3 pubsub 4 5 6",
		"slave 256mb 64mb 60 normal 1 2 3 pubsub 32mb 8mb 60 normal 4 5 6",
		"Replica 1 1 1 SLAVE 2 2 2 PubSub 3 3 3",
		"normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60",
	} {
		w.same("CONFIG", "SET", obuf, v)
		w.same("CONFIG", "GET", obuf)
		// Limits this low leave a connection owing a short reply alone
		// (Redis counts none of what its own 16 KiB buffer holds).
		w.same("PING")
	}
	for _, v := range []string{
		"1mb", "1048575", "1048576", "mb", "1gb", "2GB", "-1", "1.5mb", "9223372036854775807",
		"9223372036854775808", "99999999999999999999", "", "1 mb", "abc", "1k", "1048576b",
		"18446744073709551615gb", "2mb\x00x", "0", "+2mb", "1gb",
	} {
		w.same("CONFIG", "SET", qbuf, v)
		w.same("CONFIG", "GET", qbuf)
	}
}
