package server_test

import (
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// RESET, and an EXEC refused before it runs, against a real redis-server:
// the cases the random differential sequence does not reach (a user that
// may not run EXEC, a connection not yet authenticated, MONITOR, the
// connection's name and user).
func TestResetAndRefusedExecMatchRedis(t *testing.T) { protocols(t, testResetAndRefusedExec) }

func testResetAndRefusedExec(t *testing.T, resp3 bool) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	r := sluicetest.StartRedis(t, "--databases", "1")
	admin := newTwin(t, ts, r)
	admin.same("ACL", "SETUSER", "noexec", "on", ">p", "+@all", "-exec", "~*")

	// EXEC the user may not run: the transaction is discarded, nothing
	// it queued runs.
	w := newTwin(t, ts, r)
	w.hello(resp3)
	w.same("AUTH", "noexec", "p")
	w.same("MULTI")
	w.same("SET", "a", "queued")
	w.same("EXEC")
	w.same("GET", "a")
	w.same("EXEC") // outside MULTI: refused the same way

	// RESET: back to RESP2, the default user, no name, no transaction.
	w.same("CLIENT", "SETNAME", "app")
	w.same("MULTI")
	w.same("RESET")
	w.same("EXEC")
	w.same("CLIENT", "GETNAME")
	w.same("ACL", "WHOAMI")
	w.same("HSET", "h", "f", "1")
	w.same("HGETALL", "h") // a RESP2 array even after HELLO 3
	for _, args := range [][]string{{"CLIENT", "REPLY", "OFF"}, {"RESET"}} {
		w.sluice.Send(t, args...)
		w.redis.Send(t, args...)
	}
	w.same("PING") // RESET's +RESET, then PONG: replies are on again
	w.same("PING")
	// The second PING's PONG, read before another connection starts to
	// monitor: a PING still on its way would be shown to the monitor.
	if got, want := w.sluice.Read(t), w.redis.Read(t); got != want {
		t.Fatalf("the last PING: sluice %q, redis %q", got, want)
	}

	// MONITOR ends: the next reply is the command's, no monitor line.
	m := newTwin(t, ts, r)
	m.same("MONITOR")
	m.same("RESET")
	admin.same("SET", "zz", "1")
	m.same("GET", "zz")

	// Not authenticated: EXEC is refused with NOAUTH, and RESET leaves a
	// connection that needs a password unauthenticated.
	admin.same("CONFIG", "SET", "requirepass", "pw")
	n := newTwin(t, ts, r)
	n.same("MULTI")
	n.same("EXEC")
	n.same("AUTH", "pw")
	n.same("MULTI")
	n.same("SET", "a", "queued")
	n.same("EXEC", "extra")
	n.same("GET", "a")
	n.same("RESET")
	n.same("PING")
	n.same("RESET") // needs no authentication
}
