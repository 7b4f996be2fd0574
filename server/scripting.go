package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/script"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT. The server
// turns EVALSHA into the body it names before the engine sees it (so a
// replicated log carries the body), checks the script's shebang flags,
// and serves as the engine's ScriptRunner: a script runs on the goroutine
// holding its shards, and its redis.call is parsed with this command table
// and executed on the held tables through engine.ScriptRun.Exec.

var (
	errNoScript     = engine.RawError("NOSCRIPT No matching script. Please use EVAL.")
	errNotBusy      = engine.RawError("NOTBUSY No scripts in execution right now.")
	errUnkillable   = engine.RawError("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.")
	errUnkillableRL = engine.RawError("UNKILLABLE The busy script runs on every node of the cluster from the replicated log and cannot be killed on one of them.")
	errROWithWrites = errors.New("Can not execute a script with write flag using *_ro command.")
	errScriptOOM    = engine.RawError("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'")
	errNumKeysBig   = errors.New("Number of keys can't be greater than number of args")
	errNumKeysNeg   = errors.New("Number of keys can't be negative")
)

// DefaultBusyThreshold is Redis's busy-reply-threshold (lua-time-limit):
// past it a running script's shards answer BUSY and SCRIPT KILL may stop
// it.
const DefaultBusyThreshold = 5 * time.Second

// Scripts is the script cache and runner one server and its engine share:
// build it first, pass it as engine.Config.Scripts and Config.Scripts.
type Scripts struct {
	lua  *script.Engine
	log  *slog.Logger
	busy atomic.Int64 // busy threshold, ns
	// acl is the server's users, for the permissions scripts run with.
	acl atomic.Pointer[ACL]
	// server counts the scripts' commands in its statistics and shows
	// them to its monitors.
	server atomic.Pointer[Server]

	mu      sync.Mutex
	running map[*scriptRun]struct{} // scripts past the threshold
	closing bool                    // shutting down: stop busy scripts at once

	runs sync.Pool // *scriptRun

	accel accel
}

// NewScripts returns an empty script cache with Redis's busy threshold.
func NewScripts(log *slog.Logger) *Scripts {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scripts{lua: script.New(script.Config{}), log: log, running: map[*scriptRun]struct{}{}}
	s.accel.counts = make([]scriptCounts, len(knownScripts))
	s.busy.Store(int64(DefaultBusyThreshold))
	return s
}

// SetBusyThreshold changes busy-reply-threshold for scripts that start
// after the call; 0 means scripts never turn busy.
func (s *Scripts) SetBusyThreshold(d time.Duration) { s.busy.Store(int64(d)) }

// BusyThreshold is the current busy-reply-threshold.
func (s *Scripts) BusyThreshold() time.Duration { return time.Duration(s.busy.Load()) }

// scriptRun is one script's run: the engine's side, the host the
// interpreter calls back, and the timer that marks it busy. Pooled: the
// timer and buffers are reused.
type scriptRun struct {
	s      *Scripts
	run    *engine.ScriptRun
	cancel context.CancelFunc
	timer  *time.Timer

	cmd engine.Command // the redis.call being run
	// native is a known script's run on the native path (RunNative),
	// when run is nil.
	native  *engine.NativeRun
	argv    [8][]byte // a native script's call's arguments (scriptRun.call)
	monLine []byte    // MONITOR's line for a call, reused

	// A run's calls are accounted when it ends (pending, their arguments
	// in pendArgs), or dropped: a native script gives up, and is run
	// again by the interpreter, on anything it does not cover, an
	// interpreted one may be stopped to start over with more shards, and
	// a journal's replay counts nothing. So a call is counted once, as it
	// ran for the client.
	pending  []pendingCall
	pendArgs []byte
	quiet    bool // peek: a call the script does not make, not accounted

	mu     sync.Mutex // guards run against the timer
	isBusy bool
	killed bool
}

// RunScript runs one script for the engine.
func (s *Scripts) RunScript(r *engine.ScriptRun) engine.Reply {
	sr, _ := s.runs.Get().(*scriptRun)
	if sr == nil {
		sr = &scriptRun{s: s}
		sr.timer = time.AfterFunc(time.Hour, sr.overThreshold)
		sr.timer.Stop()
	}
	s.accel.lua.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	sr.mu.Lock()
	sr.run, sr.cancel, sr.isBusy, sr.killed = r, cancel, false, false
	sr.mu.Unlock()
	r.OnStop = cancel
	if d := s.BusyThreshold(); d > 0 { // 0: never busy
		sr.timer.Reset(d)
	}
	reply := s.lua.Run(ctx, r.Body, r.Keys, r.Args, sr)
	sr.settle(!r.Stopped() && !r.Replaying())
	sr.timer.Stop()
	sr.mu.Lock()
	if sr.isBusy {
		s.mu.Lock()
		delete(s.running, sr)
		s.mu.Unlock()
		r.SetBusy(false)
		s.log.Warn("a slow script finished", "killed", sr.killed)
	}
	sr.run, sr.cancel = nil, nil
	sr.mu.Unlock()
	cancel()
	s.runs.Put(sr)
	return reply
}

// overThreshold runs on the timer: the script is busy from now on.
func (sr *scriptRun) overThreshold() {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.run == nil || sr.isBusy {
		return
	}
	sr.isBusy = true
	sr.run.SetBusy(true)
	sr.s.mu.Lock()
	sr.s.running[sr] = struct{}{}
	if sr.s.closing && !sr.run.Wrote() && !sr.run.Replicated {
		sr.killed = true
		sr.cancel()
	}
	sr.s.mu.Unlock()
	sr.s.log.Warn("a script is running past busy-reply-threshold; its shards answer BUSY", "threshold", sr.s.BusyThreshold())
}

// kill serves SCRIPT KILL: it stops every busy script that has not
// written. Sluice may run scripts on disjoint shards at once, so there may
// be several.
func (s *Scripts) kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.running) == 0 {
		return errNotBusy
	}
	var refused error
	killed := 0
	for sr := range s.running {
		sr.mu.Lock()
		switch {
		case sr.run == nil:
		case sr.run.Replicated:
			refused = errUnkillableRL
		case sr.run.Wrote():
			refused = errUnkillable
		default:
			sr.killed = true
			sr.cancel()
			killed++
		}
		sr.mu.Unlock()
	}
	if killed == 0 && refused != nil {
		return refused
	}
	return nil
}

// shutdown stops the busy scripts that may be stopped, now and as others
// become busy.
func (s *Scripts) shutdown() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.kill()
}

// SetAcceleration turns the native path of known scripts on or off.
func (s *Scripts) SetAcceleration(on bool) { s.accel.off.Store(!on) }

// infoLines are INFO's scripting section.
func (s *Scripts) infoLines() []string {
	on := "yes"
	if s.accel.off.Load() {
		on = "no"
	}
	return append([]string{
		"script_acceleration:" + on,
		"script_runs_native:" + strconv.FormatInt(s.accel.native.Load(), 10),
		"script_runs_native_fallback:" + strconv.FormatInt(s.accel.fallback.Load(), 10),
		"script_runs_interpreted:" + strconv.FormatInt(s.accel.lua.Load(), 10),
	}, s.accel.statLines()...)
}

// Host: what the interpreter calls back.

func (sr *scriptRun) Now() int64 { return sr.run.Now }

// Deterministic: a script from a replicated log runs on every node, and
// again when a node replays the log, so its random numbers restart from
// the seed each run; standalone, the journal keeps a script's effects and
// the sequence goes on as in Redis 7.
func (sr *scriptRun) Deterministic() bool { return sr.run.Replicated }

func (sr *scriptRun) Log(level int, msg string) {
	lv := slog.LevelInfo
	switch level {
	case 0:
		lv = slog.LevelDebug
	case 1:
		lv = slog.LevelDebug + 2
	case 3:
		lv = slog.LevelWarn
	}
	sr.s.log.Log(context.Background(), lv, msg, "source", "script")
}

// Call runs one redis.call: looked up and checked as Redis checks a
// script's command, parsed with the command table, run on the held
// shards. Errors come back as whole error lines.
func (sr *scriptRun) Call(args [][]byte) engine.Reply {
	if len(args) == 0 {
		return rawErr("ERR Please specify at least one argument for this redis lib call")
	}
	cmd := lookupCommand(args[0])
	if cmd == nil {
		return sr.reject(nil, args, rawErr("ERR Unknown Redis command called from script"))
	}
	if (cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		return sr.reject(cmd, args, rawErr("ERR Wrong number of args calling Redis command from script"))
	}
	if cmd.flags&flagNoScript != 0 {
		return sr.reject(cmd, args, rawErr("ERR This Redis command is not allowed from script"))
	}
	if len(sr.run.User) > 0 {
		// The script runs with its caller's permissions, as in Redis.
		if err := sr.s.checkACL(string(sr.run.User), cmd, args); err.Kind == engine.ReplyError {
			return sr.reject(cmd, args, err)
		}
	}
	if sr.run.ReadOnly && cmd.flags&flagWrite != 0 {
		return sr.reject(cmd, args, engine.Reply{Kind: engine.ReplyError, Err: engine.ErrScriptReadOnly})
	}
	if cmd.parse == nil {
		start := monoNow()
		r := sr.serverCommand(cmd, args)
		sr.ran(cmd, args, monoNow()-start, r)
		return r
	}
	// A write's slices must outlive the call: its change is journaled
	// from them (the journal copies the Command itself) when the hold
	// ends, after later calls and scripts. So they are fresh each call.
	own := args
	if cmd.flags&flagReadonly == 0 {
		size := 0
		for _, a := range args {
			size += len(a)
		}
		buf := make([]byte, 0, size)
		own = make([][]byte, len(args))
		for i, a := range args {
			buf = append(buf, a...)
			own[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
		}
	}
	// A decision's REQID keeps engine.DefaultReqIDWindow here, not the
	// server's reqid-window: a script is run again, with its calls parsed
	// again, wherever it is replayed or replicated, and the receipt's
	// lifetime must come out the same on every node.
	return sr.exec(cmd, own)
}

// exec parses and runs one of the script's commands, checked already, and
// accounts it.
func (sr *scriptRun) exec(cmd *command, args [][]byte) engine.Reply {
	ec := &sr.cmd
	*ec = engine.Command{}
	if err := cmd.parseInto(ec, args); err != nil {
		// Refused arguments are a failed call, as at the top level.
		r := rawErr(errorText(err))
		sr.ran(cmd, args, 0, r)
		return r
	}
	start := monoNow()
	r := sr.run.Exec(ec)
	took := monoNow() - start
	if r.Kind == engine.ReplyError {
		r.Err = engine.RawError(errorText(r.Err))
	}
	sr.ran(cmd, args, took, r)
	return r
}

// The script's commands are counted as Redis counts a script's calls: in
// commandstats and the latency histograms, failed_calls and errorstats
// for an error reply (the script's own reply does not count an error it
// passes on again: script.CommandError), rejected_calls for one refused
// before it ran; the slow log and the latency monitor take them from
// client "?:0", MONITOR shows them from "lua". They run on the shard owner
// holding the script's shards, so nothing here touches the calling
// connection.

// pendingCall is a script's call, accounted when the script ends: err is
// its error reply (nil: none).
type pendingCall struct {
	cmd      *command
	nargs    int
	took     time.Duration
	err      error
	rejected bool
}

// reject answers a call refused before it ran (cmd nil: unknown).
func (sr *scriptRun) reject(cmd *command, args [][]byte, r engine.Reply) engine.Reply {
	sr.note(pendingCall{cmd: cmd, err: r.Err, rejected: true}, args)
	return r
}

// ran notes a call that ran, taking took.
func (sr *scriptRun) ran(cmd *command, args [][]byte, took time.Duration, r engine.Reply) {
	p := pendingCall{cmd: cmd, took: took}
	if r.Kind == engine.ReplyError {
		p.err = r.Err
	}
	sr.note(p, args)
}

// maxPendingCalls bounds a run's pending calls: a script looping over
// redis.call past it has them accounted as it goes (so one that then
// starts over may count those twice) rather than held in memory.
const maxPendingCalls = 4096

// note keeps a call for settle, its arguments copied; a peek's is not
// kept.
func (sr *scriptRun) note(p pendingCall, args [][]byte) {
	if sr.quiet {
		return
	}
	if len(sr.pending) >= maxPendingCalls {
		sr.settle(!sr.replaying())
	}
	p.nargs = len(args)
	for _, a := range args {
		sr.pendArgs = binary.AppendUvarint(sr.pendArgs, uint64(len(a)))
		sr.pendArgs = append(sr.pendArgs, a...)
	}
	sr.pending = append(sr.pending, p)
}

// replaying reports whether the run redoes a journal at start-up.
func (sr *scriptRun) replaying() bool {
	if sr.native != nil {
		return sr.native.Replaying()
	}
	return sr.run.Replaying()
}

// settle accounts the pending calls (keep: the run counts) or drops them
// (it gave up or starts over, and they run again, or it replays).
func (sr *scriptRun) settle(keep bool) {
	if srv := sr.s.server.Load(); keep && srv != nil {
		var argv [8][]byte
		buf := sr.pendArgs
		for _, p := range sr.pending {
			args := argv[:0]
			for range p.nargs {
				n, k := binary.Uvarint(buf)
				args = append(args, buf[k:k+int(n)])
				buf = buf[k+int(n):]
			}
			sr.account(srv, p, args)
		}
	}
	sr.pending, sr.pendArgs = sr.pending[:0], sr.pendArgs[:0]
}

// account counts one call in srv's statistics and shows a call that ran
// to its monitors.
func (sr *scriptRun) account(srv *Server, p pendingCall, args [][]byte) {
	st := srv.stats
	if p.rejected {
		if p.cmd != nil {
			st.cmds[p.cmd.subcommand(args).id].rejected.Add(1)
		}
		st.countError(errorText(p.err))
		return
	}
	row := p.cmd.subcommand(args)
	st.record(row.id, 1, int64(p.took))
	if p.err != nil {
		st.cmds[row.id].failed.Add(1)
		st.countError(errorText(p.err))
	}
	if slower := st.slowSlower.Load(); slower >= 0 && int64(p.took)/1000 >= slower {
		st.slowlogAdd(row, args, int64(p.took), "?:0", "")
	}
	if th := st.latThresh.Load(); th > 0 && int64(p.took)/1e6 >= th {
		st.latency.commandSample(row, int64(p.took)/1e6)
	}
	if p.err == nil && (row.name == "publish" || row.name == "spublish") {
		kind := subChannel
		if row.name == "spublish" {
			kind = subShard
		}
		srv.pubsub.publish(srv, kind, args[1], args[2])
	}
	if list := srv.monitors.list.Load(); list != nil && len(*list) > 0 && row.flags&flagAdmin == 0 {
		sr.monLine = monitorLine(sr.monLine[:0], time.Now(), "lua", row, args)
		for _, m := range *list {
			m.push(srv, sr.monLine)
		}
	}
}

// serverCommand answers the connection-level commands a script may call.
func (sr *scriptRun) serverCommand(cmd *command, args [][]byte) engine.Reply {
	switch cmd.name {
	case "ping":
		if len(args) == 2 {
			return engine.Reply{Kind: engine.ReplyBulk, Bulk: args[1]}
		}
		return engine.Reply{Kind: engine.ReplyStatus, Str: "PONG"}
	case "echo":
		return engine.Reply{Kind: engine.ReplyBulk, Bulk: args[1]}
	case "time":
		// The script's clock: the batch's now, the same on every node.
		now := sr.run.Now
		return engine.Reply{Kind: engine.ReplyArray, Items: []engine.Reply{
			{Kind: engine.ReplyBulk, Str: strconv.FormatInt(now/1e9, 10)},
			{Kind: engine.ReplyBulk, Str: strconv.FormatInt(now%1e9/1e3, 10)},
		}}
	case "publish", "spublish":
		// Its messages go out when the run counts (account): a run that
		// gives up or starts over must not have published.
		kind := subChannel
		if cmd.name == "spublish" {
			kind = subShard
		}
		if srv := sr.s.server.Load(); srv != nil {
			return engine.Reply{Kind: engine.ReplyInt, Int: srv.pubsub.subscribers(kind, args[1])}
		}
		return engine.Reply{Kind: engine.ReplyInt}
	case "select":
		if string(args[1]) == "0" {
			return engine.Reply{Kind: engine.ReplyOK}
		}
		return rawErr("ERR DB index is out of range")
	}
	return rawErr(fmt.Sprintf("ERR Sluice does not run '%s' inside scripts", cmd.name))
}

// checkACL checks one of a script's commands against the user it runs
// as; a user deleted since may run nothing.
func (s *Scripts) checkACL(name string, cmd *command, args [][]byte) engine.Reply {
	acl := s.acl.Load()
	var ref *userRef
	if acl != nil {
		ref = acl.get(name)
	}
	if ref == nil {
		return rawErr("ERR The user executing the script can't run this command or subcommand")
	}
	var buf [8]keyRef
	switch d, _ := ref.rules.Load().check(cmd, args, buf[:0]); d {
	case aclDeniedCmd:
		return rawErr("ERR The user executing the script can't run this command or subcommand")
	case aclDeniedKey:
		return rawErr("ERR The user executing the script can't access at least one of the keys mentioned in the command arguments")
	case aclDeniedChannel:
		return rawErr("ERR The user executing the script can't publish to the channel mentioned in the command")
	}
	return engine.Reply{}
}

func rawErr(text string) engine.Reply {
	return engine.Reply{Kind: engine.ReplyError, Err: engine.RawError(text)}
}

// Commands.

func scriptCommands() []*command {
	evalArgs := []argSpec{str("script"), integer("numkeys"), opt(many(key("key"))), opt(many(str("arg")))}
	shaArgs := []argSpec{str("sha1"), integer("numkeys"), opt(many(key("key"))), opt(many(str("arg")))}
	return []*command{
		{name: "eval", cats: catScripting, findKeys: evalKeys, arity: -3, flags: flagNoScript | flagStale, group: "scripting", since: "2.6.0",
			summary: "Run a Lua script atomically on the keys it declares.", args: evalArgs, op: engine.OpEval, parse: parseEval, prepare: prepareEval},
		{name: "evalsha", cats: catScripting, findKeys: evalKeys, arity: -3, flags: flagNoScript | flagStale, group: "scripting", since: "2.6.0",
			summary: "Run a cached script by its SHA1.", args: shaArgs, op: engine.OpEval, parse: parseEvalSHA, prepare: prepareEval},
		{name: "eval_ro", cats: catScripting, findKeys: evalKeys, arity: -3, flags: flagNoScript | flagStale | flagReadonly, group: "scripting", since: "7.0.0",
			summary: "Run a read-only Lua script.", args: evalArgs, op: engine.OpEvalRO, parse: parseEval, prepare: prepareEval},
		{name: "evalsha_ro", cats: catScripting, findKeys: evalKeys, arity: -3, flags: flagNoScript | flagStale | flagReadonly, group: "scripting", since: "7.0.0",
			summary: "Run a cached read-only script by its SHA1.", args: shaArgs, op: engine.OpEvalRO, parse: parseEvalSHA, prepare: prepareEval},
		{name: "script", arity: -2, flags: flagNoScript, group: "scripting", since: "2.6.0",
			summary: "SCRIPT LOAD|EXISTS|FLUSH|KILL|HELP: the script cache.", args: []argSpec{str("subcommand"), opt(many(str("arg")))},
			subs: []*command{
				sub("load", 3, flagNoScript|flagStale, catScripting), sub("exists", -3, flagNoScript, catScripting),
				sub("flush", -2, flagNoScript, catScripting), sub("kill", 2, flagNoScript|flagStale, catScripting),
				sub("help", 2, flagNoScript, catScripting), sub("path", -3, flagNoScript, catScripting),
			},
			run: cmdScript},
	}
}

// evalKeys: the numkeys keys after the script.
func evalKeys(args [][]byte, buf []keyRef) []keyRef {
	n, err := strconv.Atoi(string(args[2]))
	if err != nil || n < 0 || n > len(args)-3 {
		return buf
	}
	for i := 3; i < 3+n; i++ {
		buf = append(buf, keyRef{at: i, need: permAll})
	}
	return buf
}

// shaBody in an OpEval's N[3]: Value is a SHA1 for prepareEval to
// replace with the cached body. The engine never sees it set.
const shaBody = 1

func parseEval(c *engine.Command, args [][]byte) error {
	n, err := engine.ParseInt64(args[2])
	switch {
	case err != nil:
		return engine.ErrNotInteger
	case n > int64(len(args)-3):
		return errNumKeysBig
	case n < 0:
		return errNumKeysNeg
	}
	c.Value = args[1]
	c.Sub = c.Sub[:0]
	for _, k := range args[3 : 3+n] {
		c.Sub = append(c.Sub, engine.Command{Op: engine.OpScriptKey, Key: k})
	}
	c.Args = append(c.Args[:0], args[3+n:]...)
	return nil
}

func parseEvalSHA(c *engine.Command, args [][]byte) error {
	if err := parseEval(c, args); err != nil {
		return err
	}
	c.N[3] = shaBody
	return nil
}

// prepareEval finishes an EVAL with the server's state: the body from the
// cache (compiled and cached now for EVAL, as Redis does), and what its
// shebang flags say.
func prepareEval(cl *client, c *engine.Command) error {
	s := cl.s
	lua := s.scripts.lua
	c.Key = nil
	u := cl.user.rules.Load()
	var known *nativeScript
	if c.N[3] == shaBody {
		c.N[3] = 0
		body, ok := lua.BodyOf(c.Value)
		if !ok {
			return errNoScript
		}
		// The cached body has this SHA1: looked up by it, not by the
		// body, which is longer to hash.
		known = knownBySHAOf(c.Value)
		c.Value = body
	} else {
		sha, err := lua.Load(c.Value)
		if err != nil {
			return err // a whole error line
		}
		c.Value, _ = lua.Body(sha)
		known = knownBySHAOf([]byte(sha))
	}
	// A script runs as its user when the user is restricted in what it
	// may call; a known script publishes nothing, so its channels do
	// not matter.
	if !u.allCommands || !u.allKeys || (!u.allChannels && known == nil) {
		c.Key = []byte(u.name)
	}
	flags, err := lua.Flags(c.Value)
	if err != nil {
		return engine.RawError("ERR " + err.Error())
	}
	if !flags.Shebang {
		if n := known; n != nil && len(c.Key) == 0 {
			// A known limiter script: it touches KEYS[1] alone, and, unless
			// acceleration is off, runs as Go code (its id marks the EVAL,
			// so every node and every replay takes the same path).
			c.N[0] |= engine.ScriptOwnKeys
			if !s.scripts.accel.off.Load() {
				c.N[engine.NativeAt] = n.id
			}
		}
		return nil
	}
	if flags.NoCluster {
		if _, cluster := s.replicator(); cluster {
			return errors.New("Can not run script on cluster, 'no-cluster' flag is set.")
		}
	}
	if !flags.NoWrites {
		if c.Op == engine.OpEvalRO {
			return errROWithWrites
		}
		if !flags.AllowOOM {
			if limit := s.backend.MaxMemory(); limit > 0 && s.backend.Stats().Memory >= limit {
				return errScriptOOM
			}
		}
	}
	if flags.NoWrites {
		c.Op = engine.OpEvalRO
	}
	if flags.AllowCrossSlot {
		c.N[0] |= engine.ScriptWide
	}
	return nil
}

func cmdScript(s *Server, c *client, args [][]byte) {
	sc := s.scripts
	switch sub := strings.ToLower(string(args[1])); {
	case sub == "load":
		sha, err := sc.lua.Load(args[2])
		if err != nil {
			c.writeError(err)
			return
		}
		c.writeBulkString(sha)
	case sub == "exists":
		c.writeArray(len(args) - 2)
		for _, sha := range args[2:] {
			if _, ok := sc.lua.Body(string(sha)); ok {
				c.writeInt(1)
			} else {
				c.writeInt(0)
			}
		}
	case sub == "flush":
		if len(args) > 3 || (len(args) == 3 && !isWord(args[2], "sync") && !isWord(args[2], "async")) {
			c.writeError(errors.New("SCRIPT FLUSH only support SYNC|ASYNC option"))
			return
		}
		sc.lua.Flush()
		sc.accel.forget()
		c.writeOK()
	case sub == "path":
		// Sluice's own: the path each cached script takes.
		c.writeArray(len(args) - 2)
		for _, sha := range args[2:] {
			if body, ok := sc.lua.Body(string(sha)); ok {
				c.writeBulkString(sc.accel.pathOf(body))
			} else {
				c.writeNil()
			}
		}
	case sub == "kill":
		if err := sc.kill(); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
	case sub == "help":
		help := []string{
			"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"EXISTS <sha1> [<sha1> ...]",
			"    Return information about the existence of the scripts in the script cache.",
			"FLUSH [ASYNC|SYNC]",
			"    Flush the Lua scripts cache.",
			"KILL",
			"    Kill the currently executing Lua script.",
			"LOAD <script>",
			"    Load a script into the scripts cache without executing it.",
			"PATH <sha1> [<sha1> ...]",
			"    How each cached script runs: natively (a known limiter script) or on the interpreter.",
			"HELP",
			"    Print this help.",
		}
		c.writeHelp(help)
	default:
		c.writeError(unknownSubcommand(commands["script"], args[1]))
	}
}
