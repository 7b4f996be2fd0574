package server

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MONITOR: the connection receives a line for every command the server
// runs after it, as Redis's replicationFeedMonitors writes them:
//
//	+1700000000.123456 [0 127.0.0.1:50000] "CL.THROTTLE" "k" "1" ...
//
// Administrative commands are not shown (Redis: "too dangerous"), nor
// commands refused before they ran (unknown, wrong arity, no permission);
// AUTH's and HELLO AUTH's credentials show as "(redacted)". A script's commands
// show from "lua" (scripting.go, scriptRun.ran).
//
// Cost. With no monitor attached, a command pays one test of a field the
// connection loaded once per read (Server.hooks). With one, each command
// shown is formatted once, into the sending connection's scratch buffer,
// and appended to each monitor's queue under that monitor's lock; a
// monitor's own goroutine writes its queue to the socket, so a slow monitor
// never blocks the connections it watches; the queue is bounded
// (outqueue.go).

var errMonitorKeyspace = errors.New("Replica can't interact with the keyspace")

// monitorSet is the server's monitors; feeders read the list without a
// lock.
type monitorSet struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*outQueue]
}

func (ms *monitorSet) add(s *Server, m *outQueue) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var list []*outQueue
	if old := ms.list.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, m)
	ms.list.Store(&list)
	s.setHook(hookMonitor, true)
}

func (ms *monitorSet) remove(s *Server, m *outQueue) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var list []*outQueue
	for _, x := range *ms.list.Load() {
		if x != m {
			list = append(list, x)
		}
	}
	ms.list.Store(&list)
	s.setHook(hookMonitor, len(list) > 0)
}

// feed shows the command c is about to run to every monitor. At EXEC, the
// queued commands come first, then EXEC: the order Redis shows them in as
// they run (Sluice shows them for an EXEC a WATCH fails too).
func (ms *monitorSet) feed(c *client, cmd *command, args [][]byte) {
	list := ms.list.Load()
	if list == nil || len(*list) == 0 {
		return
	}
	if cmd.name == "exec" && c.multi != nil && !c.multi.aborted {
		for _, q := range c.multi.queued {
			ms.feedOne(c, *list, q.cmd, q.args)
		}
	}
	ms.feedOne(c, *list, cmd, args)
}

func (ms *monitorSet) feedOne(c *client, list []*outQueue, cmd *command, args [][]byte) {
	row := cmd.subcommand(args)
	if row.flags&flagAdmin != 0 {
		return
	}
	c.monLine = monitorLine(c.monLine[:0], time.Now(), c.addr, row, args)
	for _, m := range list {
		m.push(c.s, c.monLine)
	}
}

// monitorLine appends the line Redis shows for args (of command row) sent
// from addr at t.
func monitorLine(b []byte, t time.Time, addr string, row *command, args [][]byte) []byte {
	b = append(b, '+')
	b = strconv.AppendInt(b, t.Unix(), 10)
	b = append(b, '.')
	us := t.Nanosecond() / 1000
	for d := 100000; d > 1; d /= 10 {
		if us < d {
			b = append(b, '0')
		}
	}
	b = strconv.AppendInt(b, int64(us), 10)
	b = append(b, " [0 "...)
	b = append(b, addr...)
	b = append(b, "] "...)
	redact := redactedArgs(row, args)
	for i, a := range args {
		if i > 0 {
			b = append(b, ' ')
		}
		if i < len(redact) && redact[i] {
			a = redactedArg
		}
		b = appendRepr(b, a)
	}
	return append(b, '\r', '\n')
}

var redactedArg = []byte("(redacted)")

// appendRepr appends a quoted as Redis's sdscatrepr does: backslash
// escapes for \ " \n \r \t \a \b, \xHH for other unprintable bytes.
func appendRepr(b, a []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	plain := 0 // a[plain:i] needs no escape: appended in one copy
	for i, ch := range a {
		if ch >= ' ' && ch <= '~' && ch != '\\' && ch != '"' {
			continue
		}
		b = append(b, a[plain:i]...)
		plain = i + 1
		switch ch {
		case '\\', '"':
			b = append(b, '\\', ch)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\a':
			b = append(b, '\\', 'a')
		case '\b':
			b = append(b, '\\', 'b')
		default:
			b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
		}
	}
	b = append(b, a[plain:]...)
	return append(b, '"')
}

func cmdMonitor(s *Server, c *client, args [][]byte) {
	if c.monitoring.Load() || c.monStarting {
		return // already monitoring: no reply, as Redis
	}
	c.writeOK()
	// The hand-over waits until MONITOR is counted (dispatch): as in
	// Redis, a client that has its +OK finds it in the slow log and
	// commandstats.
	c.monStarting = true
}

// startMonitor makes the connection the monitor MONITOR prepared: from
// here its writer owns the socket, and this connection's replies (earlier
// ones of its pipeline first) go through the queue, in order with the
// lines.
func (c *client) startMonitor() {
	c.monStarting = false
	q := c.startQueue()
	c.monitoring.Store(true)
	c.s.monitors.add(c.s, q)
	c.hooks = c.s.hooks.Load()
}

// stopMonitor ends MONITOR on a connection that stays (RESET): the replies
// already queued go out, then the connection writes its own again (unless
// it is subscribed).
func (c *client) stopMonitor() {
	c.monStarting = false
	if !c.monitoring.Load() {
		return
	}
	c.flushOut()
	c.s.monitors.remove(c.s, c.oq.Load())
	c.monitoring.Store(false)
	c.stopQueue()
	c.hooks = c.s.hooks.Load()
}

// leaveMonitors detaches a monitor whose connection ends.
func (c *client) leaveMonitors() {
	if c.monitoring.Load() {
		c.s.monitors.remove(c.s, c.oq.Load())
	}
}
