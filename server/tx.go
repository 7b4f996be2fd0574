package server

import (
	"errors"

	"github.com/sluicehq/sluice/engine"
)

// Transactions: MULTI queues a connection's commands, EXEC runs them as
// one engine OpExec (atomic across shards), DISCARD drops them; WATCH
// makes EXEC answer nil when a watched key changed. As in Redis, a command
// refused while queueing (unknown, wrong arity, no permission, over
// maxmemory) makes EXEC fail with EXECABORT; a command that fails while
// running is just that command's error reply. Connection-level commands
// queued in a transaction run at EXEC, in their places in the reply, after
// the data commands (they read no data).

var (
	errExecAbort      = errors.New("Transaction discarded because of previous errors.")
	errExecNoMulti    = errors.New("EXEC without MULTI")
	errDiscardNoMulti = errors.New("DISCARD without MULTI")
	errMultiNested    = errors.New("MULTI calls can not be nested")
	errWatchInMulti   = errors.New("WATCH inside MULTI is not allowed")
	errNotInMulti     = errors.New("Command not allowed inside a transaction")
	errQueueTooLong   = errors.New("the transaction is too long: at most 1048576 commands and 64 MiB of arguments may be queued")
)

// txPermError: a queued command the user may no longer run at EXEC.
type txPermError struct{ reason string }

func (e *txPermError) Error() string {
	return "ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: " + e.reason
}

const (
	maxQueuedCommands = 1 << 20
	maxQueuedBytes    = 64 << 20
)

// txState is a connection's open transaction. A connection keeps one and
// reuses its buffers from one transaction to the next.
type txState struct {
	queued []queuedCommand
	bytes  int
	// aborted: a command was refused while queueing, so EXEC discards.
	aborted bool
	// buf holds the queued arguments' bytes, args their slices.
	buf  []byte
	args [][]byte
	// EXEC's scratch: where each reply comes from, the engine command.
	at   []queuedAt
	exec engine.Command
}

func (tx *txState) reset() {
	clear(tx.queued)
	tx.queued, tx.bytes, tx.aborted = tx.queued[:0], 0, false
	tx.buf, tx.args, tx.at = tx.buf[:0], tx.args[:0], tx.at[:0]
}

type queuedCommand struct {
	cmd  *command
	args [][]byte // copies: the read buffer is reused
}

// watchedKey is one WATCH, as the engine described the key then.
type watchedKey struct {
	key                  string
	version, live, print int64
}

func txCommands() []*command {
	return []*command{
		{name: "multi", cats: catTransaction, arity: 1, flags: flagFast | flagNoScript | flagLoading | flagStale, group: "transactions", since: "1.2.0",
			summary: "Start a transaction: queue the commands that follow until EXEC.", run: cmdMulti},
		{name: "exec", cats: catTransaction, arity: 1, flags: flagNoScript | flagLoading | flagStale, group: "transactions", since: "1.2.0",
			summary: "Run the queued commands atomically; nil if a watched key changed.", run: cmdExec},
		{name: "discard", cats: catTransaction, arity: 1, flags: flagFast | flagNoScript | flagLoading | flagStale, group: "transactions", since: "2.0.0",
			summary: "Drop the queued commands.", run: cmdDiscard},
		{name: "watch", cats: catTransaction, keyPerm: permRead, arity: -2, flags: flagFast | flagNoScript | flagLoading | flagStale, firstKey: 1, lastKey: -1, step: 1, group: "transactions", since: "2.2.0",
			summary: "Make the next EXEC fail if any of the keys changes.", args: []argSpec{many(key("key"))}, run: cmdWatch},
		{name: "unwatch", cats: catTransaction, arity: 1, flags: flagFast | flagNoScript | flagLoading | flagStale, group: "transactions", since: "2.2.0",
			summary: "Forget the watched keys.", run: cmdUnwatch},
	}
}

// runsInMulti: the commands a transaction runs at once instead of
// queueing, as Redis does.
func (cmd *command) runsInMulti() bool {
	switch cmd.name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return true
	}
	return false
}

// notInMulti: the commands Redis refuses inside a transaction.
func (cmd *command) notInMulti() bool { return cmd.name == "save" }

// queue adds a command to the open transaction and replies QUEUED.
func (c *client) queue(cmd *command, args [][]byte) {
	tx := c.multi
	size := 0
	for _, a := range args {
		size += len(a)
	}
	if len(tx.queued) >= maxQueuedCommands || tx.bytes+size > maxQueuedBytes {
		c.reject(errQueueTooLong)
		return
	}
	if !tx.aborted {
		// Copied into the transaction's own buffer: the read buffer is
		// reused. Slices made before the buffer grows keep the old array.
		first := len(tx.args)
		for _, a := range args {
			start := len(tx.buf)
			tx.buf = append(tx.buf, a...)
			tx.args = append(tx.args, tx.buf[start:len(tx.buf):len(tx.buf)])
		}
		tx.queued = append(tx.queued, queuedCommand{cmd: cmd, args: tx.args[first:len(tx.args):len(tx.args)]})
		tx.bytes += size
	}
	c.writeStatus("QUEUED")
}

// reject answers a command refused before it ran; inside a transaction
// that also dooms the EXEC.
func (c *client) reject(err error) {
	if c.multi != nil {
		c.multi.aborted = true
	}
	c.replyError(err)
}

// execAbortError: EXEC itself was refused (wrong arity, no permission,
// not authenticated). As Redis's execCommandAbort, that discards the
// transaction, in MULTI or not, and the reply names the refusal.
type execAbortError struct{ cause error }

func (e *execAbortError) Error() string { return e.cause.Error() }

// abortExec answers an EXEC refused before it ran: the transaction and the
// watched keys are dropped, as by DISCARD.
func (c *client) abortExec(err error) {
	c.multi = nil
	c.unwatchAll()
	c.replyError(&execAbortError{cause: err})
}

func cmdMulti(s *Server, c *client, args [][]byte) {
	if c.multi != nil {
		c.writeError(errMultiNested)
		return
	}
	c.txState.reset()
	c.multi = &c.txState
	c.writeOK()
}

func cmdDiscard(s *Server, c *client, args [][]byte) {
	if c.multi == nil {
		c.writeError(errDiscardNoMulti)
		return
	}
	c.multi = nil
	c.unwatchAll()
	c.writeOK()
}

func cmdWatch(s *Server, c *client, args [][]byte) {
	if c.multi != nil {
		c.writeError(errWatchInMulti)
		return
	}
	_, cluster := s.replicator()
	var cmds []engine.Command
	var keys []string
	for _, k := range args[1:] {
		if c.watching(string(k)) || containsString(keys, string(k)) {
			continue
		}
		wc := engine.Command{Op: engine.OpWatch, Key: k}
		if cluster {
			wc.N[0] = 1 // the fingerprint only: nodes share no registry
		}
		cmds = append(cmds, wc)
		keys = append(keys, string(k))
	}
	replies := c.execEngine(cmds...)
	for i, r := range replies {
		if r.Kind == engine.ReplyError {
			c.writeReply(&r)
			return
		}
		c.watched = append(c.watched, watchedKey{key: keys[i], version: r.Items[0].Int, live: r.Items[1].Int, print: r.Items[2].Int})
	}
	c.writeOK()
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *client) watching(key string) bool {
	for _, w := range c.watched {
		if w.key == key {
			return true
		}
	}
	return false
}

func cmdUnwatch(s *Server, c *client, args [][]byte) {
	c.unwatchAll()
	c.writeOK()
}

// unwatchAll drops the connection's WATCH registrations.
func (c *client) unwatchAll() {
	if len(c.watched) == 0 {
		return
	}
	if _, cluster := c.s.replicator(); !cluster {
		cmds := make([]engine.Command, len(c.watched))
		for i, w := range c.watched {
			cmds[i] = engine.Command{Op: engine.OpUnwatch, Key: []byte(w.key)}
		}
		c.execEngine(cmds...)
	}
	c.watched = nil
}

// queuedAt is where one queued command's reply comes from.
type queuedAt struct {
	engine int // index among the engine commands, or -1
	err    error
}

func cmdExec(s *Server, c *client, args [][]byte) {
	tx := c.multi
	if tx == nil {
		c.writeError(errExecNoMulti)
		return
	}
	c.multi = nil
	if tx.aborted {
		c.unwatchAll()
		c.writeError(errExecAbort)
		return
	}
	_, cluster := s.replicator()
	tx.exec = engine.Command{Op: engine.OpExec, N: [4]int64{int64(len(c.watched))}, Sub: tx.exec.Sub[:0]}
	exec := &tx.exec
	for _, w := range c.watched {
		check := engine.Command{Op: engine.OpWatchCheck, Key: []byte(w.key), N: [4]int64{w.version, w.live, w.print, 1}}
		if cluster {
			check.N[3] = 0
		}
		exec.Sub = append(exec.Sub, check)
	}
	// The engine releases the registrations as it checks them.
	c.watched = nil
	at := tx.at[:0]
	for range tx.queued {
		at = append(at, queuedAt{})
	}
	tx.at = at
	engineCmds := 0
	for i, q := range tx.queued {
		at[i].engine = -1
		if err := c.recheckACL(q.cmd, q.args); err != nil {
			at[i].err = err
			continue
		}
		if q.cmd.parse == nil {
			continue
		}
		// Reuse the slot's Args and Sub from the last transaction.
		if n := len(exec.Sub); n < cap(exec.Sub) {
			exec.Sub = exec.Sub[:n+1]
			sub := &exec.Sub[n]
			*sub = engine.Command{Args: sub.Args[:0], Sub: sub.Sub[:0]}
		} else {
			exec.Sub = append(exec.Sub, engine.Command{})
		}
		if err := c.parse(q.cmd, &exec.Sub[len(exec.Sub)-1], q.args); err != nil {
			exec.Sub = exec.Sub[:len(exec.Sub)-1]
			at[i].err = err
			continue
		}
		at[i].engine = engineCmds
		engineCmds++
	}
	var replies []engine.Reply
	if len(exec.Sub) > 0 {
		r := c.execEngine(*exec)[0]
		switch r.Kind {
		case engine.ReplyNilArray:
			c.writeNilArray()
			return
		case engine.ReplyError:
			c.writeReply(&r)
			return
		}
		replies = r.Items
	}
	c.writeArray(len(tx.queued))
	c.inExec = true
	defer func() { c.inExec = false }()
	for i, q := range tx.queued {
		switch {
		case at[i].err != nil:
			c.writeError(at[i].err)
		case at[i].engine >= 0:
			c.writeReply(&replies[at[i].engine])
		default:
			q.cmd.run(s, c, q.args)
		}
	}
}

// recheckACL: EXEC checks each queued command against the user's rules
// again, in case they changed since it was queued.
func (c *client) recheckACL(cmd *command, args [][]byte) error {
	u := c.user.rules.Load()
	if u.allCommands && u.allKeys && u.allChannels {
		return nil
	}
	switch d, _ := u.check(cmd, args, c.keyBuf[:0]); d {
	case aclDeniedCmd:
		return &txPermError{reason: "no permission to execute the command or subcommand"}
	case aclDeniedKey:
		return &txPermError{reason: "no permission to touch the specified keys"}
	case aclDeniedChannel:
		return &txPermError{reason: "no permission to access one of the channels used as arguments"}
	}
	return nil
}

// execEngine runs engine commands for a connection-level command (WATCH,
// EXEC, OBJECT) as one batch of their own and returns the replies, valid
// until the next call.
func (c *client) execEngine(cmds ...engine.Command) []engine.Reply {
	if len(cmds) == 0 {
		return nil
	}
	b := &c.ownBatch
	b.Reset()
	for _, cmd := range cmds {
		*b.Add() = cmd
	}
	b.ReadOnly = c.readonly
	c.s.backend.Execute(b, c.s.clock.Now())
	return b.Replies
}
