package server

import (
	"math"

	"github.com/sluicehq/sluice/engine"
)

// The Python limits library's Redis scripts (limits 2.8.0,
// limits/resources/redis/lua_scripts; bench/scripts/limits_*.lua), as
// redis-py sends them. Each function below validates everything the
// script's later commands depend on before its first write, and gives up
// (changing nothing) on anything it cannot prove it handles as Lua and
// Redis would.

// limitsMaxUnpack is the most values unpack(t) returns in Redis's Lua 5.1:
// lua_checkstack refuses when the frame's one argument and n results pass
// LUAI_MAXCSTACK (8000), "too many results to unpack".
const limitsMaxUnpack = 7999

// limitsMaxExpiry bounds the expiries (in seconds) passed on to EXPIRE,
// far inside what Redis's and Sluice's EXPIRE accept ("invalid expire
// time" past that), so that an EXPIRE after a write cannot fail.
const limitsMaxExpiry = 1e9

// limitsMaxIndex bounds list indexes computed from Lua numbers: integers
// of this size are exact doubles, written by redis.call as plain digits.
const limitsMaxIndex = 1e15

// bulkBytes is a bulk reply's bytes.
func bulkBytes(r engine.Reply) []byte {
	if r.Bulk != nil {
		return r.Bulk
	}
	return []byte(r.Str)
}

// callInt is a Lua number as redis.call writes it (%.17g), when the
// command that reads it as an integer (string2ll) would accept it.
func (sr *scriptRun) callInt(f float64) ([]byte, bool) {
	b := sr.arg(f)
	if _, err := engine.ParseInt64(b); err != nil {
		return nil, false
	}
	return b, true
}

// limitsIncrExpire is limits' fixed window (incr_expire.lua):
//
//	local current
//	local amount = tonumber(ARGV[2])
//	current = redis.call("incrby", KEYS[1], amount)
//	if tonumber(current) == amount then
//	    redis.call("expire", KEYS[1], ARGV[1])
//	end
//	return current
//
// ARGV = {expiry, amount}. amount reaches INCRBY as a Lua number, so
// written with %.17g ("1.0" is sent as 1, "1.5" fails, "-0" is "-0" and
// fails too). The EXPIRE comes after INCRBY has written, so its argument
// (the string itself) is checked first. current is INCRBY's integer as a
// Lua number (a double), compared with amount as doubles, and returned as
// that double converted back: beyond 2^53 the reply is rounded as Redis's
// is.
func limitsIncrExpire(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 2 {
		return engine.Reply{}, false
	}
	amount, ok := luaDecimal(r.Args[1])
	if !ok {
		return engine.Reply{}, false
	}
	incr, ok := sr.callInt(amount)
	if !ok {
		return engine.Reply{}, false // INCRBY would fail, a script error
	}
	// EXPIRE's argument as EXPIRE reads it; 0 and negatives delete the
	// key, as they do on Redis.
	secs, err := engine.ParseInt64(r.Args[0])
	if err != nil || secs < -limitsMaxExpiry || secs > limitsMaxExpiry {
		return engine.Reply{}, false
	}
	key := r.Keys[0]
	cur := sr.call(cINCRBY, key, incr)
	if cur.Kind != engine.ReplyInt {
		// Another type, not an integer, an overflow, a read-only run:
		// INCRBY failed and wrote nothing.
		return engine.Reply{}, false
	}
	current := float64(cur.Int)
	if current == amount {
		sr.call(cEXPIRE, key, r.Args[0])
	}
	return numItem(current), true
}

// limitsMovingWindow is limits' moving window count (moving_window.lua),
// read-only:
//
//	local items = redis.call('lrange', KEYS[1], 0, tonumber(ARGV[2]))
//	local expiry = tonumber(ARGV[1])
//	local a = 0
//	local oldest = nil
//	for idx=1,#items do
//	    if tonumber(items[idx]) >= expiry then
//	        a = a + 1
//	        if oldest == nil then
//	            oldest = tonumber(items[idx])
//	        end
//	    else
//	        break
//	    end
//	end
//	return {oldest, a}
//
// ARGV = {window start, limit}. The loop counts the leading entries at or
// after the window's start and stops at the first older one; entries past
// it are never read. A non-numeric entry it reaches (tonumber gives nil),
// or a non-numeric start with entries to compare, is a compare error in
// Lua: those go to the interpreter. An empty list never reads ARGV[1].
// oldest is the first entry, set only when it is counted; when nil, the
// returned table {nil, a} is an empty array (Lua's length stops at the
// first nil), otherwise both numbers become integers, truncated.
func limitsMovingWindow(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 2 {
		return engine.Reply{}, false
	}
	limit, ok := luaDecimal(r.Args[1])
	if !ok {
		return engine.Reply{}, false
	}
	end, ok := sr.callInt(limit)
	if !ok {
		return engine.Reply{}, false // LRANGE would fail
	}
	items := sr.call(cLRANGE, r.Keys[0], wZero, end)
	if items.Kind != engine.ReplyArray {
		return engine.Reply{}, false // another type
	}
	empty := engine.Reply{Kind: engine.ReplyArray, Items: []engine.Reply{}}
	if len(items.Items) == 0 {
		return empty, true
	}
	start, ok := luaDecimal(r.Args[0])
	if !ok {
		return engine.Reply{}, false
	}
	n := 0
	var oldest float64
	for _, it := range items.Items {
		if it.Kind != engine.ReplyBulk {
			return engine.Reply{}, false
		}
		v, ok := luaDecimal(bulkBytes(it))
		if !ok {
			return engine.Reply{}, false
		}
		if !(v >= start) {
			break
		}
		if n == 0 {
			oldest = v
		}
		n++
	}
	if n == 0 {
		return empty, true
	}
	return sr.array(numItem(oldest), intItem(int64(n))), true
}

// limitsAcquireMovingWindow is limits' moving window hit
// (acquire_moving_window.lua):
//
//	local amount = tonumber(ARGV[4])
//	local entry = redis.call('lindex', KEYS[1], tonumber(ARGV[2]) - amount)
//	local timestamp = tonumber(ARGV[1])
//	local expiry = tonumber(ARGV[3])
//	if entry and tonumber(entry) >= timestamp - expiry then
//	    return false
//	end
//	local limit = tonumber(ARGV[2])
//	local entries= {}
//	for i=1, amount do
//	    entries[i] = timestamp
//	end
//	redis.call('lpush', KEYS[1], unpack(entries))
//	redis.call('ltrim', KEYS[1], 0, limit - 1)
//	redis.call('expire', KEYS[1], expiry)
//	return true
//
// ARGV = {timestamp (the client's float seconds), limit, expiry, amount}.
// Where Lua semantics matter:
//   - limit - amount, limit - 1 and expiry reach LINDEX, LTRIM and EXPIRE
//     as Lua numbers (%.17g), which those read as integers: all three must
//     be integers, so limit, amount and expiry are (within bounds that
//     keep them exact and EXPIRE's argument valid).
//   - entry is LINDEX's bulk string or false (nil bulk); a string that is
//     not a number is a compare error in Lua, and "" is true.
//   - the pushed values are timestamp as a Lua number, so %.17g
//     ("1764600000.123456" is stored as "1764600000.1234560013"), amount of
//     them. amount <= 0 pushes none: LPUSH with only its key is an arity
//     error, after nothing was written; past limitsMaxUnpack unpack fails.
//     Both go to the interpreter.
//   - LTRIM and EXPIRE follow the first write, so nothing they could
//     refuse is let through: the key holds a list (or nothing) by then.
//     An expiry <= 0 deletes the key, as on Redis.
//   - true is the integer 1, false a nil bulk.
func limitsAcquireMovingWindow(sr *scriptRun) (engine.Reply, bool) {
	r := sr.native
	if len(r.Keys) < 1 || len(r.Args) < 4 {
		return engine.Reply{}, false
	}
	timestamp, ok1 := luaDecimal(r.Args[0])
	limit, ok2 := luaDecimal(r.Args[1])
	expiry, ok3 := luaDecimal(r.Args[2])
	amount, ok4 := luaDecimal(r.Args[3])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return engine.Reply{}, false
	}
	if amount != math.Trunc(amount) || amount < 1 || amount > limitsMaxUnpack ||
		limit != math.Trunc(limit) || math.Abs(limit) > limitsMaxIndex ||
		expiry != math.Trunc(expiry) || math.Abs(expiry) > limitsMaxExpiry {
		return engine.Reply{}, false
	}
	index, ok5 := sr.callInt(limit - amount)
	stop, ok6 := sr.callInt(limit - 1)
	secs, ok7 := sr.callInt(expiry)
	if !ok5 || !ok6 || !ok7 {
		return engine.Reply{}, false // -0 (expiry "-0"), which EXPIRE refuses
	}
	key := r.Keys[0]
	entry := sr.call(cLINDEX, key, index)
	switch entry.Kind {
	case engine.ReplyNil: // false: no entry there
	case engine.ReplyBulk:
		e, ok := luaDecimal(bulkBytes(entry))
		if !ok {
			return engine.Reply{}, false
		}
		if e >= timestamp-expiry {
			return engine.Reply{Kind: engine.ReplyNil}, true // false
		}
	default:
		return engine.Reply{}, false // another type
	}
	ts := sr.arg(timestamp)
	push := make([][]byte, 1+int(amount))
	push[0] = key
	for i := 1; i < len(push); i++ {
		push[i] = ts
	}
	if rep := sr.call(cLPUSH, push...); rep.Kind != engine.ReplyInt {
		return engine.Reply{}, false // refused (a read-only run): nothing written
	}
	sr.call(cLTRIM, key, wZero, stop)
	sr.call(cEXPIRE, key, secs)
	return intItem(1), true
}
