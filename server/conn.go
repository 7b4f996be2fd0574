package server

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/script"
)

const (
	initialReadBuffer = 16 << 10
	flushThreshold    = 64 << 10 // write replies out mid-pipeline past this
)

var (
	errProtoBulk    = errors.New("Protocol error: invalid bulk length")
	errProtoRequest = errors.New("Protocol error: too big request")
)

// client is one connection. Only its goroutine touches it, except for the
// fields under mu, which CLIENT LIST reads from other connections.
type client struct {
	s       *Server
	nc      net.Conn
	id      int64
	addr    string
	local   bool
	created time.Time

	mu      sync.Mutex
	name    string
	libName string
	libVer  string

	// user is who the connection is authenticated as (the default user
	// until AUTH); written by the connection's goroutine under mu.
	user         *userRef
	keyBuf       []keyRef // scratch for ACL key checks
	authed       bool
	authFailures int
	// resp3 is the protocol HELLO chose: RESP3 types for maps, sets,
	// nulls, doubles and verbatim text; RESP2 otherwise. Written by the
	// connection's goroutine under mu (CLIENT LIST reads it), read by it
	// without.
	resp3    bool
	quit     bool
	readonly bool // READONLY: reads may be served by a follower
	// replyMode is CLIENT REPLY's; while a command's replies are dropped,
	// silentFrom is where they begin in out (-1: none are dropped).
	replyMode  replyMode
	silentFrom int
	inExec     bool // EXEC is running the queued connection commands
	// multi is the open transaction (MULTI), txState its reused
	// storage; watched the WATCHed keys; ownBatch runs connection-level
	// commands' engine work (EXEC, WATCH).
	multi    *txState
	txState  txState
	watched  []watchedKey
	ownBatch engine.Batch

	rbuf       []byte
	start, end int
	scan       reqScan // of the request at rbuf[start:]
	bigReplies int     // flagBigReply commands in batch
	// lastCommand is when the connection last sent a complete command
	// (the idle timeout counts from it), kept while idleSet: a timeout is
	// set and the read deadline with it.
	lastCommand time.Time
	idleSet     bool
	args        [][]byte
	out         []byte
	batch       engine.Batch
	slots       []slot
	// The output buffer limit (client-output-buffer-limit normal) counts
	// the reply bytes owed and not yet written: out, plus rest, the bytes
	// of the batch's replies not yet encoded (counted at the batch's first
	// write while a limit is set: restCounted). softSince is when they
	// went over the soft limit (zero: they are not over it); cut: the
	// connection was closed for a limit, nothing more is written.
	rest        int
	restCounted bool
	softSince   time.Time
	cut         bool

	acct callAcct // commandstats of the batch (cmdstats.go)
	// CLIENT LIST, KILL, PAUSE and MONITOR (clientcmd.go, monitor.go).
	// hooks is Server.hooks as of this read. The atomics are what other
	// connections read of this one, published when they change (the
	// *Seen fields are the values last published).
	hooks                         uint32
	last                          *command
	lastCmd                       atomic.Pointer[command]
	lastIO                        atomic.Int64 // unix ns of the last read
	qbuf, rbufN, multiN, multiMem atomic.Int64
	qbufSeen, rbufSeen, multiSeen int64
	lastIOSeen                    int64
	held, noEvict                 atomic.Bool
	killed                        chan struct{}
	killOnce                      sync.Once
	// oq is the queue whose writer owns the socket while the connection
	// monitors or is subscribed (outqueue.go); monitoring and subsN (its
	// subscriptions, pubsub.go) are what needs it.
	oq          atomic.Pointer[outQueue]
	monitoring  atomic.Bool
	monStarting bool // MONITOR ran; it starts once counted
	monLine     []byte
	subs        subscriptions
	subsN       atomic.Int64
	pushResp3   atomic.Bool // resp3, for publishers
}

// slot is one reply owed, in pipeline order: an engine reply, or an error
// found while parsing. id and args are the engine command's row and
// arguments, for commandstats and the slow log.
type slot struct {
	idx  int32
	id   int32
	err  error
	args [][]byte
}

func newClient(s *Server, nc net.Conn) *client {
	cl := &client{
		s:       s,
		nc:      nc,
		id:      s.nextID.Add(1),
		addr:    nc.RemoteAddr().String(),
		created: time.Now(),
		rbuf:    make([]byte, initialReadBuffer),
		keyBuf:  make([]keyRef, 0, 16),
		args:    make([][]byte, 256),
		killed:  make(chan struct{}),
	}
	cl.lastIOSeen = s.coarseNow.Load()
	cl.lastIO.Store(cl.lastIOSeen)
	cl.rbufSeen, cl.multiSeen = int64(len(cl.rbuf)), -1
	cl.rbufN.Store(cl.rbufSeen)
	cl.multiN.Store(-1)
	if tcp, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		cl.local = tcp.IP.IsLoopback()
	}
	cl.silentFrom = -1
	cl.user = s.acl.defaultUser()
	def := cl.user.rules.Load()
	cl.authed = def.enabled && def.nopass
	return cl
}

// interrupt wakes a connection blocked in Read so that it notices Close.
//
// Its writes get until the drain bound: replies already owed go out to a
// client that reads them, and a client that never reads (its socket's
// buffer full) cannot hold the shutdown up past the bound.
func (c *client) interrupt() {
	c.nc.SetReadDeadline(time.Now())
	c.nc.SetWriteDeadline(time.Unix(0, c.s.drainBy.Load()))
}

func (c *client) serve() {
	defer c.nc.Close()
	// Unlisted before the socket closes: a client that sees its
	// connection end finds it gone from CLIENT LIST, as in Redis.
	defer c.s.unlist(c)
	defer c.endQueue()      // MONITOR, SUBSCRIBE: the writer sends what is queued first
	defer c.leaveMonitors() // nothing more is queued
	defer c.endSubscriptions()
	defer c.unwatchAll()
	defer func() {
		// Nothing a client sends may take the server down; a bug that
		// panics here closes this connection only.
		if r := recover(); r != nil {
			c.s.log.Error("connection handler panicked; closing the connection", "client", c.addr, "panic", fmt.Sprint(r))
		}
	}()
	for !c.quit {
		if !c.setIdleDeadline() {
			return
		}
		if c.end == len(c.rbuf) {
			switch c.makeRoom() {
			case errProtoRequest:
				c.writeError(errProtoRequest)
				c.flushOut()
				return
			case errQueryLimit:
				c.closeQueryLimit()
				return
			}
		}
		n, err := c.nc.Read(c.rbuf[c.end:])
		c.end += n
		if n > 0 {
			if int64(c.end-c.start) > c.s.qbufLimit.Load() {
				// A buffer grown before the limit was lowered.
				c.closeQueryLimit()
				return
			}
			if c.process() > 0 && c.idleSet {
				c.lastCommand = time.Now()
			}
			c.flushOut()
			// Let the other connections run before reading again: the
			// client is likelier to have sent its next request by then,
			// and a read that finds nothing costs a system call and a park.
			runtime.Gosched()
		}
		if err != nil || c.s.isClosing() || c.wasKilled() {
			return
		}
	}
}

// setIdleDeadline makes the next Read end when the connection has sent
// no complete command for the timeout (CONFIG SET timeout), or clears the
// deadline when there is none. false: the server is closing (its
// interrupt's deadline must not be replaced).
func (c *client) setIdleDeadline() bool {
	idle := time.Duration(c.s.idle.Load())
	switch {
	case idle > 0:
		if !c.idleSet {
			// The clock starts when the timeout does (at connect, or at
			// CONFIG SET timeout): the time is read only while one is set.
			c.lastCommand = time.Now()
		}
		c.nc.SetReadDeadline(c.lastCommand.Add(idle))
		c.idleSet = true
	case c.idleSet:
		c.nc.SetReadDeadline(time.Time{})
		c.idleSet = false
	default:
		return true
	}
	return !c.s.isClosing() && !c.wasKilled()
}

// errQueryLimit: an unfinished request needs more than
// client-query-buffer-limit.
var errQueryLimit = errors.New("max query buffer length reached")

// makeRoom frees or adds buffer space for an unfinished request. It grows
// the buffer up to the smaller of proto-max-bulk-len plus 64 KiB and
// client-query-buffer-limit, and past it returns errProtoRequest or
// errQueryLimit, whichever is smaller.
func (c *client) makeRoom() error {
	if c.start > 0 {
		c.end = copy(c.rbuf, c.rbuf[c.start:c.end])
		c.start = 0
		return nil
	}
	limit, err := c.s.cfg.ProtoMaxBulkLen+64<<10, errProtoRequest
	if q := c.s.qbufLimit.Load(); q < int64(limit) {
		limit, err = int(q), errQueryLimit
	}
	if len(c.rbuf) >= limit {
		return err
	}
	grown := make([]byte, min(2*len(c.rbuf), limit))
	copy(grown, c.rbuf[:c.end])
	c.rbuf = grown
	return nil
}

// closeQueryLimit ends a connection whose unprocessed input passed
// client-query-buffer-limit, as Redis does: logged, no reply.
func (c *client) closeQueryLimit() {
	c.s.qbufClosed.Add(1)
	c.s.log.Warn("Closing client that reached max query buffer length", "client", c.describe(),
		"qbuf_initial_bytes", strconv.Quote(string(c.rbuf[c.start:min(c.end, c.start+64)])))
}

// nextCommand parses one command from packet. redcon's parser can index out
// of range on absurd bulk lengths; that is a protocol error, not a crash.
func nextCommand(packet []byte, argsbuf [][]byte) (complete bool, args [][]byte, leftover []byte, err error) {
	defer func() {
		if recover() != nil {
			complete, args, leftover, err = false, nil, nil, errProtoBulk
		}
	}()
	if len(packet) > 0 && packet[0] == '$' {
		// redcon reads '$' as tile38's native protocol; Redis has none.
		return false, nil, nil, errProtoBulk
	}
	complete, args, _, leftover, err = redcon.ReadNextCommand(packet, argsbuf)
	return complete, args, leftover, err
}

// process runs every complete command in the read buffer as one pipeline,
// and returns how many it ran.
func (c *client) process() int {
	c.hooks = c.s.hooks.Load() // CLIENT PAUSE, MONITOR (clientcmd.go)
	used := 0
	count := 0
	for c.start < c.end && !c.quit {
		var args [][]byte
		var err error
		whole := false
		if !c.scan.started {
			// The common case, a whole request in the buffer, is parsed
			// at once and its limits checked on what it holds; the scan
			// takes an unfinished or malformed request (once, so that no
			// request is parsed again on every read), reads its lengths
			// as they come and words its errors as Redis does.
			buf := c.rbuf[c.start:c.end]
			complete, parsed, leftover, perr := nextCommand(buf, c.args[used:])
			if perr == nil && complete {
				c.start += len(buf) - len(leftover)
				args, whole = parsed, true
				if err = c.checkArgs(args); err == errArgTooLarge {
					count++
					c.reject(err)
					continue
				}
			}
		}
		if !whole {
			var n int
			n, err = c.scan.next(c.rbuf[c.start:c.end], c.authed, c.s.cfg.ProtoMaxBulkLen)
			if err == nil && n == 0 {
				if c.scan.dropping() {
					// A refused request's bytes are let go as they come.
					c.start += c.scan.pos
					c.scan.dropped(c.scan.pos)
				}
				break
			}
			if err == nil {
				req := c.rbuf[c.start : c.start+n]
				c.start += n
				if c.scan.takeRefused() {
					count++
					c.reject(errArgTooLarge)
					continue
				}
				var complete bool
				var leftover []byte
				complete, args, leftover, err = nextCommand(req, c.args[used:])
				if err == nil && (!complete || len(leftover) > 0) {
					err = errProtoRequest // the scan and the parser disagree
				}
			}
		}
		if err != nil {
			c.protocolError(err)
			break
		}
		if len(args) > 0 && len(c.args) > used && &args[0] == &c.args[used] {
			used += len(args)
		}
		if len(args) == 0 {
			continue
		}
		count++
		if c.replyMode == replyOn {
			c.dispatch(args)
		} else {
			c.dispatchSilenced(args)
		}
		if len(c.batch.Cmds) >= c.s.cfg.MaxPipeline {
			c.flushBatch()
		}
	}
	c.flushBatch()
	c.publish() // for CLIENT LIST (clientcmd.go)
	c.s.commandsN.Add(int64(count))
	if c.start == c.end {
		c.start, c.end = 0, 0
	}
	if used > len(c.args)/2 && len(c.args) < 1<<16 {
		c.args = make([][]byte, 2*len(c.args))
	}
	return count
}

// protocolError answers err, after the replies owed, and ends the
// connection, as Redis does.
func (c *client) protocolError(err error) {
	c.flushBatch()
	msg := err.Error()
	if !strings.HasPrefix(msg, "Protocol error") {
		msg = "Protocol error: " + msg
	}
	c.writeError(errors.New(msg))
	c.quit = true
}

// checkArgs applies the scan's limits (reqscan.go) to a request parsed
// whole.
func (c *client) checkArgs(args [][]byte) error {
	if !c.authed && len(args) > unauthMaxArgs {
		return errMbulkUnauth
	}
	for _, a := range args {
		switch {
		case len(a) > c.s.cfg.ProtoMaxBulkLen:
			return errProtoBulk
		case !c.authed && len(a) > unauthMaxBulk:
			return errBulkUnauth
		case len(a) > largestArg:
			return errArgTooLarge
		}
	}
	return nil
}

// dispatch looks a command up, checks arity and AUTH, and either parses it
// into the pending engine batch or runs it on the connection.
func (c *client) dispatch(args [][]byte) {
	cmd := lookupCommand(args[0])
	c.noteCommand(cmd) // CLIENT LIST's cmd= (clientcmd.go)
	if cmd == nil {
		c.reject(unknownCommand(args))
		return
	}
	row := cmd // the (sub)command counted in commandstats
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		c.rejectCall(row, fmt.Errorf("wrong number of arguments for '%s' command", cmd.name))
		return
	}
	if len(cmd.subs) > 0 && len(args) > 1 {
		// A container's subcommand is looked up, and its arity checked,
		// before anything else, as Redis does.
		sub := cmd.subcommand(args)
		if sub == cmd {
			c.noteCommand(nil)
			c.reject(unknownSubcommand(cmd, args[1]))
			return
		}
		row = sub
		if (sub.arity > 0 && len(args) != sub.arity) || (sub.arity < 0 && len(args) < -sub.arity) {
			c.rejectCall(row, fmt.Errorf("wrong number of arguments for '%s' command", sub.fullname))
			return
		}
		c.noteCommand(sub)
	}
	if !c.authed && cmd.flags&flagNoAuth == 0 {
		c.rejectCall(row, errNoAuth)
		return
	}
	if c.multi != nil && cmd.notInMulti() {
		c.rejectCall(row, errNotInMulti)
		return
	}
	// The default user (every command, every key) costs one load and two
	// tests here; anything narrower is checked against its rules.
	if u := c.user.rules.Load(); !u.allCommands || !u.allKeys || !u.allChannels {
		if err := c.checkACL(u, cmd, args); err != nil {
			c.rejectCall(row, err)
			return
		}
	}
	if c.subsN.Load() > 0 && !c.resp3 && !allowedInSubscribed(cmd) {
		c.rejectCall(row, errSubscribedContext(row.fullname))
		return
	}
	// CLIENT PAUSE holds, MONITOR shows (clientcmd.go).
	if c.hooks != 0 && !c.hook(cmd, args) {
		return
	}
	if c.multi != nil && !cmd.runsInMulti() {
		// Over maxmemory, a transaction may not grow its queue either.
		if limit := c.s.backend.MaxMemory(); limit > 0 && c.s.backend.Stats().Memory >= limit {
			c.rejectCall(row, engine.ErrOOM)
			return
		}
		c.queue(cmd, args)
		return
	}
	if cmd.parse == nil {
		c.flushBatch() // server-level commands see every earlier command done
		if c.quit {
			return // its replies could not be written: the connection is closing
		}
		// [stats] timed alone; failed if it wrote an error reply.
		start, errs, mark := monoNow(), c.acct.errors, len(c.out)
		cmd.run(c.s, c, args)
		c.ranServerCommand(row, args, monoNow()-start, errs, mark)
		if c.monStarting {
			c.startMonitor()
		}
		return
	}
	ec := c.batch.Add()
	if err := c.parse(cmd, ec, args); err != nil {
		c.batch.Cmds = c.batch.Cmds[:len(c.batch.Cmds)-1]
		c.replyError(err)
		c.ranAlone(row, args, 0, true) // [stats] Redis refuses arguments as the command runs
		return
	}
	c.slots = append(c.slots, slot{idx: int32(len(c.batch.Cmds) - 1), id: int32(row.id), args: args})
	if cmd.flags&flagBigReply != 0 {
		if c.bigReplies++; c.bigReplies >= maxBigReplies {
			c.flushBatch()
		}
	}
}

// lookupCommand finds a command's row by name, in any case, without
// allocating.
func lookupCommand(name []byte) *command {
	var lower [32]byte
	if len(name) <= len(lower) {
		for i, ch := range name {
			if 'A' <= ch && ch <= 'Z' {
				ch += 'a' - 'A'
			}
			lower[i] = ch
		}
		name = lower[:len(name)]
	}
	return commands[string(name)]
}

// parse makes ec the engine command for args, finished with the server's
// state where the command needs it.
func (c *client) parse(cmd *command, ec *engine.Command, args [][]byte) error {
	if err := cmd.parseInto(ec, args); err != nil {
		return err
	}
	c.s.stampReqID(ec)
	if cmd.prepare != nil {
		return cmd.prepare(c, ec)
	}
	return nil
}

// checkACL refuses a command the connection's user may not run, or one
// touching a key it may not, and records the refusal (INFO, ACL LOG).
func (c *client) checkACL(u *aclUser, cmd *command, args [][]byte) error {
	d, at := u.check(cmd, args, c.keyBuf[:0])
	context := ""
	if c.multi != nil {
		context = "multi"
	}
	switch d {
	case aclDeniedCmd:
		c.s.cmdDenied.Add(1)
		name := cmd.subcommand(args).fullname
		c.s.aclLog.add(aclLogEntry{reason: "command", context: context, object: name, username: u.name, at: time.Now(), client: c.describe()})
		return &permError{command: name}
	case aclDeniedKey:
		c.s.keyDenied.Add(1)
		c.s.aclLog.add(aclLogEntry{reason: "key", context: context, object: string(args[at]), username: u.name, at: time.Now(), client: c.describe()})
		return &permError{}
	case aclDeniedChannel:
		c.s.channelDenied.Add(1)
		c.s.aclLog.add(aclLogEntry{reason: "channel", context: context, object: string(args[at]), username: u.name, at: time.Now(), client: c.describe()})
		return errChannelDenied
	}
	return nil
}

// userName is the connection's user, for ACL WHOAMI and CLIENT LIST.
func (c *client) userName() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user.name
}

func unknownSubcommand(cmd *command, sub []byte) error {
	name := string(sub)
	if len(name) > 128 {
		name = name[:128]
	}
	return fmt.Errorf("unknown subcommand '%s'. Try %s HELP.", name, strings.ToUpper(cmd.name))
}

func unknownCommand(args [][]byte) error {
	var b strings.Builder
	// Redis formats these as C strings: each stops at a NUL byte.
	cString := func(a []byte) string {
		if i := bytes.IndexByte(a, 0); i >= 0 {
			a = a[:i]
		}
		return string(a)
	}
	name := cString(args[0])
	if len(name) > 128 {
		name = name[:128]
	}
	fmt.Fprintf(&b, "unknown command '%s', with args beginning with: ", name)
	for i, a := range args[1:] {
		if i == 16 {
			break
		}
		s := cString(a)
		if len(s) > 128 {
			s = s[:128]
		}
		fmt.Fprintf(&b, "'%s' ", s)
	}
	return errors.New(b.String())
}

// replyError owes an error reply in pipeline order.
func (c *client) replyError(err error) {
	if len(c.slots) == 0 {
		c.writeError(err)
		return
	}
	c.slots = append(c.slots, slot{idx: -1, err: err})
}

// flushBatch executes the pending engine commands and writes every owed
// reply in order.
func (c *client) flushBatch() {
	if len(c.slots) == 0 {
		return
	}
	var took time.Duration // [stats] the batch's execution, shared by its commands
	if len(c.batch.Cmds) > 0 {
		c.batch.ReadOnly = c.readonly
		start := monoNow()
		c.s.backend.Execute(&c.batch, c.s.clock.Now())
		took = monoNow() - start
	}
	for i, sl := range c.slots {
		if sl.idx < 0 {
			c.writeError(sl.err)
			continue
		}
		errs := c.acct.errors
		c.writeReply(&c.batch.Replies[sl.idx])
		c.batchCall(sl.id, c.acct.errors > errs) // [stats]
		c.batch.Replies[sl.idx] = engine.Reply{} // its items may go as soon as it is written
		if len(c.out) > flushThreshold {
			if c.flushPart(i); c.cut {
				break
			}
		}
	}
	if len(c.batch.Cmds) > 0 {
		c.batchDone(took, len(c.batch.Cmds)) // [stats]
	}
	c.rest, c.restCounted = 0, false
	c.slots = c.slots[:0]
	c.batch.Reset()
	c.bigReplies = 0
	if len(c.out) > flushThreshold {
		c.flushOut()
	}
}

// flushPart writes the replies encoded so far, after the batch's slot i,
// keeping count of the batch's replies still owed while an output buffer
// limit is set.
func (c *client) flushPart(i int) {
	if l := &c.s.obuf.Load()[ClassNormal]; l.Hard != 0 || l.Soft != 0 {
		if c.restCounted {
			// out holds the replies encoded since the last write: they
			// were counted in rest.
			c.rest = max(c.rest-len(c.out), 0)
		} else {
			c.rest, c.restCounted = 0, true
			for _, sl := range c.slots[i+1:] {
				if sl.idx < 0 {
					c.rest += errorBytes(sl.err)
				} else {
					c.rest += c.replyBytes(&c.batch.Replies[sl.idx])
				}
			}
		}
	}
	c.flushOut()
}

func (c *client) flushOut() {
	if len(c.out) == 0 {
		return
	}
	if c.cut {
		c.out = c.out[:0]
		return
	}
	if c.silentFrom >= 0 {
		// CLIENT REPLY OFF or SKIP: the command's replies are dropped.
		c.out, c.silentFrom = c.out[:c.silentFrom], 0
	}
	if q := c.oq.Load(); q != nil {
		// MONITOR, SUBSCRIBE: its writer owns the socket (outqueue.go).
		q.push(c.s, c.out)
		c.out = c.out[:0]
		c.releaseHeld(q)
		return
	}
	if l := &c.s.obuf.Load()[ClassNormal]; l.Hard != 0 || l.Soft != 0 || !c.softSince.IsZero() {
		c.writeLimited(l)
	} else if _, err := c.nc.Write(c.out); err != nil {
		c.quit = true
	}
	if cap(c.out) > 1<<20 {
		c.out = nil
	} else {
		c.out = c.out[:0]
	}
}

// replyBufferBytes are the reply bytes a Redis connection holds in its own
// buffer, which its output buffer limits do not count: a connection owing
// less is never closed for them, however low they are set.
const replyBufferBytes = 16 << 10

// writeLimited writes out under the output buffer limit l, as Redis
// enforces client-output-buffer-limit: owing l.Hard bytes or more (past
// replyBufferBytes) closes the connection at once; owing l.Soft or more
// continuously for more than l.SoftSeconds (counted in whole seconds of
// the clock, as Redis counts) does too. Sluice writes synchronously, so
// what keeps the bytes owed over the soft limit is a write that blocks:
// the write's deadline is when they would have been over it too long.
func (c *client) writeLimited(l *OutputBufferLimit) {
	owed := len(c.out) + c.rest
	if over(owed, l.Hard) {
		c.cutOff("scheduled to be closed ASAP", owed)
		return
	}
	if over(owed, l.Soft) {
		if c.softSince.IsZero() {
			c.softSince = time.Now()
		}
		c.setWriteDeadline(c.softSince.Truncate(time.Second).Add(time.Duration(l.SoftSeconds+1) * time.Second))
	} else if !c.softSince.IsZero() {
		c.endSoft()
	}
	if _, err := c.nc.Write(c.out); err != nil {
		if !c.softSince.IsZero() && errors.Is(err, os.ErrDeadlineExceeded) && c.s.drainBy.Load() == 0 {
			c.cutOff("closed", owed)
		}
		c.quit = true
		return
	}
	if !c.softSince.IsZero() && !over(c.rest, l.Soft) {
		c.endSoft()
	}
}

// over reports whether owing owed bytes reaches limit (0: none), counting
// what passes replyBufferBytes.
func over(owed int, limit uint64) bool {
	return limit != 0 && owed > replyBufferBytes && uint64(owed-replyBufferBytes) >= limit
}

// cutOff closes the connection for its output buffer limit, as Redis logs
// it.
func (c *client) cutOff(how string, owed int) {
	c.cut, c.quit = true, true
	c.s.obufClosed.Add(1)
	c.s.log.Warn("Client "+how+" for overcoming of output buffer limits.", "client", c.describe(), "owed", owed)
}

// endSoft: the bytes owed are under the soft limit again.
func (c *client) endSoft() {
	c.softSince = time.Time{}
	c.setWriteDeadline(time.Time{})
}

// setWriteDeadline sets the write deadline to d, or to the end of Close's
// drain if that comes first (the drain's own deadline must not be lost).
func (c *client) setWriteDeadline(d time.Time) {
	c.nc.SetWriteDeadline(d)
	if by := c.s.drainBy.Load(); by != 0 && (d.IsZero() || by < d.UnixNano()) {
		c.nc.SetWriteDeadline(time.Unix(0, by))
	}
}

// replyBytes is about how many bytes r takes encoded (exactly, but for
// errors and doubles), for the output buffer limit.
func (c *client) replyBytes(r *engine.Reply) int {
	switch r.Kind {
	case engine.ReplyNil, engine.ReplyNilArray:
		return 5
	case engine.ReplyOK:
		return 5
	case engine.ReplyInt, engine.ReplyBool:
		return 3 + intLen(r.Int)
	case engine.ReplyBulk:
		n := len(r.Str)
		if r.Bulk != nil {
			n = len(r.Bulk)
		}
		return 5 + intLen(int64(n)) + n
	case engine.ReplyStatus:
		return 3 + len(r.Str)
	case engine.ReplyDecision:
		round := engine.SecondsRoundedUp
		if r.MS {
			round = engine.MillisRoundedUp
		}
		return 4 + 4 + 12 + intLen(r.Dec.Limit) + intLen(r.Dec.Remaining) + intLen(round(r.Dec.RetryAfter)) + intLen(round(r.Dec.ResetAfter))
	case engine.ReplyReservation:
		return 4 + 4 + 12 + 20 + 20 + 20
	case engine.ReplyError:
		return errorBytes(r.Err)
	case engine.ReplyDouble:
		return 32
	case engine.ReplyBigNumber:
		return 8 + len(r.Str)
	}
	n := 3 + intLen(int64(len(r.Items)))
	for i := range r.Items {
		n += c.replyBytes(&r.Items[i])
	}
	if r.Kind == engine.ReplyPairs && c.resp3 {
		n += 4 * len(r.Items) / 2
	}
	return n
}

// errorBytes is about how many bytes err's reply takes.
func errorBytes(err error) int { return 8 + len(err.Error()) }

// intLen is how many characters n takes in decimal.
func intLen(n int64) int {
	l, u := 1, uint64(n)
	if n < 0 {
		l, u = 2, uint64(-(n+1))+1
	}
	for u >= 10 {
		u /= 10
		l++
	}
	return l
}

// Reply writers: RESP2 through redcon's encoders.

// writeError writes an error reply, counted in errorstats ([stats]).
func (c *client) writeError(err error) {
	text := errorText(err)
	c.acct.errors++
	if !isCommandError(err) {
		c.s.stats.countError(text)
	}
	c.out = redcon.AppendError(c.out, text)
}
func (c *client) writeOK()           { c.out = redcon.AppendOK(c.out) }
func (c *client) writeInt(n int64)   { c.out = redcon.AppendInt(c.out, n) }
func (c *client) writeBulk(b []byte) { c.out = redcon.AppendBulk(c.out, b) }
func (c *client) writeBulkString(s string) {
	c.out = redcon.AppendBulkString(c.out, s)
}
func (c *client) writeStatus(s string) { c.out = redcon.AppendString(c.out, s) }
func (c *client) writeArray(n int)     { c.out = redcon.AppendArray(c.out, n) }

// writeHelp writes a HELP subcommand's lines, as status replies.
func (c *client) writeHelp(lines []string) {
	c.writeArray(len(lines))
	for _, l := range lines {
		c.writeStatus(l)
	}
}

// Writers whose RESP3 form differs. RESP2 connections pay one predictable
// branch on these only; decisions (arrays of integers) are the same bytes
// in both and never reach them.

func (c *client) writeNil() {
	if c.resp3 {
		c.out = append(c.out, "_\r\n"...)
		return
	}
	c.out = redcon.AppendNull(c.out)
}

// writeNilArray is a missing array: *-1 in RESP2, _ in RESP3.
func (c *client) writeNilArray() {
	if c.resp3 {
		c.out = append(c.out, "_\r\n"...)
		return
	}
	c.out = append(c.out, "*-1\r\n"...)
}

// writeMap starts a map of n pairs: a flat array of 2n in RESP2.
func (c *client) writeMap(n int) {
	if !c.resp3 {
		c.writeArray(2 * n)
		return
	}
	c.out = append(c.out, '%')
	c.out = strconv.AppendInt(c.out, int64(n), 10)
	c.out = append(c.out, '\r', '\n')
}

// writeSet starts a set of n: an array in RESP2.
func (c *client) writeSet(n int) {
	if !c.resp3 {
		c.writeArray(n)
		return
	}
	c.out = append(c.out, '~')
	c.out = strconv.AppendInt(c.out, int64(n), 10)
	c.out = append(c.out, '\r', '\n')
}

// writeDouble writes f as Redis does (%.17g): a bulk string in RESP2, a
// double in RESP3.
func (c *client) writeDouble(f float64) {
	if !c.resp3 {
		c.writeBulkString(engine.FormatDouble(f))
		return
	}
	c.out = append(c.out, ',')
	c.out = append(c.out, engine.FormatDouble(f)...)
	c.out = append(c.out, '\r', '\n')
}

// writeVerbatim writes text (INFO, CLIENT INFO): a bulk string in RESP2,
// a verbatim string of format txt in RESP3.
func (c *client) writeVerbatim(text string) {
	if !c.resp3 {
		c.writeBulkString(text)
		return
	}
	c.out = append(c.out, '=')
	c.out = strconv.AppendInt(c.out, int64(len(text)+4), 10)
	c.out = append(c.out, "\r\ntxt:"...)
	c.out = append(c.out, text...)
	c.out = append(c.out, '\r', '\n')
}

func (c *client) writeReply(r *engine.Reply) {
	switch r.Kind {
	case engine.ReplyNil:
		c.writeNil()
	case engine.ReplyOK:
		c.writeOK()
	case engine.ReplyInt:
		c.writeInt(r.Int)
	case engine.ReplyBulk:
		if r.Bulk != nil {
			c.writeBulk(r.Bulk)
		} else {
			c.writeBulkString(r.Str)
		}
	case engine.ReplyStatus:
		c.writeStatus(r.Str)
	case engine.ReplyDecision:
		d := &r.Dec
		round := engine.SecondsRoundedUp
		if r.MS {
			round = engine.MillisRoundedUp
		}
		limited := int64(0)
		if d.Limited {
			limited = 1
		}
		c.writeArray(5)
		c.writeInt(limited)
		c.writeInt(d.Limit)
		c.writeInt(d.Remaining)
		c.writeInt(round(d.RetryAfter))
		c.writeInt(round(d.ResetAfter))
	case engine.ReplyReservation:
		v := engine.ReservationFields(r)
		c.writeArray(len(v))
		for _, n := range v {
			c.writeInt(n)
		}
	case engine.ReplyError:
		c.writeError(r.Err)
	case engine.ReplyArray:
		c.writeArray(len(r.Items))
		for i := range r.Items {
			c.writeReply(&r.Items[i])
		}
	case engine.ReplyMap:
		c.writeMap(len(r.Items) / 2)
		for i := range r.Items {
			c.writeReply(&r.Items[i])
		}
	case engine.ReplyNilArray:
		c.writeNilArray()
	case engine.ReplySet:
		c.writeSet(len(r.Items))
		for i := range r.Items {
			c.writeReply(&r.Items[i])
		}
	case engine.ReplyDouble:
		c.writeDouble(r.Float)
	case engine.ReplyBool:
		switch {
		case !c.resp3:
			c.writeInt(r.Int)
		case r.Int != 0:
			c.out = append(c.out, "#t\r\n"...)
		default:
			c.out = append(c.out, "#f\r\n"...)
		}
	case engine.ReplyBigNumber:
		if !c.resp3 {
			c.writeBulkString(r.Str)
			break
		}
		c.out = append(c.out, '(')
		c.out = append(c.out, r.Str...)
		c.out = append(c.out, '\r', '\n')
	case engine.ReplyPairs:
		// member, score, member, score: flat in RESP2, [member, score]
		// pairs in RESP3, as Redis answers ZRANGE ... WITHSCORES.
		if !c.resp3 {
			c.writeArray(len(r.Items))
			for i := range r.Items {
				c.writeReply(&r.Items[i])
			}
			break
		}
		c.writeArray(len(r.Items) / 2)
		for i := 0; i+1 < len(r.Items); i += 2 {
			c.writeArray(2)
			c.writeReply(&r.Items[i])
			c.writeReply(&r.Items[i+1])
		}
	default:
		c.writeError(errors.New("internal error: reply kind " + strconv.Itoa(int(r.Kind))))
	}
}

// isCommandError reports whether err is a script's reply passing on the
// error of one of its commands, counted in errorstats already.
func isCommandError(err error) bool {
	var ce script.CommandError
	return errors.As(err, &ce)
}
