package limiters

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// differential runs a scenario against Redis (with MONITOR recording
// every command Redis executes, a script's own redis.call commands
// included), then against Sluice, and returns both transcripts, Redis's
// first. Then, as the subtest "replay", it sends what Redis executed,
// less the scripting and connection commands, to a fresh Redis and a fresh
// Sluice side by side and compares each reply's bytes: so that what a
// library needs besides scripting (the commands it sends and its scripts
// call, with the very arguments they made) is shown to work in Sluice on
// its own.
//
// native names the library's scripts that Sluice accelerates (INFO's
// script_native_<name>): each must have run natively at least once, which
// shows that the text the installed library sends is the registered one.
func differential(t *testing.T, native []string, run func(e endpoint) []any) (redisTr, sluiceTr []any) {
	t.Helper()
	eps := endpoints(t)
	mon := startMonitor(t, eps[0])
	redisTr = run(eps[0])
	cmds := mon.stop(t)
	sluiceTr = run(eps[1])
	if eps[1].name == "sluice" {
		ranNatively(t, eps[1], native)
	}
	t.Run("replay", func(t *testing.T) { replay(t, cmds) })
	return redisTr, sluiceTr
}

// ranNatively requires each of the named accelerated scripts to have run
// natively on e.
func ranNatively(t *testing.T, e endpoint, names []string) {
	t.Helper()
	info := sluicetest.DialRaw(t, e.network, e.addr).Do(t, "INFO", "scripting")
	for _, name := range names {
		_, rest, ok := strings.Cut(info, "script_native_"+name+":runs=")
		if !ok {
			t.Errorf("Sluice knows no accelerated script %q: %q", name, info)
			continue
		}
		if runs, _, _ := strings.Cut(rest, ","); runs == "0" {
			t.Errorf("the library's %s script never ran natively: the installed library sends another text than the registered one (%q)", name, info)
		}
	}
}

// monitor reads a redis-server's MONITOR feed.
type monitor struct {
	e     endpoint
	conn  net.Conn
	mu    sync.Mutex
	lines []string
	err   error
	done  chan struct{}
}

const monitorEnd = "limiters: end of the scenario"

func startMonitor(t *testing.T, e endpoint) *monitor {
	t.Helper()
	c, err := net.DialTimeout(e.network, e.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	c.SetDeadline(time.Time{})
	m := &monitor{e: e, conn: c, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			m.mu.Lock()
			if err != nil {
				m.err = err
				m.mu.Unlock()
				return
			}
			m.lines = append(m.lines, strings.TrimRight(line, "\r\n"))
			end := strings.Contains(line, monitorEnd)
			m.mu.Unlock()
			if end {
				return
			}
		}
	}()
	return m
}

// stop marks the end of the feed with an ECHO, waits for it and returns
// the commands executed until then, each as its arguments.
func (m *monitor) stop(t *testing.T) [][]string {
	t.Helper()
	sluicetest.DialRaw(t, m.e.network, m.e.addr).Do(t, "ECHO", monitorEnd)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatal("MONITOR: the end marker did not arrive")
	}
	m.conn.Close()
	var cmds [][]string
	for _, line := range m.lines {
		args, err := parseMonitorLine(line)
		if err != nil {
			t.Fatalf("MONITOR line %q: %v", line, err)
		}
		if len(args) == 2 && strings.EqualFold(args[0], "echo") && args[1] == monitorEnd {
			break
		}
		cmds = append(cmds, args)
	}
	return cmds
}

// parseMonitorLine reads `+1700000000.123456 [0 lua] "SET" "k" "v"`: the
// arguments are quoted as sdscatrepr writes them (\\ \" \n \r \t \a \b
// and \xHH).
func parseMonitorLine(line string) ([]string, error) {
	_, rest, ok := strings.Cut(line, "] ")
	if !ok || !strings.HasPrefix(line, "+") {
		return nil, errors.New("not a MONITOR line")
	}
	var args []string
	for len(rest) > 0 {
		if rest[0] == ' ' {
			rest = rest[1:]
			continue
		}
		if rest[0] != '"' {
			return nil, errors.New("an argument without quotes")
		}
		var b strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			c := rest[i]
			if c != '\\' {
				b.WriteByte(c)
				continue
			}
			i++
			if i >= len(rest) {
				return nil, errors.New("a trailing backslash")
			}
			switch rest[i] {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(rest) {
					return nil, errors.New("a short \\x escape")
				}
				v, err := strconv.ParseUint(rest[i+1:i+3], 16, 8)
				if err != nil {
					return nil, err
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(rest[i])
			}
		}
		if i >= len(rest) {
			return nil, errors.New("an unterminated argument")
		}
		args = append(args, b.String())
		rest = rest[i+1:]
	}
	if len(args) == 0 {
		return nil, errors.New("no command")
	}
	return args, nil
}

// notReplayed: scripting itself (what the main engineer is adding), and
// the connection's own commands, whose replies are the server's to
// choose (INFO's fields) or set up a protocol the raw connections do not
// speak (HELLO 3), or put the connection in a mode the replay's one does
// not stay in (SUBSCRIBE: TestPubSubMatchesRedis covers pub/sub).
var notReplayed = map[string]bool{
	"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "script": true, "function": true, "fcall": true,
	"hello": true, "client": true, "auth": true, "select": true, "quit": true, "info": true, "monitor": true,
	"command": true, "reset": true, "subscribe": true, "psubscribe": true, "ssubscribe": true,
	"unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
}

// replay sends cmds to a fresh Redis and a fresh Sluice on one RESP2
// connection each, one command to both in turn, and compares replies:
// byte for byte, except TTL and PTTL (within 1 s, -1 and -2 exact), TIME
// (two elements) and KEYS (in any order), also inside EXEC's reply.
func replay(t *testing.T, cmds [][]string) {
	eps := endpoints(t)
	a := sluicetest.DialRaw(t, eps[0].network, eps[0].addr)
	b := sluicetest.DialRaw(t, eps[1].network, eps[1].addr)
	var diffs []string
	n := 0
	var queued []string // inside MULTI: the names of the queued commands
	inMulti := false
	for i, args := range cmds {
		name := strings.ToLower(args[0])
		if notReplayed[name] {
			continue
		}
		n++
		ra, rb := a.Do(t, args...), b.Do(t, args...)
		same := sameReply(name, ra, rb)
		switch {
		case name == "multi":
			inMulti, queued = true, nil
		case name == "exec" || name == "discard":
			same = name == "exec" && sameExec(queued, ra, rb) || name == "discard" && same
			inMulti = false
		case inMulti:
			queued = append(queued, name)
		}
		if !same {
			diffs = append(diffs, fmt.Sprintf("#%d %s: Redis %q, Sluice %q", i, quoteArgs(args), ra, rb))
		}
	}
	t.Logf("replayed %d of the %d commands Redis executed", n, len(cmds))
	if n == 0 {
		t.Error("nothing to replay: MONITOR recorded no command")
	}
	if len(diffs) > 0 {
		const most = 30
		if len(diffs) > most {
			diffs = append(diffs[:most], fmt.Sprintf("... and %d more", len(diffs)-most))
		}
		t.Errorf("Sluice answers %d of the library's commands unlike Redis:\n  %s", len(diffs), strings.Join(diffs, "\n  "))
	}
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if len(a) > 60 {
			a = a[:60] + "..."
		}
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

func sameReply(name, a, b string) bool {
	switch name {
	case "ttl", "pttl":
		x, err1 := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(a, ":"), "\r\n"), 10, 64)
		y, err2 := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(b, ":"), "\r\n"), 10, 64)
		if err1 != nil || err2 != nil || x < 0 || y < 0 {
			return a == b
		}
		tol := int64(1)
		if name == "pttl" {
			tol = 1000
		}
		return int64(math.Abs(float64(x-y))) <= tol
	case "time":
		return strings.HasPrefix(a, "*2\r\n") && strings.HasPrefix(b, "*2\r\n")
	case "keys":
		// The order of KEYS is a hash table's in Redis, unspecified.
		return sortedBulks(a) == sortedBulks(b)
	}
	return a == b
}

// sameExec compares EXEC's replies element by element, each by the rule
// of the command queued there.
func sameExec(queued []string, a, b string) bool {
	ea, oka := arrayElems(a)
	eb, okb := arrayElems(b)
	if !oka || !okb || len(ea) != len(queued) || len(eb) != len(queued) {
		return a == b
	}
	for i, name := range queued {
		if !sameReply(name, ea[i], eb[i]) {
			return false
		}
	}
	return true
}

// arrayElems splits an array reply into its elements' bytes.
func arrayElems(r string) ([]string, bool) {
	br := bufio.NewReader(strings.NewReader(r))
	head, err := br.ReadString('\n')
	if err != nil || len(head) < 4 || head[0] != '*' {
		return nil, false
	}
	n, err := strconv.Atoi(head[1 : len(head)-2])
	if err != nil || n < 0 {
		return nil, false
	}
	out := make([]string, n)
	for i := range out {
		e, err := sluicetest.ReadReply(br)
		if err != nil {
			return nil, false
		}
		out[i] = string(e)
	}
	return out, true
}

// sortedBulks is an array of bulk strings with its elements sorted (any
// other reply as it is).
func sortedBulks(r string) string {
	parts := strings.Split(strings.TrimSuffix(r, "\r\n"), "\r\n")
	if len(parts) == 0 || !strings.HasPrefix(parts[0], "*") || len(parts)%2 != 1 {
		return r
	}
	elems := make([]string, 0, len(parts)/2)
	for i := 1; i+1 < len(parts); i += 2 {
		elems = append(elems, parts[i]+"\r\n"+parts[i+1])
	}
	sort.Strings(elems)
	return parts[0] + "\r\n" + strings.Join(elems, "\r\n")
}
