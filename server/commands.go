package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// cmdFlag describes a command for dispatch, COMMAND, AUTH and OOM checks.
type cmdFlag uint16

const (
	flagWrite    cmdFlag = 1 << iota // changes state
	flagReadonly                     // only reads state
	flagDenyOOM                      // may create state (refused past maxmemory)
	flagAdmin                        // administration
	flagFast                         // O(1)
	flagNoAuth                       // allowed before AUTH
	flagDecision                     // a rate-limit decision
	flagLoading                      // allowed while loading
	flagStale                        // allowed on a stale replica
	flagNoScript
	// flagBigReply: the reply may hold a whole collection or key space
	// (KEYS, HGETALL, LRANGE...). A batch holds few of these at once
	// (maxBigReplies), so that a pipeline of them is answered a few at a
	// time rather than all built before any is written.
	flagBigReply
	flagPubSub // a pub/sub command (COMMAND INFO's flag)
)

// maxBigReplies bounds the big-reply commands in one engine batch.
const maxBigReplies = 8

// bigReplyCommands are the commands flagged flagBigReply: one place.
var bigReplyCommands = []string{"keys", "hgetall", "hkeys", "hvals", "smembers", "sinter", "sunion", "sdiff",
	"lrange", "zrange", "zrangebyscore", "zrangebylex", "zrevrange", "zrevrangebyscore", "zrevrangebylex",
	"zinter", "zunion", "zdiff", "sort", "sort_ro", "mget", "hrandfield", "srandmember", "zrandmember"}

var flagNames = []struct {
	f    cmdFlag
	name string
}{
	{flagWrite, "write"}, {flagReadonly, "readonly"}, {flagDenyOOM, "denyoom"},
	{flagAdmin, "admin"}, {flagPubSub, "pubsub"}, {flagFast, "fast"}, {flagNoAuth, "no_auth"},
	{flagLoading, "loading"}, {flagStale, "stale"}, {flagNoScript, "noscript"},
}

// argSpec documents one argument for COMMAND DOCS.
type argSpec struct {
	name     string
	typ      string // key, integer, double, string, pattern, pure-token, unix-time, oneof
	optional bool
	multiple bool
	// sub are a oneof's choices. COMMAND DOCS lists them as its
	// arguments: redis-cli builds its hints from them, and crashes on a
	// oneof without any.
	sub []argSpec
}

// command is one row of the command table: everything about a command
// lives here, and COMMAND, dispatch, AUTH and OOM checks all read it.
type command struct {
	name     string
	arity    int // Redis convention: >0 exact, <0 at least -arity
	flags    cmdFlag
	firstKey int
	lastKey  int
	step     int
	group    string
	since    string
	summary  string
	args     []argSpec
	// op is the engine op an engine-executed command becomes; its row of
	// the engine's op table says whether it writes, decides or creates
	// state, and a test holds flags to it. parse fills the rest of the
	// engine command from the arguments (c.Op is already op). run executes
	// a server-level command on the connection instead. Exactly one of
	// parse and run is set.
	op    engine.Op
	parse func(c *engine.Command, args [][]byte) error
	// prepare, when set, finishes a parsed command with the server's
	// state (EVALSHA's body from the script cache); its error refuses
	// the command.
	prepare func(c *client, ec *engine.Command) error
	run     func(s *Server, cl *client, args [][]byte)
	// limitArgs is, for a decision, how many arguments it takes inside
	// LIMIT.ALL (name included, MS excluded), where the cost is required.
	limitArgs int

	// ACL. cats are the categories beyond those the flags imply (write,
	// read, admin and dangerous, fast or slow). keyPerm is what the
	// command does with its keys; findKeys, when set, finds them instead
	// of the key positions. subs are a container's subcommands (CONFIG
	// GET), each with its own ACL identity; the container's run serves
	// them all.
	cats     aclCategory
	keyPerm  keyPerm
	findKeys func(args [][]byte, buf []keyRef) []keyRef
	channels chanSpec // which arguments are pub/sub channels
	subs     []*command

	// Set when the table is built: the index into aclCommands, the name
	// ACL rules use ("config|get"), the container of a subcommand, and
	// every category.
	id       int
	fullname string
	parent   *command
}

// sub is a container's subcommand row: its name, arity (counting the
// container's name), flags and categories.
func sub(name string, arity int, flags cmdFlag, cats aclCategory) *command {
	return &command{name: name, arity: arity, flags: flags, cats: cats}
}

// keySub is a subcommand that reads the key after its name (OBJECT
// ENCODING key, MEMORY USAGE key): ACL checks it, COMMAND INFO shows it.
func keySub(name string, arity int, flags cmdFlag, cats aclCategory) *command {
	return &command{name: name, arity: arity, flags: flags, cats: cats, keyPerm: permRead, firstKey: 2, lastKey: 2, step: 1}
}

// subcommand is the row ACL checks for args: the subcommand args[1]
// names, or cmd itself.
func (cmd *command) subcommand(args [][]byte) *command {
	if len(cmd.subs) > 0 && len(args) > 1 {
		for _, s := range cmd.subs {
			if strings.EqualFold(s.name, string(args[1])) {
				return s
			}
		}
	}
	return cmd
}

// keyRef is one key of a command: its argument index and what the command
// does with it.
type keyRef struct {
	at   int
	need keyPerm
}

// keys appends the command's keys in args to buf (a caller's stack array,
// so the check allocates nothing) and returns it.
func (cmd *command) keys(args [][]byte, buf []keyRef) []keyRef {
	if cmd.findKeys != nil {
		return cmd.findKeys(args, buf)
	}
	if cmd.firstKey <= 0 {
		return buf
	}
	last := cmd.lastKey
	if last < 0 {
		last = len(args) + last
	}
	for i := cmd.firstKey; i <= last && i < len(args); i += max(cmd.step, 1) {
		buf = append(buf, keyRef{at: i, need: cmd.keyPerm})
	}
	return buf
}

// setKeys: SET reads its key too when it returns the old value (GET).
func setKeys(args [][]byte, buf []keyRef) []keyRef {
	need := permWrite
	for _, a := range args[3:] {
		if isWord(a, "get") {
			need = permAll
		}
	}
	return append(buf, keyRef{at: 1, need: need})
}

// limitAllKeys finds the key of every limit in LIMIT.ALL n <limit>...,
// stopping where the syntax stops making sense (the parser reports that).
func limitAllKeys(args [][]byte, buf []keyRef) []keyRef {
	for i := 2; i+1 < len(args); {
		row := commands[strings.ToLower(string(args[i]))]
		if row == nil || row.limitArgs == 0 {
			return buf
		}
		buf = append(buf, keyRef{at: i + 1, need: permAll})
		i += limitTake(row, args[i:])
	}
	return buf
}

// categories are the ACL categories the flags imply, as Redis derives
// them, plus the row's own.
func (cmd *command) categories() aclCategory {
	c := cmd.cats
	if cmd.flags&flagWrite != 0 {
		c |= catWrite
	}
	if cmd.flags&flagReadonly != 0 && c&catScripting == 0 {
		// As Redis: EVAL_RO is read-only but not in @read.
		c |= catRead
	}
	if cmd.flags&flagAdmin != 0 {
		c |= catAdmin | catDangerous
	}
	if cmd.flags&flagFast != 0 {
		c |= catFast
	}
	if c&catFast == 0 {
		c |= catSlow
	}
	return c
}

// parseInto makes c the row's engine command for args.
func (cmd *command) parseInto(c *engine.Command, args [][]byte) error {
	c.Op = cmd.op
	return cmd.parse(c, args)
}

func key(name string) argSpec     { return argSpec{name: name, typ: "key"} }
func integer(name string) argSpec { return argSpec{name: name, typ: "integer"} }
func str(name string) argSpec     { return argSpec{name: name, typ: "string"} }
func seconds(name string) argSpec { return argSpec{name: name, typ: "double"} }
func opt(a argSpec) argSpec       { a.optional = true; return a }
func many(a argSpec) argSpec      { a.multiple = true; return a }
func token(name string) argSpec   { return argSpec{name: name, typ: "pure-token", optional: true} }

const (
	decisionFlags = flagWrite | flagDenyOOM | flagDecision | flagFast
	groupLimit    = "rate-limit"
)

var windowArgs = []argSpec{key("key"), integer("limit"), seconds("window"), opt(integer("cost")), token("MS")}

// commands is the command table, keyed by lower-case name; aclCommands
// lists every command and subcommand by ACL id (top-level commands in name
// order, each followed by its subcommands); aclTopCommands the top-level
// ones. Read-only after package initialisation.
var (
	commands       = map[string]*command{}
	aclCommands    []*command
	aclTopCommands []*command
	aclByName      = map[string]*command{}
	// errNotLimit refuses a command LIMIT.ALL does not take, naming the
	// ones it does, from the table.
	errNotLimit error
)

func init() {
	for _, c := range commandList() {
		commands[c.name] = c
	}
	for _, name := range bigReplyCommands {
		if c := commands[name]; c != nil {
			c.flags |= flagBigReply
		}
	}
	var limits []string
	for _, c := range commandList() {
		if c.limitArgs > 0 {
			limits = append(limits, strings.ToUpper(c.name))
		}
	}
	errNotLimit = fmt.Errorf("is not a decision command (%s)", strings.Join(limits, ", "))
	resolveNativeCmds()
	aclTopCommands = sortedCommands()
	for _, c := range aclTopCommands {
		c.fullname = c.name
		c.cats = c.categories()
		c.id = len(aclCommands)
		aclCommands = append(aclCommands, c)
		aclByName[c.fullname] = c
		for _, s := range c.subs {
			s.parent = c
			s.fullname = c.name + "|" + s.name
			s.group, s.since = c.group, c.since
			s.cats = s.categories()
			s.id = len(aclCommands)
			aclCommands = append(aclCommands, s)
			aclByName[s.fullname] = s
		}
	}
}

// lookupACLCommand finds a command ("get") or subcommand ("config|get")
// by its lower-case ACL name.
func lookupACLCommand(name string) *command { return aclByName[name] }

// commandFamilies are the command table's rows by family, each kept in its
// family's file.
var commandFamilies = []func() []*command{coreCommands, leakyCommands, concCommands, stringCommands, memoryCommands, hashCommands, listCommands, setCommands, zsetCommands, txCommands, scriptCommands, pubsubCommands}

func commandList() []*command {
	var list []*command
	for _, family := range commandFamilies {
		list = append(list, family()...)
	}
	return list
}

// coreCommands: the limiters, the first string and key commands, and the
// connection and server commands.
func coreCommands() []*command {
	return []*command{
		// Rate-limit decisions.
		{name: "cl.throttle", cats: catLimiter, keyPerm: permAll, arity: -5, flags: decisionFlags, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "GCRA decision, redis-cell compatible: count per period with a burst of max_burst+1.",
			args:    []argSpec{key("key"), integer("max_burst"), integer("count"), seconds("period"), opt(integer("quantity")), token("MS")},
			op:      engine.OpThrottle, limitArgs: 6, parse: parseThrottle},
		{name: "sw.check", cats: catLimiter, keyPerm: permAll, arity: -4, flags: decisionFlags, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Sliding window counter decision: at most limit per window, estimated from two counters.",
			args:    windowArgs, op: engine.OpSWCheck, limitArgs: 5, parse: parseWindowCheck},
		{name: "sl.check", cats: catLimiter, keyPerm: permAll, arity: -4, flags: decisionFlags, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Sliding log decision: exactly at most limit units in any rolling window.",
			args:    windowArgs, op: engine.OpSLCheck, limitArgs: 5, parse: parseWindowCheck},
		{name: "fw.check", cats: catLimiter, keyPerm: permAll, arity: -4, flags: decisionFlags, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Fixed window decision: at most limit per window aligned to the epoch (bursts up to 2x at a boundary).",
			args:    windowArgs, op: engine.OpFWCheck, limitArgs: 5, parse: parseWindowCheck},
		{name: "limit.all", cats: catLimiter, findKeys: limitAllKeys, arity: -6, flags: flagWrite | flagDenyOOM | flagDecision, firstKey: 0, lastKey: 0, step: 0, group: groupLimit, since: "0.1.0",
			summary: "All-or-nothing over several decisions: every limit consumes, or none does.",
			args:    []argSpec{integer("numlimits"), many(str("limit"))},
			op:      engine.OpLimitAll, parse: parseLimitAll},
		{name: "limit.refund", cats: catLimiter, keyPerm: permAll, arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Give units back to a live limiter (never above full); nil when the key holds no state.",
			args:    []argSpec{key("key"), integer("amount")}, op: engine.OpRefund, parse: parseRefund},
		{name: "limit.reset", cats: catLimiter | catKeyspace, keyPerm: permWrite, arity: -2, flags: flagWrite, firstKey: 1, lastKey: -1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Forget limiter state; replies how many keys held live limiter state.",
			args:    []argSpec{many(key("key"))}, op: engine.OpDel, parse: parseKeys(engine.MultiSum, engine.FlagReset)},
		{name: "limit.info", cats: catLimiter, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: groupLimit, since: "0.1.0",
			summary: "Family, parameters, remaining and the stored absolute reset time of a limiter.",
			args:    []argSpec{key("key")}, op: engine.OpInfo, parse: parseKey},
		{name: "limit.hotkeys", cats: catLimiter | catKeyspace | catDangerous, arity: -1, flags: flagReadonly, group: groupLimit, since: "0.1.0",
			summary: "The hottest keys by decisions or refusals: [key, count, error, rate per second], from per-shard sketches.",
			args:    []argSpec{opt(str("BY decisions|refusals")), opt(integer("COUNT count"))}, run: cmdLimitHotKeys},

		// Strings.
		{name: "get", cats: catString, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Get the value of a key.", args: []argSpec{key("key")}, op: engine.OpGet, parse: parseKey},
		{name: "set", cats: catString, findKeys: setKeys, arity: -3, flags: flagWrite | flagDenyOOM, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Set the string value of a key.",
			args:    []argSpec{key("key"), str("value"), token("NX"), token("XX"), token("GET"), opt(integer("EX seconds")), opt(integer("PX milliseconds")), opt(integer("EXAT unix-time-seconds")), opt(integer("PXAT unix-time-milliseconds")), token("KEEPTTL")},
			op:      engine.OpSet, parse: parseSet},
		{name: "mget", cats: catString, keyPerm: permRead, arity: -2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: -1, step: 1, group: "string", since: "1.0.0",
			summary: "Get the values of several keys.", args: []argSpec{many(key("key"))}, op: engine.OpGet, parse: parseKeys(engine.MultiArray, 0)},
		{name: "incr", cats: catString, keyPerm: permAll, arity: 2, flags: flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Increment the integer value of a key by one.", args: []argSpec{key("key")}, op: engine.OpIncrBy, parse: parseIncr(1, false)},
		{name: "decr", cats: catString, keyPerm: permAll, arity: 2, flags: flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Decrement the integer value of a key by one.", args: []argSpec{key("key")}, op: engine.OpIncrBy, parse: parseIncr(-1, false)},
		{name: "incrby", cats: catString, keyPerm: permAll, arity: 3, flags: flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Increment the integer value of a key by a number.", args: []argSpec{key("key"), integer("increment")}, op: engine.OpIncrBy, parse: parseIncr(1, true)},
		{name: "decrby", cats: catString, keyPerm: permAll, arity: 3, flags: flagWrite | flagDenyOOM | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "string", since: "1.0.0",
			summary: "Decrement the integer value of a key by a number.", args: []argSpec{key("key"), integer("decrement")}, op: engine.OpIncrBy, parse: parseIncr(-1, true)},

		// Keys.
		{name: "del", cats: catKeyspace, keyPerm: permWrite, arity: -2, flags: flagWrite, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "1.0.0",
			summary: "Delete keys.", args: []argSpec{many(key("key"))}, op: engine.OpDel, parse: parseKeys(engine.MultiSum, 0)},
		{name: "unlink", cats: catKeyspace, keyPerm: permWrite, arity: -2, flags: flagWrite | flagFast, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "4.0.0",
			summary: "Delete keys.", args: []argSpec{many(key("key"))}, op: engine.OpDel, parse: parseKeys(engine.MultiSum, 0)},
		{name: "exists", cats: catKeyspace, arity: -2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: -1, step: 1, group: "generic", since: "1.0.0",
			summary: "Count how many of the keys exist.", args: []argSpec{many(key("key"))}, op: engine.OpExists, parse: parseKeys(engine.MultiSum, 0)},
		{name: "type", cats: catKeyspace, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.0.0",
			summary: "The type of a key: string, hash, list, set, zset, gcra, sliding-window, sliding-log, fixed-window, leaky-bucket, concurrency or none.", args: []argSpec{key("key")}, op: engine.OpType, parse: parseKey},
		{name: "ttl", cats: catKeyspace, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.0.0",
			summary: "Seconds to live; for a limiter, its reset_after.", args: []argSpec{key("key")}, op: engine.OpTTL, parse: parseTTLMode(engine.TTLSeconds)},
		{name: "pttl", cats: catKeyspace, keyPerm: permRead, arity: 2, flags: flagReadonly | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.6.0",
			summary: "Milliseconds to live; for a limiter, its reset_after.", args: []argSpec{key("key")}, op: engine.OpTTL, parse: parseTTLMode(engine.TTLMillis)},
		{name: "expire", cats: catKeyspace, keyPerm: permWrite, arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.0.0",
			summary: "Set a string key's time to live in seconds.", args: []argSpec{key("key"), integer("seconds"), token("NX"), token("XX"), token("GT"), token("LT")},
			op: engine.OpExpire, parse: parseExpire(unitSeconds, true, "expire")},
		{name: "pexpire", cats: catKeyspace, keyPerm: permWrite, arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.6.0",
			summary: "Set a string key's time to live in milliseconds.", args: []argSpec{key("key"), integer("milliseconds"), token("NX"), token("XX"), token("GT"), token("LT")},
			op: engine.OpExpire, parse: parseExpire(unitMillis, true, "pexpire")},
		{name: "expireat", cats: catKeyspace, keyPerm: permWrite, arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "1.2.0",
			summary: "Set a string key's expiry as a unix time in seconds.", args: []argSpec{key("key"), integer("unix-time-seconds"), token("NX"), token("XX"), token("GT"), token("LT")},
			op: engine.OpExpire, parse: parseExpire(unitSeconds, false, "expireat")},
		{name: "pexpireat", cats: catKeyspace, keyPerm: permWrite, arity: -3, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.6.0",
			summary: "Set a string key's expiry as a unix time in milliseconds.", args: []argSpec{key("key"), integer("unix-time-milliseconds"), token("NX"), token("XX"), token("GT"), token("LT")},
			op: engine.OpExpire, parse: parseExpire(unitMillis, false, "pexpireat")},
		{name: "persist", cats: catKeyspace, keyPerm: permWrite, arity: 2, flags: flagWrite | flagFast, firstKey: 1, lastKey: 1, step: 1, group: "generic", since: "2.2.0",
			summary: "Remove a string key's expiry.", args: []argSpec{key("key")}, op: engine.OpPersist, parse: parseKey},
		{name: "scan", cats: catKeyspace, arity: -2, flags: flagReadonly, group: "generic", since: "2.8.0",
			summary: "Iterate the key space.", args: []argSpec{integer("cursor"), opt(str("MATCH pattern")), opt(integer("COUNT count")), opt(str("TYPE type"))},
			op: engine.OpScan, parse: parseScan},
		{name: "keys", cats: catKeyspace | catDangerous, arity: 2, flags: flagReadonly, group: "generic", since: "1.0.0",
			summary: "All keys matching a glob pattern (O(N): prefer SCAN).", args: []argSpec{{name: "pattern", typ: "pattern"}}, op: engine.OpKeys, parse: parseKeysPattern},
		{name: "flushall", cats: catKeyspace | catDangerous, arity: -1, flags: flagWrite, group: "server", since: "1.0.0",
			summary: "Remove every key.", args: []argSpec{token("ASYNC"), token("SYNC")}, op: engine.OpFlushAll, parse: parseFlush},
		{name: "flushdb", cats: catKeyspace | catDangerous, arity: -1, flags: flagWrite, group: "server", since: "1.0.0",
			summary: "Remove every key (Sluice has one database).", args: []argSpec{token("ASYNC"), token("SYNC")}, op: engine.OpFlushAll, parse: parseFlush},
		{name: "dbsize", cats: catKeyspace, arity: 1, flags: flagReadonly | flagFast, group: "server", since: "1.0.0",
			summary: "Number of keys, counting expired ones not yet swept.", run: cmdDBSize},

		// Connection and server.
		{name: "ping", cats: catConnection, arity: -1, flags: flagFast | flagStale, group: "connection", since: "1.0.0",
			summary: "PONG, or the message.", args: []argSpec{opt(str("message"))}, run: cmdPing},
		{name: "echo", cats: catConnection, arity: 2, flags: flagFast | flagStale, group: "connection", since: "1.0.0",
			summary: "Echo the message.", args: []argSpec{str("message")}, run: cmdEcho},
		{name: "quit", cats: catConnection, arity: -1, flags: flagFast | flagNoAuth | flagStale, group: "connection", since: "1.0.0",
			summary: "Close the connection.", run: cmdQuit},
		{name: "reset", cats: catConnection, arity: 1, flags: flagFast | flagNoAuth | flagNoScript | flagLoading | flagStale, group: "connection", since: "6.2.0",
			summary: "Reset the connection: end any transaction, WATCH and MONITOR; RESP2; the default user; no name.", run: cmdReset},
		{name: "hello", cats: catConnection, arity: -1, flags: flagFast | flagNoAuth | flagStale, group: "connection", since: "6.0.0",
			summary: "Handshake: protocol 2 (RESP3 answers NOPROTO), optional AUTH and SETNAME.",
			args:    []argSpec{opt(integer("protover")), opt(str("AUTH username password")), opt(str("SETNAME clientname"))}, run: cmdHello},
		{name: "auth", cats: catConnection, arity: -2, flags: flagFast | flagNoAuth | flagStale, group: "connection", since: "1.0.0",
			summary: "Authenticate with requirepass.", args: []argSpec{opt(str("username")), str("password")}, run: cmdAuth},
		{name: "acl", arity: -2, group: "server", since: "6.0.0",
			summary: "ACL SETUSER|GETUSER|DELUSER|LIST|USERS|WHOAMI|CAT|LOG|SAVE|LOAD|GENPASS|DRYRUN: users and their permissions.",
			args:    []argSpec{str("subcommand"), opt(many(str("arg")))},
			subs: []*command{
				sub("cat", -2, 0, 0), sub("deluser", -3, flagAdmin, 0), sub("dryrun", -4, flagAdmin, 0), sub("genpass", -2, 0, 0),
				sub("getuser", 3, flagAdmin, 0), sub("help", 2, 0, 0), sub("list", 2, flagAdmin, 0), sub("load", 2, flagAdmin, 0),
				sub("log", -2, flagAdmin, 0), sub("save", 2, flagAdmin, 0), sub("setuser", -3, flagAdmin, 0), sub("users", 2, flagAdmin, 0),
				sub("whoami", 2, 0, 0),
			},
			run: cmdACL},
		{name: "select", cats: catConnection, arity: 2, flags: flagFast | flagStale, group: "connection", since: "1.0.0",
			summary: "Select database 0 (the only one).", args: []argSpec{integer("index")}, run: cmdSelect},
		{name: "client", arity: -2, flags: flagStale, group: "connection", since: "2.4.0",
			summary: "CLIENT SETNAME|GETNAME|ID|SETINFO|LIST|INFO|KILL|PAUSE|UNPAUSE|NO-EVICT|REPLY.", args: []argSpec{str("subcommand"), opt(many(str("arg")))}, subs: []*command{
				sub("setname", 3, 0, catConnection), sub("getname", 2, 0, catConnection), sub("id", 2, 0, catConnection),
				sub("setinfo", 4, 0, catConnection), sub("list", -2, flagAdmin, catConnection), sub("info", 2, 0, catConnection),
				sub("kill", -3, flagAdmin, catConnection), sub("pause", -3, flagAdmin, catConnection), sub("unpause", 2, flagAdmin, catConnection),
				sub("no-evict", 3, flagAdmin, catConnection), sub("reply", 3, 0, catConnection),
			},
			run: cmdClient},
		{name: "monitor", arity: 1, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", since: "1.0.0",
			summary: "Stream every command the server runs to this connection.", run: cmdMonitor},
		{name: "command", cats: catConnection, arity: -1, flags: flagStale, group: "server", since: "2.8.13",
			summary: "COMMAND, COMMAND COUNT|INFO|DOCS|LIST|GETKEYS.", args: []argSpec{opt(str("subcommand")), opt(many(str("arg")))}, subs: []*command{
				sub("count", 2, 0, catConnection), sub("docs", -2, 0, catConnection), sub("info", -2, 0, catConnection), sub("list", -2, 0, catConnection),
				sub("getkeys", -4, 0, catConnection),
			},
			run: cmdCommand},
		{name: "info", cats: catDangerous, arity: -1, flags: flagStale, group: "server", since: "1.0.0",
			summary: "Server information: server, clients, memory, stats, keyspace.", args: []argSpec{opt(many(str("section")))}, run: cmdInfo},
		{name: "config", arity: -2, flags: flagStale, group: "server", since: "2.0.0",
			summary: "CONFIG GET pattern / CONFIG SET parameter value / CONFIG RESETSTAT / CONFIG REWRITE.", args: []argSpec{str("subcommand"), opt(many(str("arg")))}, subs: []*command{
				sub("get", -3, flagAdmin, 0), sub("set", -4, flagAdmin, 0), sub("resetstat", 2, flagAdmin, 0), sub("rewrite", 2, flagAdmin, 0),
			},
			run: cmdConfig},
		{name: "time", arity: 1, flags: flagFast | flagStale, group: "server", since: "2.6.0",
			summary: "The server clock: unix seconds and microseconds.", run: cmdTime},
		{name: "save", arity: 1, flags: flagAdmin, group: "server", since: "1.0.0",
			summary: "Take a snapshot now and compact the append-only file.", run: cmdSave},
		{name: "shutdown", arity: -1, flags: flagAdmin | flagNoScript | flagLoading | flagStale, group: "server", since: "1.0.0",
			summary: "Stop the server: what a SIGTERM does (NOSAVE: without the final snapshot; the append-only file keeps everything).",
			args:    []argSpec{token("NOSAVE"), token("SAVE"), token("NOW"), token("FORCE"), token("ABORT")}, run: cmdShutdown},
		{name: "bgsave", arity: -1, flags: flagAdmin, group: "server", since: "1.0.0",
			summary: "Take a snapshot in the background.", args: []argSpec{token("SCHEDULE")}, run: cmdBgsave},
		{name: "lastsave", cats: catAdmin | catDangerous, arity: 1, flags: flagFast | flagStale, group: "server", since: "1.0.0",
			summary: "Unix time of the last successful snapshot.", run: cmdLastsave},
		{name: "readonly", cats: catConnection, arity: 1, flags: flagFast | flagStale, group: "cluster", since: "3.0.0",
			summary: "Let this connection read from a follower's applied state (cluster mode).", run: cmdReadonly},
		{name: "readwrite", cats: catConnection, arity: 1, flags: flagFast | flagStale, group: "cluster", since: "3.0.0",
			summary: "Send this connection's reads to the leader again (cluster mode).", run: cmdReadwrite},
		{name: "asking", cats: catConnection, arity: 1, flags: flagFast, group: "cluster", since: "3.0.0",
			summary: "Accepted for cluster clients; one group owns every slot, so it changes nothing.", run: cmdAsking},
		{name: "role", cats: catAdmin | catDangerous, arity: 1, flags: flagFast | flagStale | flagNoScript, group: "server", since: "2.8.12",
			summary: "master with its replicas, or slave with its leader (cluster mode: the Raft leader is the master).", run: cmdRole},
		{name: "cluster", arity: -2, flags: flagStale, group: "cluster", since: "3.0.0",
			summary: "CLUSTER SLOTS|SHARDS|NODES|INFO|MYID|KEYSLOT, CLUSTER GROUPS (each Raft group's slots, leader, voters and non-voters), and CLUSTER JOIN id raft-addr client-addr / FORGET id for membership.",
			args:    []argSpec{str("subcommand"), opt(many(str("arg")))}, subs: []*command{
				sub("slots", 2, 0, 0), sub("shards", 2, 0, 0), sub("nodes", 2, 0, 0), sub("info", 2, 0, 0), sub("myid", 2, 0, 0),
				sub("groups", 2, 0, 0), sub("keyslot", 3, 0, 0), sub("join", 5, flagAdmin, catCluster), sub("forget", 3, flagAdmin, catCluster),
			},
			run: cmdCluster},
		{name: "slowlog", arity: -2, group: "server", since: "2.2.12",
			summary: "SLOWLOG GET [count]|LEN|RESET|HELP: the commands slower than slowlog-log-slower-than.", args: []argSpec{str("subcommand"), opt(many(str("arg")))}, subs: []*command{
				sub("get", -2, flagAdmin|flagLoading|flagStale, 0), sub("help", 2, flagLoading|flagStale, 0),
				sub("len", 2, flagAdmin|flagLoading|flagStale, 0), sub("reset", 2, flagAdmin|flagLoading|flagStale, 0),
			},
			run: cmdSlowlog},
		{name: "latency", arity: -2, group: "server", since: "2.8.13",
			summary: "LATENCY LATEST|HISTORY|RESET|HISTOGRAM|GRAPH|DOCTOR|HELP: the latency monitor and per-command histograms.", args: []argSpec{str("subcommand"), opt(many(str("arg")))}, subs: []*command{
				sub("doctor", 2, flagAdmin|flagNoScript|flagLoading|flagStale, 0), sub("graph", 3, flagAdmin|flagNoScript|flagLoading|flagStale, 0),
				sub("help", 2, flagLoading|flagStale, 0), sub("histogram", -2, flagAdmin|flagNoScript|flagLoading|flagStale, 0),
				sub("history", 3, flagAdmin|flagNoScript|flagLoading|flagStale, 0), sub("latest", 2, flagAdmin|flagNoScript|flagLoading|flagStale, 0),
				sub("reset", -2, flagAdmin|flagNoScript|flagLoading|flagStale, 0),
			},
			run: cmdLatency},
		{name: "debug", arity: -2, flags: flagAdmin, group: "server", since: "1.0.0",
			summary: "DEBUG CLOCK SET unix_ms|ADVANCE ms|GET|REAL (needs --enable-debug-command).", args: []argSpec{str("subcommand"), opt(many(str("arg")))}, run: cmdDebug},
	}
}

// sortedCommands lists the table in name order for COMMAND replies.
func sortedCommands() []*command {
	list := make([]*command, 0, len(commands))
	for _, c := range commands {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	return list
}

// parseKeyArgs is the parser of a data-type command: the key, then the
// arguments as sent, which the engine op parses on the shard owner in the
// order Redis checks them.
func parseKeyArgs(c *engine.Command, args [][]byte) error {
	c.Key = args[1]
	c.Args = append(c.Args[:0], args[2:]...)
	return nil
}
