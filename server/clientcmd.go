package server

import (
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// CLIENT: a connection's name and library, its id, the connections
// (LIST, INFO, KILL), and pausing them (PAUSE, UNPAUSE), as Redis 7.0's
// clientCommand answers them.

// Bits of Server.hooks: what every connection must look at for each
// command while it is set. A connection loads the word once per read
// (client.hooks), so that with neither active a command pays one test of a
// field it owns.
const (
	hookPause   uint32 = 1 << iota // CLIENT PAUSE in force
	hookMonitor                    // a MONITOR is attached
)

func (s *Server) setHook(bit uint32, on bool) {
	if on {
		s.hooks.Or(bit)
	} else {
		s.hooks.And(^bit)
	}
}

var (
	errNoSuchClient  = errors.New("No such client")
	errClientID      = errors.New("client-id should be greater than 0")
	errInvalidID     = errors.New("Invalid client ID")
	errPauseMode     = errors.New("CLIENT PAUSE mode must be WRITE or ALL")
	errPauseTimeout  = errors.New("timeout is not an integer or out of range")
	errPauseNegative = errors.New("timeout is negative")
)

func cmdClient(s *Server, c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "setname" && len(args) == 3:
		if err := validName(args[2]); err != nil {
			c.writeError(err)
			return
		}
		c.mu.Lock()
		c.name = string(args[2])
		c.mu.Unlock()
		c.writeOK()
	case sub == "getname" && len(args) == 2:
		c.mu.Lock()
		name := c.name
		c.mu.Unlock()
		if name == "" {
			c.writeNil()
		} else {
			c.writeBulkString(name)
		}
	case sub == "id" && len(args) == 2:
		c.writeInt(c.id)
	case sub == "setinfo" && len(args) == 4:
		attr := strings.ToLower(string(args[2]))
		if attr != "lib-name" && attr != "lib-ver" {
			c.writeError(fmt.Errorf("Unrecognized option '%s'", args[2]))
			return
		}
		if err := validName(args[3]); err != nil {
			c.writeError(err)
			return
		}
		c.mu.Lock()
		if attr == "lib-name" {
			c.libName = string(args[3])
		} else {
			c.libVer = string(args[3])
		}
		c.mu.Unlock()
		c.writeOK()
	case sub == "list":
		clientList(s, c, args)
	case sub == "info" && len(args) == 2:
		c.writeVerbatim(c.info(c, argBytes(args)) + "\n")
	case sub == "kill":
		clientKill(s, c, args)
	case sub == "pause" && (len(args) == 3 || len(args) == 4):
		clientPause(s, c, args)
	case sub == "unpause" && len(args) == 2:
		s.pause.end(s)
		c.writeOK()
	case sub == "reply" && len(args) == 3:
		clientReply(c, args[2])
	case sub == "no-evict" && len(args) == 3:
		// Sluice never evicts clients (Redis's maxmemory-clients), so
		// there is nothing to protect a connection from: the flag is
		// accepted and kept for CLIENT LIST, as Redis shows it.
		switch {
		case isWord(args[2], "on"):
			c.noEvict.Store(true)
		case isWord(args[2], "off"):
			c.noEvict.Store(false)
		default:
			c.writeError(errSyntax)
			return
		}
		c.writeOK()
	default:
		c.writeError(fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try CLIENT HELP.", args[1]))
	}
}

// replyMode is what CLIENT REPLY set: replies sent, none, or none for the
// next command (SKIP). The read loop tests it once per command; only a
// silenced command steps it (dispatchSilenced).
type replyMode uint8

const (
	replyOn replyMode = iota
	replyOff
	replySkip     // the next command's replies are dropped
	replySkipNext // SKIP sent by a skipped command: the one after it is skipped too
)

// clientReply: CLIENT REPLY ON|OFF|SKIP, as Redis's: OFF and SKIP are not
// answered; SKIP while OFF changes nothing. Queued in a transaction, its
// reply keeps EXEC's array whole and the mode applies after the EXEC.
func clientReply(c *client, mode []byte) {
	switch {
	case isWord(mode, "on"):
		c.replyMode = replyOn
		c.writeOK()
		return
	case isWord(mode, "off"):
		c.replyMode = replyOff
	case isWord(mode, "skip"):
		switch c.replyMode {
		case replyOn:
			c.replyMode = replySkip // SKIP itself has no reply; the next command is skipped
		case replySkip:
			c.replyMode = replySkipNext
		}
	default:
		c.writeError(errSyntax)
		return
	}
	if c.inExec {
		c.writeOK()
	}
}

// dispatchSilenced runs a command whose replies CLIENT REPLY drops: its
// replies alone are encoded, then cut from out (flushOut cuts any it
// writes early). The mode is read after the command, so CLIENT REPLY ON
// is answered; then a skipped command's SKIP is spent.
func (c *client) dispatchSilenced(args [][]byte) {
	c.flushBatch()
	c.silentFrom = len(c.out)
	c.dispatch(args)
	c.flushBatch()
	if c.replyMode != replyOn && c.silentFrom >= 0 {
		c.out = c.out[:c.silentFrom]
	}
	c.silentFrom = -1
	switch c.replyMode {
	case replySkip:
		c.replyMode = replyOn
	case replySkipNext:
		c.replyMode = replySkip
	}
}

func argBytes(args [][]byte) int {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	return n
}

// Client types, as CLIENT LIST TYPE and CLIENT KILL TYPE name them: a
// Sluice connection is a pubsub one while it is subscribed, a normal one
// otherwise (a monitor too, as in Redis); none is a replica or a master.
const (
	clientNormal = iota
	clientPubSub
	clientOther
)

// clientTypeByName is Redis's getClientTypeByName.
func clientTypeByName(name []byte) (typ int, ok bool) {
	switch strings.ToLower(string(name)) {
	case "normal":
		return clientNormal, true
	case "pubsub":
		return clientPubSub, true
	case "slave", "replica", "master":
		return clientOther, true
	}
	return 0, false
}

// clientType is the connection's type.
func (c *client) clientType() int {
	if c.subsN.Load() > 0 {
		return clientPubSub
	}
	return clientNormal
}

func unknownClientType(name []byte) error {
	return fmt.Errorf("Unknown client type '%s'", name)
}

// clientsByID lists the open connections in id order (Redis lists them in
// the order they connected).
func (s *Server) clientsByID() []*client {
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for _, cl := range s.clients {
		list = append(list, cl)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	return list
}

// clientList: CLIENT LIST [TYPE type] | [ID id ...].
func clientList(s *Server, c *client, args [][]byte) {
	var list []*client
	switch {
	case len(args) == 4 && isWord(args[2], "type"):
		typ, ok := clientTypeByName(args[3])
		if !ok {
			c.writeError(unknownClientType(args[3]))
			return
		}
		for _, cl := range s.clientsByID() {
			if cl.clientType() == typ {
				list = append(list, cl)
			}
		}
	case len(args) > 3 && isWord(args[2], "id"):
		s.mu.Lock()
		for _, a := range args[3:] {
			id, err := engine.ParseInt64(a)
			if err != nil {
				s.mu.Unlock()
				c.writeError(errInvalidID)
				return
			}
			if cl := s.clients[id]; cl != nil {
				list = append(list, cl)
			}
		}
		s.mu.Unlock()
	case len(args) != 2:
		c.writeError(errSyntax)
		return
	default:
		list = s.clientsByID()
	}
	var b strings.Builder
	for _, cl := range list {
		b.WriteString(cl.info(c, argBytes(args)))
		b.WriteByte('\n')
	}
	c.writeVerbatim(b.String())
}

// clientKill: CLIENT KILL addr (OK, or No such client; it may kill the
// connection itself), or CLIENT KILL with filters, all of which must
// match (the number killed; SKIPME yes, the default, spares the
// connection itself).
func clientKill(s *Server, c *client, args [][]byte) {
	var addr, laddr, user string
	var hasAddr, hasLaddr, hasUser, hasType bool
	typ := clientNormal
	id := int64(0)
	skipme := true
	switch {
	case len(args) == 3:
		addr, hasAddr, skipme = string(args[2]), true, false
	case len(args) > 3:
		for i := 2; i < len(args); i += 2 {
			if i+1 >= len(args) {
				c.writeError(errSyntax)
				return
			}
			v := args[i+1]
			switch {
			case isWord(args[i], "id"):
				n, err := engine.ParseInt64(v)
				if err != nil || n < 1 {
					c.writeError(errClientID)
					return
				}
				id = n
			case isWord(args[i], "type"):
				t, ok := clientTypeByName(v)
				if !ok {
					c.writeError(unknownClientType(v))
					return
				}
				typ, hasType = t, true
			case isWord(args[i], "addr"):
				addr, hasAddr = string(v), true
			case isWord(args[i], "laddr"):
				laddr, hasLaddr = string(v), true
			case isWord(args[i], "user"):
				if s.acl.get(string(v)) == nil {
					c.writeError(fmt.Errorf("No such user '%s'", v))
					return
				}
				user, hasUser = string(v), true
			case isWord(args[i], "skipme"):
				switch {
				case isWord(v, "yes"):
					skipme = true
				case isWord(v, "no"):
					skipme = false
				default:
					c.writeError(errSyntax)
					return
				}
			default:
				c.writeError(errSyntax)
				return
			}
		}
	}
	killed, self := 0, false
	for _, cl := range s.clientsByID() {
		switch {
		case hasAddr && cl.addr != addr,
			hasLaddr && cl.nc.LocalAddr().String() != laddr,
			hasType && cl.clientType() != typ,
			id != 0 && cl.id != id,
			hasUser && cl.userName() != user,
			cl == c && skipme:
			continue
		}
		if cl == c {
			self = true
		} else {
			cl.kill()
		}
		killed++
	}
	switch {
	case len(args) > 3:
		c.writeInt(int64(killed))
	case killed == 0:
		c.writeError(errNoSuchClient)
	default:
		c.writeOK()
	}
	if self {
		c.quit = true // after its reply, as Redis's CLOSE_AFTER_REPLY
	}
}

// kill closes a connection at once, from another connection's goroutine:
// a Read or Write it is blocked in ends (the deadline first, so that a TLS
// close_notify cannot wait behind a blocked Write), and a command it holds
// for CLIENT PAUSE gives up. Whatever it still owed is dropped, as Redis's
// freeClient drops it.
//
// It leaves the registry at once, as Redis's freeClient: CLIENT LIST no
// longer shows it when its socket closes.
func (c *client) kill() {
	c.s.mu.Lock()
	delete(c.s.clients, c.id)
	c.s.mu.Unlock()
	c.killOnce.Do(func() { close(c.killed) })
	c.nc.SetDeadline(time.Now())
	c.nc.Close()
}

// wasKilled: CLIENT KILL closed the connection.
func (c *client) wasKilled() bool {
	select {
	case <-c.killed:
		return true
	default:
		return false
	}
}

// info is the connection's line of CLIENT LIST and CLIENT INFO, asked by
// asker (whose current command's arguments take argvMem bytes), with
// Redis 7.0's fields in its order, then 7.2's lib-name and lib-ver (Sluice
// has CLIENT SETINFO). Fields Sluice has no notion of hold the value Redis
// shows for a connection without it (docs/commands.md).
func (c *client) info(asker *client, argvMem int) string {
	self := asker == c
	c.mu.Lock()
	name, user, libName, libVer, resp3 := c.name, c.user.name, c.libName, c.libVer, c.resp3
	c.mu.Unlock()
	now := time.Now()
	flags := ""
	if c.monitoring.Load() {
		flags += "O"
	}
	if c.subsN.Load() > 0 {
		flags += "P"
	}
	multi, multiMem, qbuf, rbuf := c.multiN.Load(), c.multiMem.Load(), c.qbuf.Load(), c.rbufN.Load()
	obl := 0
	if self {
		multi, multiMem, qbuf, rbuf = -1, 0, int64(c.end-c.start), int64(len(c.rbuf))
		if c.multi != nil {
			multi, multiMem = int64(len(c.multi.queued)), int64(c.multi.bytes)
		}
		obl = len(c.out)
	} else {
		argvMem = 0 // between commands, as another connection sees it
	}
	if multi >= 0 {
		flags += "x"
	}
	if c.held.Load() {
		flags += "b"
	}
	if self && c.readonly {
		flags += "r" // READONLY: known to the connection itself only
	}
	if c.noEvict.Load() {
		flags += "e"
	}
	if flags == "" {
		flags = "N"
	}
	omem := int64(0)
	if q := c.oq.Load(); q != nil {
		omem = q.owed()
	}
	cmd := "NULL"
	if last := c.lastCmd.Load(); last != nil {
		cmd = last.fullname
	}
	resp := 2
	if resp3 {
		resp = 3
	}
	age := int64(now.Sub(c.created) / time.Second)
	idle := int64(time.Duration(c.s.coarseNow.Load()-c.lastIO.Load()) / time.Second)
	var b strings.Builder
	fmt.Fprintf(&b, "id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=%s db=0 sub=%d psub=%d ssub=%d multi=%d qbuf=%d qbuf-free=%d argv-mem=%d multi-mem=%d rbs=0 rbp=0 obl=%d oll=0 omem=%d tot-mem=%d events=r cmd=%s user=%s redir=-1 resp=%d lib-name=%s lib-ver=%s",
		c.id, c.addr, c.nc.LocalAddr(), connFD(c.nc), name, age, max(idle, 0), flags,
		c.subs.counts[subChannel].Load(), c.subs.counts[subPattern].Load(), c.subs.counts[subShard].Load(), multi, qbuf, rbuf-qbuf, argvMem, multiMem,
		obl, omem, rbuf+int64(argvMem)+multiMem+int64(obl)+omem, cmd, user, resp, libName, libVer)
	return b.String()
}

// describe is the connection's CLIENT LIST line, for logs and the ACL log
// written on its own goroutine.
func (c *client) describe() string { return c.info(c, 0) }

// connFD is the connection's file descriptor (under TLS, its TCP
// connection's), or -1.
func connFD(nc net.Conn) int {
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	raw.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// noteCommand records the command a connection runs for CLIENT LIST's
// cmd= (nil: an unknown one, which Redis shows as NULL), publishing it only
// when it changes: a pipeline of one command stores nothing.
func (c *client) noteCommand(cmd *command) {
	if c.last != cmd {
		c.last = cmd
		c.lastCmd.Store(cmd)
	}
}

// publish makes what CLIENT LIST shows of a connection to others current
// at the end of a read: the bytes it holds of an unfinished request, its
// buffer, its open transaction. Each is stored only when it changed.
func (c *client) publish() {
	if t := c.s.coarseNow.Load(); t != c.lastIOSeen {
		c.lastIOSeen = t
		c.lastIO.Store(t)
	}
	if q := int64(c.end - c.start); q != c.qbufSeen {
		c.qbufSeen = q
		c.qbuf.Store(q)
	}
	if n := int64(len(c.rbuf)); n != c.rbufSeen {
		c.rbufSeen = n
		c.rbufN.Store(n)
	}
	m, mm := int64(-1), int64(0)
	if c.multi != nil {
		m, mm = int64(len(c.multi.queued)), int64(c.multi.bytes)
	}
	if m != c.multiSeen {
		c.multiSeen = m
		c.multiN.Store(m)
		c.multiMem.Store(mm)
	}
}

// tickCoarse keeps coarseNow until Close.
func (s *Server) tickCoarse() {
	defer s.sweeperWG.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case t := <-tick.C:
			s.coarseNow.Store(t.UnixNano())
		}
	}
}

// CLIENT PAUSE.

type pauseMode int

const (
	pauseOff pauseMode = iota
	pauseWrite
	pauseAll
)

// pauseState is the server's CLIENT PAUSE: while mode is set, normal
// connections hold the commands it covers until it ends (at end, or
// UNPAUSE), waiting on done; a new pause while one is in force keeps the
// later end and the stricter mode, as Redis's pauseClients does.
type pauseState struct {
	mu    sync.Mutex
	mode  pauseMode
	until time.Time
	timer *time.Timer
	done  chan struct{}
}

// start pauses until until in mode m (or extends the pause in force).
func (p *pauseState) start(s *Server, m pauseMode, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == pauseOff {
		p.mode, p.until, p.done = m, until, make(chan struct{})
		p.timer = time.AfterFunc(time.Until(until), func() { p.expire(s) })
		s.setHook(hookPause, true)
		return
	}
	p.mode = max(p.mode, m)
	if until.After(p.until) {
		p.until = until
		p.timer.Reset(time.Until(until))
	}
}

// expire ends the pause at its end (a timer that fired before an
// extension re-arms for the new end).
func (p *pauseState) expire(s *Server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode == pauseOff {
		return
	}
	if left := time.Until(p.until); left > 0 {
		p.timer.Reset(left)
		return
	}
	p.endLocked(s)
}

// end is CLIENT UNPAUSE: the held commands run.
func (p *pauseState) end(s *Server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != pauseOff {
		p.endLocked(s)
	}
}

func (p *pauseState) endLocked(s *Server) {
	p.timer.Stop()
	p.mode = pauseOff
	close(p.done)
	s.setHook(hookPause, false)
}

// holding is the pause that holds cmd, and the channel closed
// when it ends; nil when none does. WRITE holds what may write: writes,
// decisions, scripts (which may do either: Redis's may-replicate), and an
// EXEC whose queue holds any of them.
func (p *pauseState) holding(c *client, cmd *command) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.mode {
	case pauseAll:
		return p.done
	case pauseWrite:
		if mayWrite(cmd) {
			return p.done
		}
		if cmd.name == "exec" && c.multi != nil {
			for _, q := range c.multi.queued {
				if mayWrite(q.cmd) {
					return p.done
				}
			}
		}
	}
	return nil
}

func mayWrite(cmd *command) bool {
	if cmd.flags&(flagWrite|flagDecision) != 0 {
		return true
	}
	switch cmd.name {
	case "eval", "evalsha", "fcall":
		return true
	}
	return false
}

// clientPause: CLIENT PAUSE timeout-ms [WRITE|ALL], checked in Redis's
// order (the mode, then the timeout).
func clientPause(s *Server, c *client, args [][]byte) {
	mode := pauseAll
	if len(args) == 4 {
		switch {
		case isWord(args[3], "write"):
			mode = pauseWrite
		case isWord(args[3], "all"):
		default:
			c.writeError(errPauseMode)
			return
		}
	}
	ms, err := engine.ParseInt64(args[2])
	switch {
	case err != nil:
		c.writeError(errPauseTimeout)
		return
	case ms < 0:
		c.writeError(errPauseNegative)
		return
	}
	until := time.Now().Add(time.Duration(min(ms, math.MaxInt64/int64(time.Millisecond))) * time.Millisecond)
	s.pause.start(s, mode, until)
	c.hooks = s.hooks.Load() // the rest of this pipeline is held too
	c.writeOK()
}

// hook is what dispatch does for a command while a pause or a monitor is
// active (Server.hooks): hold the command for the pause, refuse a
// monitor's keyspace commands, feed the monitors. false: the command is
// not to run (refused, or the connection was killed or the server closed
// while it was held).
func (c *client) hook(cmd *command, args [][]byte) bool {
	if c.hooks&hookPause != 0 {
		if done := c.s.pause.holding(c, cmd); done != nil {
			// The replies owed go out first, as Redis writes them while
			// the command waits.
			c.flushBatch()
			c.flushOut()
			c.held.Store(true)
			select {
			case <-done:
			case <-c.killed:
			case <-c.s.stop:
			}
			c.held.Store(false)
			if c.wasKilled() || c.s.isClosing() {
				c.quit = true
				return false
			}
			c.hooks = c.s.hooks.Load()
			if c.hooks&hookPause != 0 {
				return c.hook(cmd, args) // a new pause began
			}
		}
	}
	if c.hooks&hookMonitor != 0 {
		if c.monitoring.Load() && cmd.flags&(flagReadonly|flagWrite|flagDecision) != 0 {
			c.reject(errMonitorKeyspace)
			return false
		}
		if cmd.name == "reset" {
			// A monitor's RESET ends its monitoring before the command is
			// shown: as in Redis, its own line goes to the others only.
			c.stopMonitor()
		}
		if c.multi == nil || cmd.runsInMulti() {
			c.s.monitors.feed(c, cmd, args)
		}
	}
	return true
}
