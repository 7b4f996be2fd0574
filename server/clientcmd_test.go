package server_test

import (
	"bufio"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// maskInfo masks the CLIENT LIST/INFO values that legitimately differ
// between servers and runs (ids, addresses, fds, times, buffer sizes),
// keeping every field name, the order, and the values that must agree.
// multi-mem counts Redis's per-argument object overhead, Sluice's the
// bytes. Redis runs on a unix socket here (flag U), Sluice on TCP. Bulk
// lengths change with the masked values.
var (
	maskedFields = regexp.MustCompile(`\b(id|addr|laddr|fd|age|idle|qbuf|qbuf-free|rbs|rbp|tot-mem|obl|omem|multi-mem)=\S*`)
	unixFlag     = regexp.MustCompile(`(flags=\S*)U`)
	bulkLen      = regexp.MustCompile(`\$\d+\r\n`)
)

func maskInfo(s string) string {
	s = maskedFields.ReplaceAllString(s, "$1=?")
	s = strings.ReplaceAll(unixFlag.ReplaceAllString(s, "$1"), "flags= ", "flags=N ")
	return bulkLen.ReplaceAllString(s, "$$?\r\n")
}

// redisOnly drops what Sluice shows past Redis 7.0.15's fields: 7.2's
// lib-name and lib-ver (Sluice has CLIENT SETINFO), at the end.
var sluiceExtra = regexp.MustCompile(` lib-name=\S* lib-ver=\S*`)

// TestClientCommandsMatchRedis compares CLIENT replies and errors with
// redis-server 7.0.15 byte for byte; CLIENT LIST/INFO lines with the
// values that differ masked (maskInfo) and Sluice's trailing 7.2 fields
// removed.
func TestClientCommandsMatchRedis(t *testing.T) {
	r := sluicetest.StartRedis(t)
	s := sluicetest.Start(t, sluicetest.Options{})
	rc := sluicetest.DialRaw(t, r.Network, r.Addr)
	sc := sluicetest.DialRaw(t, "tcp", s.Addr)
	for _, cmd := range [][]string{
		{"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ID", "0"},
		{"CLIENT", "KILL", "ID", "x"},
		{"CLIENT", "KILL", "ID", "999999"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "no"},
		{"CLIENT", "KILL", "LADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "TYPE", "bogus"},
		{"CLIENT", "KILL", "TYPE", "master"},
		{"CLIENT", "KILL", "TYPE", "pubsub", "ID", "7"},
		{"CLIENT", "KILL", "USER", "nobody"},
		{"CLIENT", "KILL", "SKIPME", "maybe"},
		{"CLIENT", "KILL", "MAXAGE", "10"},
		{"CLIENT", "KILL", "ID", "1", "TYPE"},
		{"CLIENT", "KILL", "BOGUS", "1"},
		{"CLIENT", "KILL"},
		{"CLIENT", "PAUSE", "abc"},
		{"CLIENT", "PAUSE", "-1"},
		{"CLIENT", "PAUSE", "10", "sometimes"},
		{"CLIENT", "PAUSE", "abc", "sometimes"},
		{"CLIENT", "PAUSE", "10", "write", "x"},
		{"CLIENT", "PAUSE"},
		{"CLIENT", "PAUSE", "0", "WRITE"},
		{"CLIENT", "PAUSE", "0"},
		{"CLIENT", "UNPAUSE"},
		{"CLIENT", "UNPAUSE", "x"},
		{"CLIENT", "NO-EVICT", "on"},
		{"CLIENT", "NO-EVICT", "maybe"},
		{"CLIENT", "NO-EVICT"},
		{"CLIENT", "NO-EVICT", "off"},
		{"CLIENT", "NO-TOUCH", "on"}, // 7.2's: unknown in 7.0
		{"CLIENT", "LIST", "TYPE", "bogus"},
		{"CLIENT", "LIST", "TYPE", "replica"},
		{"CLIENT", "LIST", "ID", "x"},
		{"CLIENT", "LIST", "ID", "999999"},
		{"CLIENT", "LIST", "bogus"},
		{"CLIENT", "INFO", "x"},
		{"MONITOR", "x"},
	} {
		want, got := rc.Do(t, cmd...), sc.Do(t, cmd...)
		if got != want {
			t.Errorf("%q:\n sluice %q\n redis  %q", cmd, got, want)
		}
	}

	// The lines: a connection's own, and another's view of it inside
	// MULTI, named and NO-EVICT on.
	for _, step := range [][]string{{"CLIENT", "SETNAME", "conn-a"}, {"CLIENT", "NO-EVICT", "on"}, {"MULTI"}, {"PING"}, {"PING", "x"}} {
		if got, want := sc.Do(t, step...), rc.Do(t, step...); got != want {
			t.Errorf("%q: sluice %q, redis %q", step, got, want)
		}
	}
	idOf := func(c *sluicetest.RawConn) string {
		return strings.TrimSuffix(strings.TrimPrefix(c.Do(t, "CLIENT", "ID"), ":"), "\r\n")
	}
	rc2, sc2 := sluicetest.DialRaw(t, r.Network, r.Addr), sluicetest.DialRaw(t, "tcp", s.Addr)
	lines := func(what string, got, want string) {
		t.Helper()
		if got, want := sluiceExtra.ReplaceAllString(maskInfo(got), ""), maskInfo(want); got != want {
			t.Errorf("%s:\n sluice %q\n redis  %q", what, got, want)
		}
	}
	// sc's and rc's ids: asked inside MULTI they would be queued, so
	// from the lists (the first connection each opened).
	lines("another connection's view inside MULTI",
		sc2.Do(t, "CLIENT", "LIST", "ID", firstID(t, sc2)), rc2.Do(t, "CLIENT", "LIST", "ID", firstID(t, rc2)))
	if got, want := sc.Do(t, "EXEC"), rc.Do(t, "EXEC"); got != want {
		t.Errorf("EXEC: sluice %q, redis %q", got, want)
	}
	for _, cmd := range [][]string{{"CLIENT", "INFO"}, {"CLIENT", "LIST", "ID", idOf(sc2), idOf(sc2)}} {
		lines(strings.Join(cmd, " "), sc.Do(t, cmd...), rc.Do(t, strings.Fields(strings.Replace(strings.Join(cmd, " "), idOf(sc2), idOf(rc2), -1))...))
	}
	lines("CLIENT LIST TYPE normal", sc2.Do(t, "CLIENT", "LIST", "TYPE", "normal"), rc2.Do(t, "CLIENT", "LIST", "TYPE", "normal"))
}

// firstID is the lowest id CLIENT LIST shows on c's server.
func firstID(t *testing.T, c *sluicetest.RawConn) string {
	t.Helper()
	m := regexp.MustCompile(`id=(\d+)`).FindStringSubmatch(c.Do(t, "CLIENT", "LIST"))
	if m == nil {
		t.Fatal("CLIENT LIST without ids")
	}
	return m[1]
}

// TestClientKill ends connections by each form: the victim's next read
// fails, CLIENT LIST no longer lists it, and a connection killing itself
// gets its reply first.
func TestClientKill(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	admin := sluicetest.DialRaw(t, "tcp", s.Addr)

	victimGone := func(t *testing.T, v *sluicetest.RawConn, id string) {
		t.Helper()
		// Blocked in a read with nothing sent: the kill must end it.
		v.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := v.Conn().Read(make([]byte, 16)); err == nil {
			t.Fatalf("the killed connection read %d bytes", n)
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the killed connection stayed open")
		}
		if got := admin.Do(t, "CLIENT", "LIST", "ID", id); got != "$0\r\n\r\n" {
			t.Fatalf("CLIENT LIST still lists the killed connection: %q", got)
		}
	}
	idOf := func(v *sluicetest.RawConn) string {
		return strings.TrimSuffix(strings.TrimPrefix(v.Do(t, "CLIENT", "ID"), ":"), "\r\n")
	}

	t.Run("old form", func(t *testing.T) {
		v := sluicetest.DialRaw(t, "tcp", s.Addr)
		id := idOf(v)
		if got := admin.Do(t, "CLIENT", "KILL", v.Conn().LocalAddr().String()); got != "+OK\r\n" {
			t.Fatalf("CLIENT KILL addr: %q", got)
		}
		victimGone(t, v, id)
		if got := admin.Do(t, "CLIENT", "KILL", v.Conn().LocalAddr().String()); got != "-ERR No such client\r\n" {
			t.Fatalf("CLIENT KILL of a gone addr: %q", got)
		}
	})
	t.Run("by id", func(t *testing.T) {
		v := sluicetest.DialRaw(t, "tcp", s.Addr)
		id := idOf(v)
		if got := admin.Do(t, "CLIENT", "KILL", "ID", id); got != ":1\r\n" {
			t.Fatalf("CLIENT KILL ID: %q", got)
		}
		victimGone(t, v, id)
		if got := admin.Do(t, "CLIENT", "KILL", "ID", id); got != ":0\r\n" {
			t.Fatalf("CLIENT KILL ID again: %q", got)
		}
	})
	t.Run("by user, sparing itself", func(t *testing.T) {
		s.Do(t, "ACL", "SETUSER", "victim", "on", ">pw", "+@all", "~*")
		v1, v2 := sluicetest.DialRaw(t, "tcp", s.Addr), sluicetest.DialRaw(t, "tcp", s.Addr)
		for _, v := range []*sluicetest.RawConn{v1, v2} {
			if got := v.Do(t, "AUTH", "victim", "pw"); got != "+OK\r\n" {
				t.Fatal(got)
			}
		}
		id2 := idOf(v2)
		// v1 kills its user's connections: v2 goes, v1 (SKIPME yes) stays.
		if got := v1.Do(t, "CLIENT", "KILL", "USER", "victim"); got != ":1\r\n" {
			t.Fatalf("CLIENT KILL USER: %q", got)
		}
		victimGone(t, v2, id2)
		if got := v1.Do(t, "PING"); got != "+PONG\r\n" {
			t.Fatalf("the killer: %q", got)
		}
	})
	t.Run("itself, reply first", func(t *testing.T) {
		v := sluicetest.DialRaw(t, "tcp", s.Addr)
		id := idOf(v)
		// Pipelined: the kill's reply comes, the PING after it never runs.
		v.Conn().Write(append(sluicetest.EncodeCommand("CLIENT", "KILL", "ID", id, "SKIPME", "no"), sluicetest.EncodeCommand("PING")...))
		r := bufio.NewReader(v.Conn())
		v.Conn().SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := sluicetest.ReadReply(r)
		if err != nil || string(got) != ":1\r\n" {
			t.Fatalf("self kill: %q %v", got, err)
		}
		if more, err := sluicetest.ReadReply(r); err == nil {
			t.Fatalf("after killing itself the connection answered %q", more)
		}
		if got := admin.Do(t, "CLIENT", "LIST", "ID", id); got != "$0\r\n\r\n" {
			t.Fatalf("CLIENT LIST still lists the killed connection: %q", got)
		}
	})
	t.Run("go-redis pool reconnects", func(t *testing.T) {
		id := s.Do(t, "CLIENT", "ID").(int64)
		if got := admin.Do(t, "CLIENT", "KILL", "ID", strconv.FormatInt(id, 10)); got != ":1\r\n" {
			t.Fatalf("kill: %q", got)
		}
		// The pooled connection is dead: its next command fails (go-redis
		// does not retry here: MaxRetries -1) or a new one answers.
		if err := s.Client.Ping(ctx).Err(); err == nil {
			if again := s.Do(t, "CLIENT", "ID").(int64); again == id {
				t.Fatal("the killed connection still answers")
			}
		}
	})
}

// TestClientPause: WRITE holds writes and decisions and lets reads
// through; the hold ends at the timeout and at UNPAUSE; ALL holds
// everything. Bounded: every wait has a deadline far past the pause.
func TestClientPause(t *testing.T) {
	s := sluicetest.Start(t, sluicetest.Options{})
	admin := sluicetest.DialRaw(t, "tcp", s.Addr)

	// send writes a pipeline and returns a channel of its replies, read
	// as they come.
	send := func(cmds ...[]string) (*sluicetest.RawConn, chan string) {
		c := sluicetest.DialRaw(t, "tcp", s.Addr)
		var out []byte
		for _, cmd := range cmds {
			out = append(out, sluicetest.EncodeCommand(cmd...)...)
		}
		c.Conn().Write(out)
		replies := make(chan string, len(cmds))
		go func() {
			r := bufio.NewReader(c.Conn())
			c.Conn().SetReadDeadline(time.Now().Add(20 * time.Second))
			for range cmds {
				b, err := sluicetest.ReadReply(r)
				if err != nil {
					close(replies)
					return
				}
				replies <- string(b)
			}
		}()
		return c, replies
	}
	next := func(ch chan string, what string) string {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no reply", what)
			return ""
		}
	}
	// heldFor reports whether nothing arrives on ch while a probe that
	// is not held makes a round trip on another connection several times
	// (a held reply cannot be ordered before them).
	stillHeld := func(ch chan string) bool {
		for range 5 {
			admin.Do(t, "CLIENT", "ID")
			select {
			case r := <-ch:
				t.Logf("arrived: %q", r)
				return false
			default:
			}
		}
		return true
	}

	t.Run("write mode releases on UNPAUSE", func(t *testing.T) {
		s.Do(t, "SET", "k", "before")
		if got := admin.Do(t, "CLIENT", "PAUSE", "60000", "WRITE"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		_, replies := send([]string{"GET", "k"}, []string{"SET", "k", "during"}, []string{"GET", "k"})
		if got := next(replies, "GET during a WRITE pause"); got != "$6\r\nbefore\r\n" {
			t.Fatalf("read during the pause: %q", got)
		}
		_, decisions := send([]string{"CL.THROTTLE", "pk", "10", "10", "60"})
		// Reads from another connection are served; the write and the
		// decision are held.
		if got := admin.Do(t, "GET", "k"); got != "$6\r\nbefore\r\n" {
			t.Fatalf("another connection's read: %q", got)
		}
		sluicetest.WaitFor(t, 5*time.Second, "both connections held (flags b)", func() bool {
			return strings.Count(admin.Do(t, "CLIENT", "LIST"), "flags=b") == 2
		})
		if got := admin.Do(t, "INFO", "clients"); !strings.Contains(got, "blocked_clients:2\r\n") {
			t.Fatalf("INFO clients while two connections are held: %q", got)
		}
		if !stillHeld(replies) || !stillHeld(decisions) {
			t.Fatal("a write ran during the pause")
		}
		if got := admin.Do(t, "CLIENT", "UNPAUSE"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		if got := next(replies, "SET after UNPAUSE"); got != "+OK\r\n" {
			t.Fatalf("held SET: %q", got)
		}
		if got := next(replies, "GET after UNPAUSE"); got != "$6\r\nduring\r\n" {
			t.Fatalf("GET after the held SET: %q", got)
		}
		if got := next(decisions, "decision after UNPAUSE"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
			t.Fatalf("held decision: %q", got)
		}
		sluicetest.WaitFor(t, 5*time.Second, "no connection held after UNPAUSE", func() bool {
			return strings.Contains(admin.Do(t, "INFO", "clients"), "blocked_clients:0\r\n")
		})
	})
	t.Run("write mode holds scripts and EXECs of writes", func(t *testing.T) {
		// A transaction queued before the pause: its EXEC writes.
		tx, txReplies := send([]string{"MULTI"}, []string{"SET", "k", "tx"})
		next(txReplies, "MULTI")
		next(txReplies, "queued SET")
		if got := admin.Do(t, "CLIENT", "PAUSE", "60000", "WRITE"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		_, reads := send([]string{"MULTI"}, []string{"GET", "k"}, []string{"EXEC"})
		for _, what := range []string{"MULTI", "queued GET", "EXEC of a read"} {
			next(reads, what+" during a WRITE pause")
		}
		_, script := send([]string{"EVAL", "return 1", "0"})
		// tx's reader took its two replies and stopped: EXEC's is read
		// here.
		tx.Conn().Write(sluicetest.EncodeCommand("EXEC"))
		execReply := make(chan string, 1)
		go func() {
			if b, err := sluicetest.ReadReply(bufio.NewReader(tx.Conn())); err == nil {
				execReply <- string(b)
			}
		}()
		if !stillHeld(script) || !stillHeld(execReply) {
			t.Fatal("a script or an EXEC of a write ran during the pause")
		}
		admin.Do(t, "CLIENT", "UNPAUSE")
		if got := next(script, "EVAL after UNPAUSE"); got != ":1\r\n" {
			t.Fatalf("held EVAL: %q", got)
		}
		if got := next(execReply, "EXEC after UNPAUSE"); got != "*1\r\n+OK\r\n" {
			t.Fatalf("held EXEC: %q", got)
		}
		s.Do(t, "SET", "k", "during")
	})
	t.Run("releases at the timeout", func(t *testing.T) {
		start := time.Now()
		if got := admin.Do(t, "CLIENT", "PAUSE", "200", "WRITE"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		_, replies := send([]string{"SET", "k", "late"})
		if got := next(replies, "SET after the pause's timeout"); got != "+OK\r\n" {
			t.Fatalf("held SET: %q", got)
		}
		if waited := time.Since(start); waited < 200*time.Millisecond {
			t.Fatalf("the SET ran %v after a 200 ms pause began", waited)
		}
	})
	t.Run("all mode holds reads and admin commands", func(t *testing.T) {
		if got := admin.Do(t, "CLIENT", "PAUSE", "300", "ALL"); got != "+OK\r\n" {
			t.Fatal(got)
		}
		start := time.Now()
		// Redis holds every command in ALL mode, CLIENT UNPAUSE too.
		_, replies := send([]string{"GET", "k"}, []string{"CLIENT", "UNPAUSE"})
		if got := next(replies, "GET after an ALL pause"); got != "$4\r\nlate\r\n" {
			t.Fatalf("held GET: %q", got)
		}
		if waited := time.Since(start); waited < 250*time.Millisecond {
			t.Fatalf("a read ran %v into a 300 ms ALL pause", waited)
		}
		next(replies, "UNPAUSE")
	})
	t.Run("a killed held connection gives up", func(t *testing.T) {
		admin.Do(t, "CLIENT", "PAUSE", "60000", "WRITE")
		_, replies := send([]string{"CLIENT", "ID"}, []string{"SET", "k", "never"})
		id := strings.TrimSuffix(strings.TrimPrefix(next(replies, "CLIENT ID"), ":"), "\r\n")
		sluicetest.WaitFor(t, 5*time.Second, "the SET held", func() bool {
			return strings.Contains(admin.Do(t, "CLIENT", "LIST", "ID", id), "flags=b")
		})
		if got := admin.Do(t, "CLIENT", "KILL", "ID", id); got != ":1\r\n" {
			t.Fatalf("kill: %q", got)
		}
		select {
		case r, ok := <-replies:
			if ok {
				t.Fatalf("the killed connection answered %q", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the killed held connection stayed open")
		}
		admin.Do(t, "CLIENT", "UNPAUSE")
		if got := admin.Do(t, "GET", "k"); got != "$4\r\nlate\r\n" {
			t.Fatalf("the killed connection's held SET ran: %q", got)
		}
	})
}
