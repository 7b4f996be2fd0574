package server

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/script"
)

// Script acceleration: a few scripts carry most limiter traffic, and each
// is a fixed text. For those, known by the SHA1 of their exact bytes, a Go
// function does what the script does: the same commands through the same
// path as the script's redis.call (so the same stored values, TTLs and
// journal effects), numbers formatted as Lua would format them, the same
// reply. A native function covers the arguments it can prove it handles
// alike; for anything else (an argument Lua would coerce differently, a
// command that fails) it gives up before it has changed anything, and the
// interpreter runs the script instead, so the answer is the script's own.

// nativeScript runs a known script. done is false when it gave up, having
// changed nothing.
type nativeScript struct {
	id   int64  // stable: see knownScripts
	sha  string // of the exact text the library sends
	name string // the library and script, for SCRIPT PATH and the docs
	// stat names its INFO line (script_native_<stat>): letters, digits
	// and underscores.
	stat string
	run  func(sr *scriptRun) (rep engine.Reply, done bool)
	idx  int // in knownScripts, and so in accel.counts
}

// knownScripts are the accelerated scripts, in the order INFO lists them.
// Each id is written into replicated EVALs (engine.NativeAt): it keeps its
// number forever, and a retired script leaves a gap.
var knownScripts = []*nativeScript{
	// go-redis/redis_rate v10 (v10.0.1), allowN.
	{id: 1, sha: "f52a5b566060d79fd321d695df55bc918339c4aa", name: "go-redis/redis_rate allowN", stat: "redis_rate_allown", run: redisRateAllowN},
	// rate-limiter-flexible 11.4.0, RateLimiterRedis's incrTtlLuaScript.
	{id: 2, sha: "a1de965f42e177aa339706bd580f049065eca79a", name: "rate-limiter-flexible incrTtl", stat: "rlflex_incrttl", run: rlflexIncrTTL},
	// rate-limit-redis 6.0.1, increment.
	{id: 3, sha: "895b92e1712734e1b464999be23953485475357b", name: "rate-limit-redis increment", stat: "rate_limit_redis_increment", run: rateLimitRedisIncrement},
	// go-redis/redis_rate v10 (v10.0.1), allowAtMost.
	{id: 4, sha: "054143318f521948424aa25df61d7f7ba835a9d7", name: "go-redis/redis_rate allowAtMost", stat: "redis_rate_allowatmost", run: redisRateAllowAtMost},
	// ulule/limiter v3.11.2, the redis store's luaIncrScript and luaPeekScript.
	{id: 5, sha: "f74233f556d3f99c50b61169cf8aa8d5deb63fb2", name: "ulule/limiter incr", stat: "ulule_incr", run: ululeIncr},
	{id: 6, sha: "566f5c6a17e5fddb9a10bf389f754edd0d899c61", name: "ulule/limiter peek", stat: "ulule_peek", run: ululePeek},
	// throttled/throttled v2.15.0, goredisstore.v9's redisCASScript.
	{id: 7, sha: "ebd682e30de074a6919bde872b507734c7c3ebe5", name: "throttled goredisstore compare-and-swap", stat: "throttled_cas", run: throttledCAS},
	// @fastify/rate-limit 11.2.0, RedisStore's lua and luaRead.
	{id: 8, sha: "b8a19d47785922bb04e7a9fdb49e90d89be1b8af", name: "@fastify/rate-limit incr", stat: "fastify_incr", run: fastifyIncr},
	{id: 9, sha: "4c7d9ef62b3d4f8efd8d11d5d2fd1a56b1e723bc", name: "@fastify/rate-limit read", stat: "fastify_read", run: fastifyRead},
	// rate-limit-redis 6.0.1, get.
	{id: 10, sha: "6aeb97ed6086dcdeafdc6fda3999a0d0e38ec96a", name: "rate-limit-redis get", stat: "rate_limit_redis_get", run: rateLimitRedisGet},
	// limits 2.8.0 (Python), incr_expire.lua (fixed window).
	{id: 11, sha: "628bd136a573a06b346879695681af12ccef300f", name: "limits incr_expire", stat: "limits_incr_expire", run: limitsIncrExpire},
	// limits 2.8.0, moving_window.lua (the moving window's count).
	{id: 12, sha: "3136f0028c572d2959b5cdc5ec15b287fab6a9ff", name: "limits moving_window", stat: "limits_moving_window", run: limitsMovingWindow},
	// limits 2.8.0, acquire_moving_window.lua (the moving window's hit).
	{id: 13, sha: "d19f37c18768a509dbf1310a257bfc35be65609f", name: "limits acquire_moving_window", stat: "limits_acquire_moving_window", run: limitsAcquireMovingWindow},
}

// knownBySHA and knownByID index knownScripts.
var knownBySHA, knownByID = func() (map[string]*nativeScript, map[int64]*nativeScript) {
	bySHA := make(map[string]*nativeScript, len(knownScripts))
	byID := make(map[int64]*nativeScript, len(knownScripts))
	for i, n := range knownScripts {
		n.idx = i
		if bySHA[n.sha] != nil || byID[n.id] != nil || n.id <= 0 {
			panic("server: known script " + n.name + " registered twice or without an id")
		}
		bySHA[n.sha], byID[n.id] = n, n
	}
	return bySHA, byID
}()

// scriptCounts are one known script's runs on one server.
type scriptCounts struct {
	native, fallback atomic.Int64 // answered natively; given to the interpreter
}

// accel is a Scripts' acceleration state.
type accel struct {
	off atomic.Bool // CONFIG SET script-acceleration no
	// byBody memoizes body -> native script (nil: none), so that a run
	// neither hashes its body nor allocates to look it up: an immutable
	// map, replaced whole under mu; bounded, past which unknown bodies
	// are hashed again.
	mu       sync.Mutex
	byBody   atomic.Pointer[map[string]*nativeScript]
	native   atomic.Int64   // runs answered natively
	fallback atomic.Int64   // runs a native function gave to the interpreter
	lua      atomic.Int64   // runs of the interpreter
	counts   []scriptCounts // by knownScripts' index (made by NewScripts)
}

const maxMemoizedBodies = 4096

// knownBySHAOf finds the known script whose SHA1 is sha, in hex of either
// case.
func knownBySHAOf(sha []byte) *nativeScript {
	if n, ok := knownBySHA[string(sha)]; ok || len(sha) != 40 {
		return n
	}
	var lower [40]byte
	for i, ch := range sha {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	return knownBySHA[string(lower[:])]
}

// lookup finds body's native implementation, if any.
func (a *accel) lookup(body []byte) *nativeScript {
	if m := a.byBody.Load(); m != nil {
		if n, ok := (*m)[string(body)]; ok {
			return n
		}
	}
	sum := sha1.Sum(body)
	n := knownBySHA[hex.EncodeToString(sum[:])]
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.byBody.Load()
	if old != nil && (len(*old) >= maxMemoizedBodies && n == nil) {
		return n
	}
	m := make(map[string]*nativeScript, 1+len(mapOrEmpty(old)))
	for k, v := range mapOrEmpty(old) {
		m[k] = v
	}
	m[string(body)] = n
	a.byBody.Store(&m)
	return n
}

func mapOrEmpty(m *map[string]*nativeScript) map[string]*nativeScript {
	if m == nil {
		return nil
	}
	return *m
}

// statLines are INFO's lines per known script:
// script_native_<stat>:runs=N,fallbacks=M.
func (a *accel) statLines() []string {
	lines := make([]string, len(knownScripts))
	for i, n := range knownScripts {
		c := &a.counts[i]
		lines[i] = "script_native_" + n.stat + ":runs=" + strconv.FormatInt(c.native.Load(), 10) +
			",fallbacks=" + strconv.FormatInt(c.fallback.Load(), 10)
	}
	return lines
}

// forget drops the memo (SCRIPT FLUSH).
func (a *accel) forget() { a.byBody.Store(nil) }

// pathOf names the path a script takes, for SCRIPT introspection.
func (a *accel) pathOf(body []byte) string {
	if n := a.lookup(body); n != nil && !a.off.Load() {
		return "native: " + n.name
	}
	return "interpreter"
}

// RunNative runs a known script for the engine (engine.NativeScripts),
// on the goroutine holding its key: each of its commands is parsed with
// the command table and run on the held table through NativeRun.Do, and
// counted when the run ends, as the interpreter's redis.call would be.
func (s *Scripts) RunNative(id int64, r *engine.NativeRun) (engine.Reply, bool) {
	n := knownByID[id]
	if n == nil {
		return engine.Reply{}, false // an id this build does not know
	}
	sr, _ := s.runs.Get().(*scriptRun)
	if sr == nil {
		sr = &scriptRun{s: s}
		sr.timer = time.AfterFunc(time.Hour, sr.overThreshold)
		sr.timer.Stop()
	}
	sr.native = r
	start := monoNow()
	rep, done := n.run(sr)
	if done && len(sr.pending) > 0 {
		// One clock reading for the run, shared by its calls: the native
		// calls take a few hundred nanoseconds, less than two readings
		// per call would add.
		per := (monoNow() - start) / time.Duration(len(sr.pending))
		for i := range sr.pending {
			sr.pending[i].took = per
		}
	}
	sr.settle(done && !r.Replaying())
	// Pooled: it must not keep the last call's bytes (a read buffer, a
	// Raft entry) alive.
	sr.native, sr.argv, sr.cmd = nil, [8][]byte{}, engine.Command{}
	s.runs.Put(sr)
	if done {
		s.accel.native.Add(1)
		s.accel.counts[n.idx].native.Add(1)
	} else {
		s.accel.fallback.Add(1)
		s.accel.counts[n.idx].fallback.Add(1)
	}
	return rep, done
}

// nativeCmd is a command a native script calls: its name as the script
// writes it (never stored, so shared) and its row of the command table.
type nativeCmd struct {
	name []byte
	row  *command
}

// The commands native scripts call, and the option words they send.
var (
	cGET     = &nativeCmd{name: []byte("GET")}
	cSET     = &nativeCmd{name: []byte("SET")}
	cINCR    = &nativeCmd{name: []byte("INCR")}
	cINCRBY  = &nativeCmd{name: []byte("INCRBY")}
	cPTTL    = &nativeCmd{name: []byte("PTTL")}
	cEXPIRE  = &nativeCmd{name: []byte("EXPIRE")}
	cPEXPIRE = &nativeCmd{name: []byte("PEXPIRE")}
	cSETEX   = &nativeCmd{name: []byte("SETEX")}
	cLRANGE  = &nativeCmd{name: []byte("LRANGE")}
	cLINDEX  = &nativeCmd{name: []byte("LINDEX")}
	cLPUSH   = &nativeCmd{name: []byte("LPUSH")}
	cLTRIM   = &nativeCmd{name: []byte("LTRIM")}
	cTIME    = &nativeCmd{name: []byte("TIME")}

	wEX = []byte("EX")
	wPX = []byte("PX")
	wNX = []byte("NX")
	// Values the scripts store: read-only, shared (SET copies a value
	// into the table; the journal reads it).
	wZero = []byte("0")
	wOne  = []byte("1")
)

// resolveNativeCmds finds the native commands' rows, once the command
// table is built (its init).
func resolveNativeCmds() {
	for _, c := range []*nativeCmd{cGET, cSET, cINCR, cINCRBY, cPTTL, cEXPIRE, cPEXPIRE, cSETEX, cLRANGE, cLINDEX, cLPUSH, cLTRIM, cTIME} {
		if c.row = lookupCommand(c.name); c.row == nil {
			panic("server: a native script calls " + string(c.name) + ", which the command table lacks")
		}
	}
}

// call runs one of a native script's commands as its redis.call would:
// parsed by the command's own parser, run on the held table. The commands
// are fixed, so Call's checks (the command exists, fits its arity, may run
// in a script) hold; the caller is unrestricted (the native path is not
// taken for an ACL user); a read-only run refuses a write in Do.
//
// The arguments are the batch's own or freshly made, so they outlive the
// call as the journal needs. Their list is copied into the run's own
// (parsers copy the elements they keep, never the list), so that the
// variadic list stays on the caller's stack.
func (sr *scriptRun) call(c *nativeCmd, args ...[]byte) engine.Reply {
	var argv [][]byte
	if len(args) < len(sr.argv) {
		argv = sr.argv[:1+copy(sr.argv[1:], args)]
	} else {
		argv = append(make([][]byte, 0, 1+len(args)), nil)
		argv = append(argv, args...)
	}
	argv[0] = c.name
	ec := &sr.cmd
	*ec = engine.Command{}
	if err := c.row.parseInto(ec, argv); err != nil {
		r := rawErr(errorText(err))
		sr.ran(c.row, argv, 0, r)
		return r
	}
	r := sr.native.Do(ec)
	if r.Kind == engine.ReplyError {
		r.Err = engine.RawError(errorText(r.Err))
	}
	sr.ran(c.row, argv, 0, r)
	return r
}

// peek is call for a read the script does not make (the native code
// looking ahead): not counted in the statistics nor shown to monitors,
// which show the script's own commands.
func (sr *scriptRun) peek(c *nativeCmd, args ...[]byte) engine.Reply {
	sr.quiet = true
	r := sr.call(c, args...)
	sr.quiet = false
	return r
}

// countTime accounts the TIME a script calls where its native code reads
// the run's clock.
func (sr *scriptRun) countTime() {
	sr.ran(cTIME.row, [][]byte{cTIME.name}, 0, engine.Reply{Kind: engine.ReplyArray})
}

// Lua's coercion of a string to a number, for the strings native
// functions accept: plain decimals (an optional minus, digits, a point,
// an exponent), which strtod and strconv read to the same double. Hex,
// spaces, inf and nan coerce too in Lua, but send the script to the
// interpreter here.
func luaDecimal(b []byte) (float64, bool) {
	if f, ok := smallInteger(b); ok {
		return f, true
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		digits++
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return 0, false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			exp++
		}
		if exp == 0 {
			return 0, false
		}
	}
	if i != len(b) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// smallInteger reads the common argument, a plain integer of up to 15
// digits, without the general parser: such an integer is exact as a
// double, so strtod would give the same.
func smallInteger(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	return float64(n), true
}

func intItem(n int64) engine.Reply   { return engine.Reply{Kind: engine.ReplyInt, Int: n} }
func numItem(f float64) engine.Reply { return intItem(script.ReplyInteger(f)) }

// strItem is a Lua number in a script's reply, a bulk string as tostring
// writes it, in the batch's memory.
func (sr *scriptRun) strItem(f float64) engine.Reply {
	var buf [32]byte
	return engine.Reply{Kind: engine.ReplyBulk, Bulk: sr.native.Keep(script.AppendNumberString(buf[:0], f))}
}

// array is a script's reply table, its items in the batch's memory.
func (sr *scriptRun) array(items ...engine.Reply) engine.Reply {
	out := sr.native.Items(len(items))
	copy(out, items)
	return engine.Reply{Kind: engine.ReplyArray, Items: out}
}

// arg is a Lua number passed to redis.call (script.CallArg), in the
// batch's memory, which outlives the run as the journal needs.
func (sr *scriptRun) arg(f float64) []byte {
	var buf [32]byte
	return sr.native.Keep(script.AppendCallArg(buf[:0], f))
}

// redisRateArgs reads redis_rate's burst, rate, period and cost, as the
// scripts' arithmetic coerces them, and the emission interval.
func redisRateArgs(r *engine.NativeRun) (burst, emission, cost float64, ok bool) {
	if len(r.Keys) < 1 || len(r.Args) < 4 {
		return 0, 0, 0, false
	}
	burst, ok1 := luaDecimal(r.Args[0])
	rate, ok2 := luaDecimal(r.Args[1])
	period, ok3 := luaDecimal(r.Args[2])
	cost, ok4 := luaDecimal(r.Args[3])
	if !ok1 || !ok2 || !ok3 || !ok4 || rate <= 0 || period <= 0 {
		return 0, 0, 0, false
	}
	return burst, period / rate, cost, true
}

// redisRateTAT is the scripts' now (TIME, in seconds since 2017 as a
// float: (now[1] - jan_1_2017) + (now[2] / 1000000)) and the stored TAT
// (now when there is none), or false when the stored value is not a
// plain number.
func redisRateTAT(sr *scriptRun, key []byte) (now, tat float64, ok bool) {
	const jan1st2017 = 1483228800
	r := sr.native
	now = float64(r.Now/1e9-jan1st2017) + float64(r.Now%1e9/1e3)/1000000
	sr.countTime() // the script's redis.call("TIME"), read from the run's clock
	v, found, give := accelGetString(sr.call(cGET, key))
	switch {
	case give:
		return 0, 0, false
	case !found:
		tat = now
	default:
		if tat, ok = luaDecimal(v); !ok {
			return 0, 0, false
		}
	}
	if now > tat { // math.max(tat, now)
		tat = now
	}
	return now, tat, true
}

// redisRateSet stores the new TAT as the scripts do: SET with EX of the
// whole seconds left, rounded up. false: the SET failed (EX out of range),
// and, being the only write, changed nothing.
func redisRateSet(sr *scriptRun, key []byte, newTat, resetAfter float64) bool {
	set := sr.call(cSET, key, sr.arg(newTat), wEX, sr.arg(math.Ceil(resetAfter)))
	return set.Kind != engine.ReplyError
}

// redisRateAllowN is go-redis/redis_rate's GCRA: the TAT is a Lua float
// in a string, SET with EX of the whole seconds left.
func redisRateAllowN(sr *scriptRun) (engine.Reply, bool) {
	burst, emission, cost, ok := redisRateArgs(sr.native)
	if !ok {
		return engine.Reply{}, false
	}
	// float64() keeps each product rounded on its own, as Lua's are
	// (no fused multiply-add).
	increment := float64(emission * cost)
	burstOffset := float64(emission * burst)
	key := sr.native.Keys[0]
	now, tat, ok := redisRateTAT(sr, key)
	if !ok {
		return engine.Reply{}, false
	}
	newTat := tat + increment
	allowAt := newTat - burstOffset
	diff := now - allowAt
	remaining := diff / emission
	if remaining < 0 {
		return sr.array(
			intItem(0), intItem(0), sr.strItem(diff*-1), sr.strItem(tat-now)), true
	}
	resetAfter := newTat - now
	if resetAfter > 0 && !redisRateSet(sr, key, newTat, resetAfter) {
		return engine.Reply{}, false
	}
	return sr.array(
		numItem(cost), numItem(remaining), sr.strItem(-1), sr.strItem(resetAfter)), true
}

// redisRateAllowAtMost is redis_rate's AllowAtMost: GCRA that grants what
// is left when less than cost is, at least one.
func redisRateAllowAtMost(sr *scriptRun) (engine.Reply, bool) {
	burst, emission, cost, ok := redisRateArgs(sr.native)
	if !ok {
		return engine.Reply{}, false
	}
	burstOffset := float64(emission * burst)
	key := sr.native.Keys[0]
	now, tat, ok := redisRateTAT(sr, key)
	if !ok {
		return engine.Reply{}, false
	}
	diff := now - (tat - burstOffset)
	remaining := diff / emission
	if remaining < 1 {
		return sr.array(
			intItem(0), intItem(0), sr.strItem(emission-diff), sr.strItem(tat-now)), true
	}
	if remaining < cost {
		cost, remaining = remaining, 0
	} else {
		remaining -= cost
	}
	newTat := tat + float64(emission*cost)
	resetAfter := newTat - now
	if resetAfter > 0 && !redisRateSet(sr, key, newTat, resetAfter) {
		return engine.Reply{}, false
	}
	return sr.array(
		numItem(cost), numItem(remaining), sr.strItem(-1), sr.strItem(resetAfter)), true
}

// rlflexIncrTTL is rate-limiter-flexible's counter: SET NX with EX, INCRBY,
// and the PTTL (an EXPIRE when the key had none).
func rlflexIncrTTL(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 2 {
		return engine.Reply{}, false
	}
	// INCRBY's increment and SET's EX as Redis reads them, so that once
	// SET NX has created the key nothing after it can fail.
	if _, err := engine.ParseInt64(r.Args[0]); err != nil {
		return engine.Reply{}, false
	}
	secs, err := engine.ParseInt64(r.Args[1])
	if err != nil || secs <= 0 || secs > 1e9 {
		return engine.Reply{}, false
	}
	key := r.Keys[0]
	if rep := sr.call(cSET, key, wZero, wEX, r.Args[1], wNX); rep.Kind == engine.ReplyError {
		return engine.Reply{}, false
	}
	consumed := sr.call(cINCRBY, key, r.Args[0])
	if consumed.Kind != engine.ReplyInt {
		// Only when the key was there already (SET NX wrote nothing).
		return engine.Reply{}, false
	}
	ttl := sr.call(cPTTL, key)
	if ttl.Kind != engine.ReplyInt {
		return engine.Reply{}, false
	}
	out := intItem(ttl.Int)
	if ttl.Int == -1 {
		sr.call(cEXPIRE, key, r.Args[1])
		out = numItem(float64(1000 * float64(secs)))
	}
	// consumed is a Lua number in the script: above 2^53 it is rounded.
	return sr.array(numItem(float64(consumed.Int)), out), true
}

// rateLimitRedisIncrement is rate-limit-redis's fixed window: a new
// window is SET 1 PX windowMs, a running one INCR.
func rateLimitRedisIncrement(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 1 {
		return engine.Reply{}, false
	}
	window, ok := luaDecimal(r.Args[0])
	if !ok || window != math.Trunc(window) || window < 1 || window > 1e15 {
		return engine.Reply{}, false
	}
	key := r.Keys[0]
	ttl := sr.call(cPTTL, key)
	if ttl.Kind != engine.ReplyInt {
		return engine.Reply{}, false
	}
	if ttl.Int <= 0 {
		if rep := sr.call(cSET, key, wOne, wPX, sr.arg(window)); rep.Kind == engine.ReplyError {
			return engine.Reply{}, false
		}
		return sr.array(intItem(1), numItem(window)), true
	}
	hits := sr.call(cINCR, key)
	if hits.Kind != engine.ReplyInt {
		return engine.Reply{}, false // nothing was written
	}
	// totalHits is a Lua number in the script: above 2^53 it is rounded.
	return sr.array(numItem(float64(hits.Int)), intItem(ttl.Int)), true
}
