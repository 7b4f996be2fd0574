package engine

import (
	"strconv"

	"github.com/sluicehq/sluice/shard"
)

// Op names what a Command does. Op values are written into the journal and
// into Raft entries, so each one keeps its number forever: a new op takes a
// new number, a retired one leaves a gap.
type Op uint8

// Operations. Everything about each one is in its row of the op table below.
const (
	OpNone     Op = 0
	OpThrottle Op = 1 // CL.THROTTLE: N = max_burst, count, period (ns), quantity
	OpSWCheck  Op = 2 // SW.CHECK: N = limit, window (ns), cost
	OpSLCheck  Op = 3 // SL.CHECK: N = limit, window (ns), cost
	OpFWCheck  Op = 4 // FW.CHECK: N = limit, window (ns), cost
	// 5 is unused (it once marked the end of the decision ops).
	OpRefund  Op = 6  // LIMIT.REFUND: N[0] = amount
	OpInfo    Op = 7  // LIMIT.INFO
	OpGet     Op = 8  // GET, and MGET as a multi-key command
	OpSet     Op = 9  // SET: Value; N[0] = expiry (absolute ns, or relative with FlagRelative)
	OpIncrBy  Op = 10 // INCR, DECR, INCRBY, DECRBY: N[0] = delta
	OpDel     Op = 11 // DEL, UNLINK, LIMIT.RESET (FlagReset)
	OpExists  Op = 12 // EXISTS
	OpType    Op = 13 // TYPE
	OpTTL     Op = 14 // TTL, PTTL: N[0] = 1 for milliseconds
	OpExpire  Op = 15 // EXPIRE and friends: N[0] = expiry (absolute ns, or relative with FlagRelative)
	OpPersist Op = 16 // PERSIST
	// 17 is unused (it once wrapped multi-key commands, which now carry
	// their per-key op with Sub set).
	OpLimitAll Op = 18 // LIMIT.ALL: Sub = the decisions
	OpKeys     Op = 19 // KEYS: Pattern
	OpScan     Op = 20 // SCAN: N = cursor, count; Pattern, TypeFilter
	OpFlushAll Op = 21 // FLUSHALL, FLUSHDB
)

// KeyShape says which keys an op touches, and so how the engine routes it.
type KeyShape uint8

// Key shapes.
const (
	shapeNone KeyShape = iota
	// KeysOne: the command's Key, run by that key's shard owner. With Sub
	// set, the same op on several keys (DEL k1 k2, MGET), run on the held
	// shards and combined as Multi says.
	KeysOne
	// KeysLimits: Sub holds decisions on their own keys, decided all or
	// nothing on the held shards (LIMIT.ALL).
	KeysLimits
	// KeysAll: the whole key space (KEYS, SCAN, FLUSHALL).
	KeysAll
	// KeysHeld: Sub holds the keys (or, for EXEC, the commands) of an op
	// that runs with all their shards held and sees them all at once
	// (RENAME, EXEC).
	KeysHeld
)

// OpSpec is everything the engine, the journal and replication need to know
// about an op. The op table is the only place that classifies ops: routing,
// journaling, follower redirects, MISCONF and maxmemory checks all read it,
// and the server's command table is tested against it.
type OpSpec struct {
	Name string
	// Writes: the op may change state. Only a cluster leader runs it; it is
	// journaled and replicated; it is refused while the journal is failing.
	Writes bool
	// Decision: a rate-limit decision, one that LIMIT.ALL takes; counted
	// as allowed or limited when it has a cost (CONC.ACQUIRE has none, and
	// counters of its own).
	Decision bool
	// costAt is 1 + the index in N of a decision's cost (0: no cost): a
	// decision of cost 0 is a peek, which reads.
	costAt int8
	// once: with a request id, the op's first reply is kept as a receipt
	// and a retry gets it again, as a decision with a cost does
	// (receipts.go): LIMIT.REFUND, whose retry would give units back twice.
	once bool
	// Creates: the op may create state, which maxmemory refuses.
	Creates bool
	Keys    KeyShape

	// changed reports, given its reply, whether a command changed state:
	// only those are journaled. A limited decision or a peek writes nothing.
	changed func(c *Command, r *Reply) bool
	// apply runs a KeysOne op on its key's shard table.
	apply func(j *shardJob, t *shard.Table, c *Command, now int64) Reply
	// applyAll runs a KeysAll op over every shard.
	applyAll func(e *Engine, c *Command, now int64, b *Batch) Reply
	// applyHeld runs a KeysHeld op on its held shards.
	applyHeld func(x *heldRun, c *Command) Reply
	// coordinated: the op runs on the caller's goroutine holding its
	// shards, never on a shard's owner: a script may reach keys it did not
	// declare, and its hold grows for them (script.go).
	coordinated bool
	// Internal: no client command names the op; the engine writes it to
	// the journal (a record moved by RENAME) or the server sends it (WATCH
	// bookkeeping).
	Internal bool
}

// ops is the op table, indexed by op. Read-only after init.
var ops [256]OpSpec

// opFamilies are the op table's rows by family; each family's file keeps
// its op numbers and rows together. Numbers: limiters, strings and keys
// below 50, hashes 50-69, lists 70-89, sets 90-99, sorted sets 100-139,
// transactions 140-149, scripts 150-159.
var opFamilies = []func() map[Op]OpSpec{coreOps, receiptOps, leakyOps, concOps, stringOps, hashOps, listOps, setOps, setAlgebraOps, zsetOps, txOps, scriptOps}

func init() {
	// Filled in init, not in the declaration: the table refers to the ops'
	// functions, some of which (journaling) read the table.
	for _, family := range opFamilies {
		for op, spec := range family() {
			if ops[op].Name != "" {
				panic("engine: op " + strconv.Itoa(int(op)) + " defined twice")
			}
			ops[op] = spec
		}
	}
}

// coreOps are the limiters, the first string ops and the key space.
func coreOps() map[Op]OpSpec {
	return map[Op]OpSpec{
		OpThrottle: {Name: "throttle", Writes: true, Decision: true, Creates: true, Keys: KeysOne, costAt: 4,
			changed: admittedCost(3), apply: (*shardJob).throttle},
		OpSWCheck: {Name: "sw.check", Writes: true, Decision: true, Creates: true, Keys: KeysOne, costAt: 3,
			changed: admittedCost(2), apply: (*shardJob).slidingWindow},
		OpSLCheck: {Name: "sl.check", Writes: true, Decision: true, Creates: true, Keys: KeysOne, costAt: 3,
			changed: admittedCost(2), apply: (*shardJob).slidingLog},
		OpFWCheck: {Name: "fw.check", Writes: true, Decision: true, Creates: true, Keys: KeysOne, costAt: 3,
			changed: admittedCost(2), apply: (*shardJob).fixedWindow},
		OpRefund: {Name: "refund", Writes: true, once: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).refund},
		OpInfo:   {Name: "info", Keys: KeysOne, apply: (*shardJob).info},

		OpGet:    {Name: "get", Keys: KeysOne, apply: (*shardJob).get},
		OpSet:    {Name: "set", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).set},
		OpIncrBy: {Name: "incrby", Writes: true, Creates: true, Keys: KeysOne, changed: succeeded, apply: (*shardJob).incrBy},

		OpDel:     {Name: "del", Writes: true, Keys: KeysOne, changed: positive, apply: (*shardJob).del},
		OpExists:  {Name: "exists", Keys: KeysOne, apply: (*shardJob).exists},
		OpType:    {Name: "type", Keys: KeysOne, apply: (*shardJob).typeOf},
		OpTTL:     {Name: "ttl", Keys: KeysOne, apply: (*shardJob).ttl},
		OpExpire:  {Name: "expire", Writes: true, Keys: KeysOne, changed: positive, apply: (*shardJob).expire},
		OpPersist: {Name: "persist", Writes: true, Keys: KeysOne, changed: positive, apply: (*shardJob).persist},

		OpLimitAll: {Name: "limit.all", Writes: true, Decision: true, Creates: true, Keys: KeysLimits},
		OpKeys:     {Name: "keys", Keys: KeysAll, applyAll: (*Engine).keys},
		OpScan:     {Name: "scan", Keys: KeysAll, applyAll: (*Engine).scan},
		OpFlushAll: {Name: "flushall", Writes: true, Keys: KeysAll, changed: succeeded, applyAll: (*Engine).flushAll},
	}
}

// Spec returns the op's row of the op table; an unknown op has the zero
// OpSpec (it writes nothing and runs nowhere).
func (o Op) Spec() OpSpec {
	if int(o) < len(ops) {
		return ops[o]
	}
	return OpSpec{}
}

func (o Op) spec() *OpSpec {
	if int(o) < len(ops) {
		return &ops[o]
	}
	return &ops[OpNone]
}

func (o Op) String() string {
	if s := o.spec(); s.Name != "" {
		return s.Name
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Ops lists every op in the table that a client command runs, for tests
// that check other tables against it.
func Ops() []Op {
	var list []Op
	for i := range ops {
		if ops[i].Name != "" && !ops[i].Internal {
			list = append(list, Op(i))
		}
	}
	return list
}

// Writes reports whether the command may change state: only a leader may
// run it, and it is journaled and replicated.
//
// A decision of cost 0 (a peek) is a read: it is answered on a follower
// that allows reads and while the journal is failing, and never
// replicated.
func (c *Command) Writes() bool {
	s := c.Op.spec()
	return s.Writes && (s.costAt == 0 || c.N[s.costAt-1] != 0)
}

// takesReqID reports whether the op takes a request id: the decisions with
// a cost, LIMIT.ALL and the once ops (LIMIT.REFUND).
func (s *OpSpec) takesReqID() bool {
	return s.once || s.Decision && (s.costAt > 0 || s.Keys == KeysLimits)
}

// KeyspaceWide reports whether the command reads or changes the whole key
// space rather than named keys (KEYS, SCAN, FLUSHALL).
func (c *Command) KeyspaceWide() bool { return c.Op.spec().Keys == KeysAll }

// EachKey calls f with every key the command names: its own, its
// multi-key parts', and for EXEC its queued commands'. A script's Key is
// not a key but the ACL user it runs as; its keys are its parts.
func (c *Command) EachKey(f func(key []byte)) {
	if len(c.Key) > 0 && !c.Op.spec().coordinated {
		f(c.Key)
	}
	for i := range c.Sub {
		c.Sub[i].EachKey(f)
	}
}

// heldShards reports whether the command runs on held shards: several keys
// that may live on several shards.
func (c *Command) heldShards() bool {
	s := c.Op.spec()
	return s.Keys == KeysLimits || s.Keys == KeysHeld || (s.Keys == KeysOne && len(c.Sub) > 0)
}

// admittedCost: a decision changes state when it is allowed with a
// positive cost, N[costAt], or when it leaves a receipt (a request id and
// a positive cost, allowed or not; a retry that found its receipt is
// unchanged).
func admittedCost(costAt int) func(c *Command, r *Reply) bool {
	return func(c *Command, r *Reply) bool {
		return r.Kind == ReplyDecision && !r.unchanged && c.N[costAt] > 0 && (!r.Dec.Limited || len(c.ReqID) > 0)
	}
}

// succeeded: a write that did not fail changed state, unless the op said
// otherwise (Reply.unchanged).
func succeeded(_ *Command, r *Reply) bool { return r.Kind != ReplyError && !r.unchanged }

// positive: a write whose integer reply counts what it changed (DEL,
// EXPIRE, HDEL, SADD...).
func positive(_ *Command, r *Reply) bool { return r.Kind == ReplyInt && r.Int > 0 }

// changedState reports whether c, answered r, changed state: it is then
// journaled, and bumps the version of a watched key.
func changedState(c *Command, r *Reply) bool {
	ch := c.Op.spec().changed
	return ch != nil && ch(c, r)
}
