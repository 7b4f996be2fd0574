// Package script runs Redis Lua scripts (EVAL, EVALSHA, FCALL's cousin
// EVAL_RO) on a Lua 5.1 interpreter (gopher-lua) with Redis 7's
// environment: KEYS, ARGV, redis.call/pcall/error_reply/status_reply/
// sha1hex/log/setresp/replicate_commands/REDIS_VERSION, the base, table,
// string and math libraries, cjson, struct, bit and cmsgpack, read-only
// globals, and Redis's conversions between Lua values and replies.
//
// The package knows nothing of shards or of the command table: a running
// script reaches the data only through its Host, which the server
// implements on top of the engine's held run. math.random is Redis 7.0's:
// one rand48 sequence per Engine that runs on from script to script (7.0
// no longer reseeds it before each script, as 6.x did) and that
// math.randomseed moves for every later script; Redis 7 replicates a
// script's effects, not the script. A Deterministic host (a replicated
// log, which carries the script) gets a sequence restarted from the seed
// for each run instead, so every node draws the same numbers.
package script

import (
	"context"

	"github.com/sluicehq/sluice/engine"
)

// Host is what a running script calls back into. Its methods are called on
// the goroutine running the script.
type Host interface {
	// Call runs one command of redis.call or redis.pcall (args[0] is its
	// name, as the script passed it) and returns its reply; a failed
	// command is an error reply, which redis.call raises and redis.pcall
	// returns. args are valid only until Call returns.
	//
	// An error reply's Err.Error() is the whole error line, code first.
	// Redis's texts for what a script may not do come from the host
	// (src/script.c scriptCall): "ERR Unknown Redis command called from
	// script", "ERR Wrong number of args calling Redis command from
	// script", "ERR This Redis command is not allowed from script", "ERR
	// Write commands are not allowed from read-only scripts.", and for a
	// script with a shebang the cluster, OOM and replica refusals.
	// Replies keep their kinds: the script sees a map, a set or a double
	// as RESP2 or RESP3 shows them, as redis.setresp chose.
	Call(args [][]byte) engine.Reply
	// Now is the script's clock (TIME), unix nanoseconds. This package
	// does not call it: TIME is a command, which Call answers.
	Now() int64
	// Log receives redis.log(level, message): level is LogDebug to
	// LogWarning, message the arguments joined as Redis joins them. The
	// host drops what is below its verbosity, as Redis does.
	Log(level int, msg string)
}

// ACLHost is a Host that can answer redis.acl_check_cmd: known says
// whether args name a command, allowed whether the caller's user may run
// it. Without it every command is known and allowed.
type ACLHost interface {
	CheckACL(args [][]byte) (known, allowed bool)
}

// NoScript is the error line for an EVALSHA of a script not in the
// cache.
const NoScript = "NOSCRIPT No matching script. Please use EVAL."

// Deterministic is implemented by a Host whose script must give the same
// results wherever and whenever it runs (every node of a replicated log
// runs it, and runs it again after a restart): math.random then starts
// from the seed for the run, as Redis 6 did, instead of going on with the
// Engine's sequence as Redis 7 does.
type Deterministic interface {
	Deterministic() bool
}

// Flags are a script's shebang flags (#!lua flags=...).
type Flags struct {
	Shebang        bool // the script has a #!lua line
	NoWrites       bool
	AllowCrossSlot bool
	AllowOOM       bool
	AllowStale     bool
	NoCluster      bool
}

// Config configures an Engine. The zero value is usable.
type Config struct {
	// MemoryLimit bounds how much a run may grow the heap, in bytes
	// (0: 256 MiB; negative: no bound). Past it the script stops with
	// Lua's "not enough memory" (Redis: "ERR Error running script <sha>,
	// not enough memory"). Time is not bounded here: the caller cancels
	// Run's context (SCRIPT KILL, busy-reply-threshold).
	MemoryLimit int64
}

// Engine compiles, caches and runs scripts. Safe for concurrent use: each
// Run gets an interpreter of its own from a pool.
type Engine struct{ impl *engineImpl }

// New returns an Engine with an empty script cache.
func New(cfg Config) *Engine { return &Engine{impl: newEngineImpl(cfg)} }

// Load compiles body and caches it (SCRIPT LOAD, and EVAL's implicit
// load), returning its SHA1 in lower-case hex. An error is an
// engine.RawError with Redis's whole line: "ERR Error compiling script
// (new function): user_script:1: ...", or a shebang's ("ERR Unexpected
// flag in script shebang: x").
func (e *Engine) Load(body []byte) (sha string, err error) {
	c, err := e.impl.load(body)
	if err != nil {
		return "", err
	}
	return c.sha, nil
}

// Body returns a cached script's body by its SHA1 (any case).
func (e *Engine) Body(sha string) ([]byte, bool) { return e.impl.body(sha) }

// BodyOf is Body for a SHA1 in a command's bytes, with no allocation.
func (e *Engine) BodyOf(sha []byte) ([]byte, bool) {
	if c, ok := cached(e.impl, sha); ok {
		return c.body, true
	}
	return nil, false
}

// Flush empties the cache (SCRIPT FLUSH).
func (e *Engine) Flush() { e.impl.flush() }

// Flags parses body's shebang line; an unknown flag or engine is an error
// with Redis's text (without the ERR code).
func (e *Engine) Flags(body []byte) (Flags, error) {
	f, _, err := parseShebang(body)
	return f, err
}

// CachedFlags returns a cached script's flags by its SHA1 (any case).
func (e *Engine) CachedFlags(sha string) (Flags, bool) { return e.impl.flags(sha) }

// Run runs body (compiling and caching it if needed) with keys and args
// as KEYS and ARGV, against host, and returns its reply converted as
// Redis converts a script's return value (the host refuses what a
// read-only script may not do). Cancelling ctx stops the script (SCRIPT
// KILL, or shutdown) at its next instruction with Redis's error text.
//
// Errors are engine.RawError lines, as Redis sends them: "ERR
// user_script:1: ... script: <sha>, on @user_script:1.", a redis.call
// error's own line with the same suffix, "ERR Script killed by user with
// SCRIPT KILL... script: ...".
func (e *Engine) Run(ctx context.Context, body []byte, keys, args [][]byte, host Host) engine.Reply {
	return e.impl.run(ctx, body, keys, args, host)
}

// RunSHA runs a cached script by its SHA1 (any case), as EVALSHA: false
// when it is not cached (the reply is then NoScript's).
func (e *Engine) RunSHA(ctx context.Context, sha string, keys, args [][]byte, host Host) (engine.Reply, bool) {
	c, ok := cached(e.impl, sha)
	if !ok {
		return engine.Reply{Kind: engine.ReplyError, Err: engine.RawError(NoScript)}, false
	}
	return e.impl.runCompiled(ctx, c, keys, args, host), true
}
