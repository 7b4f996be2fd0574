package server_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// The Redis subset Sluice copies (strings, keys, expiry, connection
// commands, their errors), driven by one seeded random sequence into Sluice
// and a real redis-server, every reply compared byte for byte, over RESP2
// and over RESP3. Expiries are long, so that no key expires between the two
// servers' replies and TTL (whole seconds) agrees.
func TestRedisSubsetMatchesRedis(t *testing.T) { protocols(t, testRedisSubset) }

func testRedisSubset(t *testing.T, resp3 bool) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	// Sluice has one database, as Redis with databases 1.
	w := newTwin(t, ts, sluicetest.StartRedis(t, "--databases", "1"))
	w.hello(resp3)
	rng := rand.New(rand.NewPCG(20261201, 12))
	keys := []string{"a", "b", "c", "n", "m", "{t}x", "long:" + string(make([]byte, 0))}
	key := func() string { return keys[rng.IntN(len(keys))] }
	num := func() string { return strconv.Itoa(rng.IntN(2001) - 1000) }
	value := func() string {
		switch rng.IntN(5) {
		case 0:
			return num()
		case 1:
			return "9223372036854775807"
		case 2:
			return ""
		case 3:
			return "x y\r\nz"
		}
		return "v" + strconv.Itoa(rng.IntN(100))
	}
	expiry := func() []string {
		switch rng.IntN(6) {
		case 0:
			return []string{"EX", strconv.Itoa(1000 + rng.IntN(1000))}
		case 1:
			return []string{"PX", strconv.Itoa(1_000_000 + rng.IntN(1_000_000))}
		case 2:
			return []string{"KEEPTTL"}
		case 3:
			return []string{"EX", "0"}
		case 4:
			return []string{"EX", "x"}
		}
		return nil
	}
	gens := []func() []string{
		func() []string {
			args := append([]string{"SET", key(), value()}, expiry()...)
			switch rng.IntN(5) {
			case 0:
				args = append(args, "NX")
			case 1:
				args = append(args, "XX")
			case 2:
				args = append(args, "GET")
			case 3:
				args = append(args, "NX", "XX")
			}
			return args
		},
		func() []string { return []string{"GET", key()} },
		func() []string { return []string{"MGET", key(), key(), key()} },
		func() []string { return []string{"INCR", key()} },
		func() []string { return []string{"DECR", key()} },
		func() []string { return []string{"INCRBY", key(), num()} },
		func() []string {
			return []string{"DECRBY", key(), []string{num(), "x", "-9223372036854775808"}[rng.IntN(3)]}
		},
		func() []string { return []string{"DEL", key(), key()} },
		func() []string { return []string{"UNLINK", key()} },
		func() []string { return []string{"EXISTS", key(), key(), key()} },
		func() []string { return []string{"TYPE", key()} },
		func() []string { return []string{"TTL", key()} },
		func() []string {
			args := []string{[]string{"EXPIRE", "PEXPIRE"}[rng.IntN(2)], key(), strconv.Itoa(2_000_000 + rng.IntN(1000))}
			if rng.IntN(2) == 0 {
				args = append(args, []string{"NX", "XX", "GT", "LT", "NX", "BAD"}[rng.IntN(6)])
			}
			return args
		},
		func() []string { return []string{"EXPIRE", key(), "-1"} },
		func() []string { return []string{"PERSIST", key()} },
		func() []string { return []string{"DBSIZE"} },
		func() []string { return []string{"PING"} },
		func() []string { return []string{"PING", value()} },
		func() []string { return []string{"ECHO", value()} },
		func() []string { return []string{"SELECT", []string{"0", "1", "x"}[rng.IntN(3)]} },
		func() []string { return []string{"CLIENT", "GETNAME"} },
		func() []string { return []string{"CLIENT", "SETNAME", []string{"app", "a b", ""}[rng.IntN(3)]} },
		func() []string { return []string{"CONFIG", "GET", "maxmemory-policy"} },
		func() []string { return []string{"NOSUCH", key()} },
		func() []string { return []string{"GET"} },
		func() []string { return []string{"SET", key()} },
		func() []string { return []string{"HELLO", []string{"1", "4", "x"}[rng.IntN(3)]} },
		func() []string {
			if rng.IntN(20) == 0 {
				return []string{"FLUSHALL"}
			}
			return []string{"EXISTS", key()}
		},
	}
	for step := range 2000 {
		args := gens[rng.IntN(len(gens))]()
		w.sameAt(step, args...)
	}
}

// sameAt is same, naming the step of a random sequence on failure.
func (w *twin) sameAt(step int, args ...string) {
	w.t.Helper()
	got, want := w.sluice.Do(w.t, args...), w.redis.Do(w.t, args...)
	if got != want {
		w.t.Fatalf("step %d %q:\n sluice %q\n redis  %q", step, args, got, want)
	}
}
