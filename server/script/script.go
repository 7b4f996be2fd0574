// Package script runs Redis Lua scripts (EVAL, EVALSHA, FCALL's cousin
// EVAL_RO) on a Lua 5.1 interpreter (gopher-lua) with Redis 7's
// environment: KEYS, ARGV, redis.call/pcall/error_reply/status_reply/
// sha1hex/log/setresp/replicate_commands/REDIS_VERSION, the base, table,
// string and math libraries, cjson, struct, bit and cmsgpack, read-only
// globals, and Redis's conversions between Lua values and replies.
//
// The package knows nothing of shards or of the command table: a running
// script reaches the data only through its Host, which the server
// implements on top of the engine's held run. Scripts are deterministic:
// TIME is the Host's now and math.random restarts from the same seed on
// every run, so a script replays to the same state on every node.
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
	// returns.
	Call(args [][]byte) engine.Reply
	// Now is the script's clock (TIME), unix nanoseconds.
	Now() int64
	// Log receives redis.log(level, message).
	Log(level int, msg string)
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
	// TimeLimit is lua-time-limit / busy-reply-threshold; not enforced
	// here (the caller cancels Run's context).
}

// Engine compiles, caches and runs scripts. Safe for concurrent use: each
// Run gets an interpreter of its own from a pool.
type Engine struct{ impl *engineImpl }

// New returns an Engine with an empty script cache.
func New(cfg Config) *Engine { return &Engine{impl: newEngineImpl(cfg)} }

// Load compiles body and caches it (SCRIPT LOAD, and EVAL's implicit
// load), returning its SHA1 in lower-case hex. A syntax error comes back
// with Redis's text ("Error compiling script (new function): ...").
func (e *Engine) Load(body []byte) (sha string, err error) { return e.impl.load(body) }

// Body returns a cached script's body by its SHA1 (any case).
func (e *Engine) Body(sha string) ([]byte, bool) { return e.impl.body(sha) }

// Flush empties the cache (SCRIPT FLUSH).
func (e *Engine) Flush() { e.impl.flush() }

// Flags parses body's shebang line; an unknown flag or engine is an error
// with Redis's text.
func (e *Engine) Flags(body []byte) (Flags, error) { return parseFlags(body) }

// Run runs body (compiling and caching it if needed) with keys and args
// as KEYS and ARGV, against host, and returns its reply converted as
// Redis converts a script's return value (the host refuses what a
// read-only script may not do). Cancelling ctx stops the script (SCRIPT
// KILL, or shutdown) at its next instruction with Redis's error text.
func (e *Engine) Run(ctx context.Context, body []byte, keys, args [][]byte, host Host) engine.Reply {
	return e.impl.run(ctx, body, keys, args, host)
}
