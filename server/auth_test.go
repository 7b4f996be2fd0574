package server_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// The typical application user: decisions on its own prefix, nothing else.
// Everything else it tries is refused with Redis's NOPERM, changes nothing,
// and lands in ACL LOG and INFO.
func TestACLApplicationUser(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	// client|setinfo: go-redis names itself on connecting.
	ts.Expect(t, "OK", "ACL", "SETUSER", "app", "on", ">s3cret", "~app:*", "-@all", "+@limiter", "+client|setinfo")
	app := redis.NewClient(&redis.Options{Addr: ts.Addr, Username: "app", Password: "s3cret", Protocol: 2, MaxRetries: -1})
	defer app.Close()

	if v, err := app.Do(ctx, "CL.THROTTLE", "app:login:42", "4", "1", "60").Slice(); err != nil || v[0] != int64(0) {
		t.Fatalf("a decision on its own prefix: %v %v", v, err)
	}
	if err := app.Do(ctx, "LIMIT.ALL", "2", "CL.THROTTLE", "app:a", "4", "1", "60", "1", "SW.CHECK", "app:b", "10", "60", "1").Err(); err != nil {
		t.Fatalf("LIMIT.ALL on its own prefix: %v", err)
	}
	denied := []struct {
		args []any
		want string
	}{
		{[]any{"CL.THROTTLE", "victim:login", "4", "1", "60"}, "NOPERM this user has no permissions to access one of the keys used as arguments"},
		{[]any{"LIMIT.RESET", "app:a", "victim:login"}, "NOPERM this user has no permissions to access one of the keys used as arguments"},
		{[]any{"LIMIT.ALL", "2", "CL.THROTTLE", "app:a", "4", "1", "60", "1", "CL.THROTTLE", "victim:login", "4", "1", "60", "1"},
			"NOPERM this user has no permissions to access one of the keys used as arguments"},
		{[]any{"FLUSHALL"}, "NOPERM this user has no permissions to run the 'flushall' command"},
		{[]any{"SET", "app:x", "1"}, "NOPERM this user has no permissions to run the 'set' command"},
		{[]any{"CLUSTER", "FORGET", "abc"}, "NOPERM this user has no permissions to run the 'cluster|forget' command"},
		{[]any{"CLUSTER", "JOIN", "id", "127.0.0.1:1", "127.0.0.1:2"}, "NOPERM this user has no permissions to run the 'cluster|join' command"},
		{[]any{"CONFIG", "SET", "maxmemory", "1"}, "NOPERM this user has no permissions to run the 'config|set' command"},
		{[]any{"ACL", "SETUSER", "app", "+@all"}, "NOPERM this user has no permissions to run the 'acl|setuser' command"},
	}
	for _, d := range denied {
		if err := app.Do(ctx, d.args...).Err(); err == nil || err.Error() != d.want {
			t.Errorf("%v: %v, want %q", d.args, err, d.want)
		}
	}
	// The victim's limiter was never touched.
	ts.Expect(t, int64(0), "EXISTS", "victim:login")

	log := ts.Do(t, "ACL", "LOG").([]any)
	if len(log) < 4 {
		t.Fatalf("ACL LOG has %d entries: %v", len(log), log)
	}
	seen := map[string]bool{}
	for _, e := range log {
		f := e.([]any)
		entry := map[string]any{}
		for i := 0; i+1 < len(f); i += 2 {
			entry[f[i].(string)] = f[i+1]
		}
		if entry["username"] != "app" {
			t.Errorf("ACL LOG entry for %v", entry["username"])
		}
		seen[entry["reason"].(string)+":"+entry["object"].(string)] = true
	}
	for _, want := range []string{"key:victim:login", "command:flushall", "command:cluster|forget"} {
		if !seen[want] {
			t.Errorf("ACL LOG lacks %s: %v", want, seen)
		}
	}
	info := ts.Do(t, "INFO", "stats").(string)
	if !strings.Contains(info, "acl_access_denied_key:3") || !strings.Contains(info, "acl_access_denied_cmd:6") {
		t.Errorf("INFO stats:\n%s", info)
	}
}

// A user deleted while connected is disconnected; a user changed while
// connected follows its new rules on the next command.
func TestACLChangesReachConnectedClients(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	ts.Expect(t, "OK", "ACL", "SETUSER", "u", "on", "nopass", "~*", "+@all")
	c := redis.NewClient(&redis.Options{Addr: ts.Addr, Username: "u", Password: "x", Protocol: 2, MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	ts.Expect(t, "OK", "ACL", "SETUSER", "u", "-set")
	if err := c.Set(ctx, "k", "w", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("after -set: %v", err)
	}
	ts.Expect(t, int64(1), "ACL", "DELUSER", "u")
	if err := c.Get(ctx, "k").Err(); err == nil {
		t.Fatal("a deleted user's connection still answers")
	}
}

// Guessing passwords from one connection is cut off after
// AuthMaxFailures, and from the address after the per-address budget:
// then even the right password is refused, so guessing learns nothing.
// Each failure is counted, logged and entered in ACL LOG.
func TestAuthBruteForceIsCutOff(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{RequirePass: "right", AuthMaxFailures: 5}})
	// An operator's connection, authenticated before the attack.
	admin := sluicetest.DialRaw(t, "tcp", ts.Addr)
	if got := admin.Do(t, "AUTH", "right"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	raw := sluicetest.DialRaw(t, "tcp", ts.Addr)
	for i := range 5 {
		if got := raw.Do(t, "AUTH", "guess"); got != "-WRONGPASS invalid username-password pair or user is disabled.\r\n" {
			t.Fatalf("attempt %d: %q", i, got)
		}
	}
	// The fifth failure closed the connection.
	conn := raw.Conn()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after 5 failures the connection is still open: %v", err)
	}

	// New connections from the same address: the address's budget (20)
	// runs out, and then the right password is refused too.
	failures := 5
	for failures < 20 {
		c := sluicetest.DialRaw(t, "tcp", ts.Addr)
		for range 5 {
			if failures == 20 {
				break
			}
			c.Do(t, "AUTH", "guess")
			failures++
		}
	}
	c := sluicetest.DialRaw(t, "tcp", ts.Addr)
	if got := c.Do(t, "AUTH", "right"); !strings.HasPrefix(got, "-ERR too many failed authentication attempts") {
		t.Fatalf("the right password from a throttled address: %q", got)
	}
	if info := admin.Do(t, "INFO", "stats"); !strings.Contains(info, "acl_access_denied_auth:21") {
		t.Errorf("INFO stats:\n%s", info)
	}
	// One grouped entry: 20 wrong passwords for the default user (the
	// throttled attempt was refused before any check).
	log := admin.Do(t, "ACL", "LOG", "1")
	for _, want := range []string{"count\r\n:20\r\n", "reason\r\n$4\r\nauth\r\n", "object\r\n$4\r\nAUTH\r\n", "username\r\n$7\r\ndefault\r\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("ACL LOG lacks %q: %q", want, log)
		}
	}
}
