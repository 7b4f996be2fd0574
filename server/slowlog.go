package server

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SLOWLOG: the commands that took slowlog-log-slower-than µs or longer,
// newest first, at most slowlog-max-len of them.

// Redis's bounds on what an entry keeps of a command.
const (
	slowlogMaxArgs   = 32
	slowlogMaxString = 128
)

type slowlogEntry struct {
	id, unix, micros int64
	args             [][]byte
	addr, name       string
}

// slowlog is a queue: live entries are entries[start:], oldest first.
type slowlog struct {
	mu      sync.Mutex
	entries []slowlogEntry
	start   int
	nextID  int64
}

func (l *slowlog) add(e slowlogEntry, maxLen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	l.entries = append(l.entries, e)
	l.trimLocked(maxLen)
}

func (l *slowlog) trim(maxLen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trimLocked(maxLen)
}

func (l *slowlog) trimLocked(maxLen int) {
	for len(l.entries)-l.start > maxLen {
		l.entries[l.start] = slowlogEntry{}
		l.start++
	}
	if l.start > 64 && l.start > len(l.entries)/2 {
		n := copy(l.entries, l.entries[l.start:])
		clear(l.entries[n:])
		l.entries, l.start = l.entries[:n], 0
	}
}

func (l *slowlog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries) - l.start
}

func (l *slowlog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.entries)
	l.entries, l.start = l.entries[:0], 0
}

// newest are up to n entries, newest first (copies of the headers; the
// arguments are never changed once logged).
func (l *slowlog) newest(n int) []slowlogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	live := l.entries[l.start:]
	n = min(n, len(live))
	out := make([]slowlogEntry, n)
	for i := range out {
		out[i] = live[len(live)-1-i]
	}
	return out
}

// slowlogAdd logs a command that took ns, its arguments cut as Redis cuts
// them and secrets redacted.
func (c *client) slowlogAdd(row *command, args [][]byte, ns int64) {
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	c.s.stats.slowlogAdd(row, args, ns, c.addr, name)
}

// slowlogAdd logs a command sent from addr by a client named name.
func (st *cmdStats) slowlogAdd(row *command, args [][]byte, ns int64, addr, name string) {
	argc := min(len(args), slowlogMaxArgs)
	kept := make([][]byte, argc)
	redact := redactedArgs(row, args)
	for j := range kept {
		switch {
		case argc != len(args) && j == argc-1:
			kept[j] = []byte("... (" + strconv.Itoa(len(args)-argc+1) + " more arguments)")
		case j < len(redact) && redact[j]:
			kept[j] = []byte("(redacted)")
		case len(args[j]) > slowlogMaxString:
			kept[j] = append(append([]byte(nil), args[j][:slowlogMaxString]...),
				"... ("+strconv.Itoa(len(args[j])-slowlogMaxString)+" more bytes)"...)
		default:
			kept[j] = append([]byte(nil), args[j]...)
		}
	}
	st.slowlog.add(slowlogEntry{unix: time.Now().Unix(), micros: ns / 1000, args: kept, addr: addr, name: name},
		int(min(st.slowMaxLen.Load(), 1<<31-1)))
}

// redactedArgs marks the arguments Redis 7 shows as "(redacted)" in the
// slow log and to monitors (its redactClientCommandArgument): passwords.
// It allocates only for the commands that carry one.
func redactedArgs(row *command, args [][]byte) []bool {
	mark := func(from, to int) []bool {
		r := make([]bool, len(args))
		for i := from; i < min(to, len(args)); i++ {
			r[i] = true
		}
		return r
	}
	switch row.fullname {
	case "auth":
		if len(args) <= 3 { // more: a syntax error, shown as sent
			return mark(1, len(args))
		}
	case "acl|setuser":
		return mark(3, len(args))
	case "hello":
		// HELLO [protover [AUTH user pass] [SETNAME name]]: AUTH's two
		// words, found past any SETNAME before it.
		for j := 2; j < len(args); j++ {
			more := len(args) - 1 - j
			if isWord(args[j], "auth") && more >= 2 {
				return mark(j+1, j+3)
			}
			if !isWord(args[j], "setname") || more < 1 {
				break
			}
			j++
		}
	case "config|set":
		r := make([]bool, len(args))
		for i := 2; i+1 < len(args); i += 2 {
			if isWord(args[i], "requirepass") || isWord(args[i], "masterauth") {
				r[i+1] = true
			}
		}
		return r
	}
	return nil
}

var errSlowlogCount = errors.New("count should be greater than or equal to -1")

var slowlogHelp = []string{
	"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"GET [<count>]",
	"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
	"    Entries are made of:",
	"    id, timestamp, time in microseconds, arguments array, client IP and port,",
	"    client name",
	"LEN",
	"    Return the length of the slowlog.",
	"RESET",
	"    Reset the slowlog.",
	"HELP",
	"    Prints this help.",
}

// cmdSlowlog: SLOWLOG GET [count] | LEN | RESET | HELP.
func cmdSlowlog(s *Server, c *client, args [][]byte) {
	l := &s.stats.slowlog
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "help" && len(args) == 2:
		c.writeArray(len(slowlogHelp))
		for _, h := range slowlogHelp {
			c.writeStatus(h)
		}
	case sub == "reset" && len(args) == 2:
		l.reset()
		c.writeOK()
	case sub == "len" && len(args) == 2:
		c.writeInt(int64(l.len()))
	case sub == "get" && len(args) <= 3:
		count := 10
		if len(args) == 3 {
			n, err := strconv.ParseInt(string(args[2]), 10, 64)
			if err != nil || n < -1 {
				c.writeError(errSlowlogCount)
				return
			}
			count = int(min(n, 1<<31-1))
			if n == -1 {
				count = 1<<31 - 1
			}
		}
		entries := l.newest(count)
		c.writeArray(len(entries))
		for _, e := range entries {
			c.writeArray(6)
			c.writeInt(e.id)
			c.writeInt(e.unix)
			c.writeInt(e.micros)
			c.writeArray(len(e.args))
			for _, a := range e.args {
				c.writeBulk(a)
			}
			c.writeBulkString(e.addr)
			c.writeBulkString(e.name)
		}
	default:
		c.writeError(subcommandSyntax(args))
	}
}

// subcommandSyntax is Redis's reply to a known subcommand with the wrong
// arguments.
func subcommandSyntax(args [][]byte) error {
	sub := string(args[1])
	if len(sub) > 128 {
		sub = sub[:128]
	}
	return errors.New("unknown subcommand or wrong number of arguments for '" + sub + "'. Try " + strings.ToUpper(string(args[0])) + " HELP.")
}
