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
// never blocks the connections it watches. Its queue is bounded: past the
// client-output-buffer-limit normal hard limit (or monitorQueueLimit when
// none is set) the monitor is closed, logged as Redis logs an output
// buffer overflow.

var errMonitorKeyspace = errors.New("Replica can't interact with the keyspace")

// monitorQueueLimit bounds a monitor's unwritten bytes while
// client-output-buffer-limit normal sets no hard limit (Redis's default,
// under which a slow monitor grows without bound).
const monitorQueueLimit = 32 << 20

// monitor is one MONITOR connection's queue and writer.
type monitor struct {
	c     *client
	mu    sync.Mutex
	queue []byte // replies and lines not yet written
	cut   bool   // closed for its queue, or its socket failed: queue nothing more
	wake  chan struct{}
	gone  chan struct{} // closed when the connection ends
	done  chan struct{} // closed when the writer returns
}

// monitorSet is the server's monitors; feeders read the list without a
// lock.
type monitorSet struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*monitor]
}

func (ms *monitorSet) add(s *Server, m *monitor) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var list []*monitor
	if old := ms.list.Load(); old != nil {
		list = append(list, *old...)
	}
	list = append(list, m)
	ms.list.Store(&list)
	s.setHook(hookMonitor, true)
}

func (ms *monitorSet) remove(s *Server, m *monitor) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	var list []*monitor
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

func (ms *monitorSet) feedOne(c *client, list []*monitor, cmd *command, args [][]byte) {
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

// push queues b for the monitor's writer, or closes the monitor when its
// queue would pass the limit.
func (m *monitor) push(s *Server, b []byte) {
	m.mu.Lock()
	if m.cut {
		m.mu.Unlock()
		return
	}
	limit := s.obuf.Load()[ClassNormal].Hard
	if limit == 0 {
		limit = monitorQueueLimit
	}
	if owed := len(m.queue) + len(b); over(owed, limit) {
		m.cut, m.queue = true, nil
		m.mu.Unlock()
		s.obufClosed.Add(1)
		s.log.Warn("Client scheduled to be closed ASAP for overcoming of output buffer limits.", "client", m.c.info(nil, 0), "owed", owed)
		m.c.kill()
		return
	}
	m.queue = append(m.queue, b...)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// owed is how many bytes the monitor's queue holds (CLIENT LIST omem).
func (m *monitor) owed() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.queue))
}

// run writes the queue until the connection ends, then what is left (a
// QUIT's reply) within the shutdown drain bound.
func (m *monitor) run() {
	defer close(m.done)
	var buf []byte
	for {
		last := false
		select {
		case <-m.wake:
		case <-m.gone:
			last = true
		}
		m.mu.Lock()
		buf, m.queue = m.queue, buf[:0]
		m.mu.Unlock()
		if len(buf) > 0 {
			if _, err := m.c.nc.Write(buf); err != nil {
				m.mu.Lock()
				m.cut, m.queue = true, nil
				m.mu.Unlock()
				m.c.kill()
				return
			}
		}
		if last {
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

func cmdMonitor(s *Server, c *client, args [][]byte) {
	if c.mon.Load() != nil || c.monStarting != nil {
		return // already monitoring: no reply, as Redis
	}
	c.writeOK()
	// The hand-over waits until MONITOR is counted (dispatch): as in
	// Redis, a client that has its +OK finds it in the slow log and
	// commandstats.
	c.monStarting = &monitor{c: c, wake: make(chan struct{}, 1), gone: make(chan struct{}), done: make(chan struct{})}
}

// startMonitor makes the connection the monitor MONITOR prepared: from
// here its writer owns the socket, and this connection's replies (earlier
// ones of its pipeline first) go through the queue, in order with the
// lines.
func (c *client) startMonitor() {
	m := c.monStarting
	c.monStarting = nil
	c.mon.Store(m)
	c.flushOut()
	go m.run()
	c.s.monitors.add(c.s, m)
	c.hooks = c.s.hooks.Load()
}

// stopMonitor ends MONITOR on a connection that stays (RESET): the replies
// already queued go out, then the connection writes its own again.
func (c *client) stopMonitor() {
	c.monStarting = nil
	m := c.mon.Load()
	if m == nil {
		return
	}
	c.flushOut()
	c.s.monitors.remove(c.s, m)
	close(m.gone)
	<-m.done
	c.mon.Store(nil)
	c.hooks = c.s.hooks.Load()
}

// endMonitor detaches a monitor whose connection ends and lets its writer
// finish.
func (c *client) endMonitor() {
	m := c.mon.Load()
	if m == nil {
		return
	}
	c.s.monitors.remove(c.s, m)
	// A write the writer is blocked in gets the drain bound too.
	c.setWriteDeadline(time.Now().Add(ShutdownDrain))
	close(m.gone)
	<-m.done
}
