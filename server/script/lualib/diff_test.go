package lualib_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server/script/lualib"
)

// The differential tests run the same Lua snippet in gopher-lua with
// lualib.Open and in a real redis-server 7.0 (EVAL), and compare the
// results byte for byte. A snippet is the body of a function returning a
// string; the harness wraps it in pcall, so an error comes back as its
// message (with Lua's "user_script:N:" position, which both sides give
// alike since the chunk is named as Redis names it), and it resets cjson's
// settings afterwards, since in Redis they outlive the script.

// prelude defines helpers every snippet may use. It is one line, so line
// numbers in error messages are the snippet's own plus one.
const prelude = `local INF, NINF, NAN = 1/0, -1/0, 0/0 local NZ = -(1/INF) ` +
	`local function blt(a, b) local n = math.min(#a, #b) for i = 1, n do local x, y = a:byte(i), b:byte(i) if x ~= y then return x < y end end return #a < #b end ` +
	`local function dump(v) local t = type(v) ` +
	`if t == 'table' then local items = {} for k, x in pairs(v) do items[#items+1] = dump(k) .. '=' .. dump(x) end table.sort(items, blt) return '{' .. table.concat(items, ',') .. '}' ` +
	`elseif t == 'number' then return 'n' .. struct.pack('>d', v) ` +
	`elseif t == 'string' then return 's' .. string.len(v) .. ':' .. v ` +
	`elseif t == 'userdata' then if v == cjson.null then return 'null' end return 'ud' ` +
	`elseif t == 'boolean' then if v then return 'T' end return 'F' ` +
	`elseif t == 'nil' then return 'nil' end return t end ` +
	`local function dumpall(...) local out = {} for i = 1, select('#', ...) do out[i] = dump((select(i, ...))) end return select('#', ...) .. ':' .. table.concat(out, ';') end ` +
	`local function hex(s) local parts = {} for j = 1, #s, 1024 do local t = {} for i = j, math.min(j + 1023, #s) do t[#t+1] = string.format('%02x', string.byte(s, i)) end parts[#parts+1] = table.concat(t) end return table.concat(parts) end` + "\n"

const epilogue = "\n" + `cjson.encode_sparse_array(false, 2, 10) cjson.encode_max_depth(1000) cjson.decode_max_depth(1000) ` +
	`cjson.encode_number_precision(14) cjson.encode_keep_buffer(true) cjson.encode_invalid_numbers(false) cjson.decode_invalid_numbers(true) `

func wrap(snippet string) string {
	return prelude + "local ok, r = pcall(function()\n" + snippet + "\nend)" + epilogue +
		"if ok then return 'ok:' .. tostring(r) end return 'err:' .. tostring(r)"
}

// oracle runs scripts on both sides.
type oracle struct {
	tb testing.TB
	rc *sluicetest.RawConn
	L  *lua.LState

	cases, exact, reordered int
	evals                   int
	redisTime, localTime    time.Duration
	slowest                 time.Duration
	slowestCase             string
}

func newOracle(tb testing.TB) *oracle {
	tb.Helper()
	r := sluicetest.StartRedis(tb)
	rc := sluicetest.DialRaw(tb, r.Network, r.Addr)
	if v := rc.Do(tb, "EVAL", "return redis.REDIS_VERSION", "0"); !strings.Contains(v, "\r\n7.0.") {
		tb.Fatalf("the oracle must be Redis 7.0, it says %q", v)
	}
	o := &oracle{tb: tb, rc: rc}
	o.resetLocal()
	return o
}

func (o *oracle) resetLocal() {
	if o.L != nil {
		o.L.Close()
	}
	o.L = newState()
}

func newState() *lua.LState {
	L := lua.NewState(lua.Options{RegistrySize: 1024 * 20, RegistryMaxSize: 1024 * 200, RegistryGrowStep: 4096, CallStackSize: 20000, MinimizeStackMemory: true})
	lualib.Open(L)
	return L
}

// redis runs script with EVAL and returns its string result.
func (o *oracle) redis(script string) string {
	o.tb.Helper()
	o.evals++
	if o.evals%2000 == 0 {
		o.rc.Do(o.tb, "SCRIPT", "FLUSH")
	}
	reply := o.rc.Do(o.tb, "EVAL", script, "0")
	if !strings.HasPrefix(reply, "$") {
		o.tb.Fatalf("redis: %q\nscript:\n%s", reply, script)
	}
	nl := strings.Index(reply, "\r\n")
	n, err := strconv.Atoi(reply[1:nl])
	if err != nil || nl+2+n+2 != len(reply) {
		o.tb.Fatalf("redis: malformed reply %q", reply)
	}
	return reply[nl+2 : nl+2+n]
}

// local runs script in gopher-lua and returns its string result.
func (o *oracle) local(script string) string {
	o.tb.Helper()
	L := o.L
	fn, err := L.Load(strings.NewReader(script), "user_script")
	if err != nil {
		o.tb.Fatalf("gopher-lua cannot compile the script: %v\n%s", err, script)
	}
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		o.tb.Fatalf("gopher-lua: %v\nscript:\n%s", err, script)
	}
	v := L.Get(-1)
	L.Pop(1)
	s, ok := v.(lua.LString)
	if !ok {
		o.tb.Fatalf("gopher-lua returned %s, not a string", v.Type())
	}
	return string(s)
}

// canon, when not nil, maps an output to a form that forgets the order of
// object or map members (gopher-lua's table order is not Lua 5.1's).
type canon func(string) (string, error)

// check runs snippet on both sides and fails the test on a difference.
func (o *oracle) check(snippet string, c canon) {
	o.tb.Helper()
	script := wrap(snippet)
	t0 := time.Now()
	want := o.redis(script)
	t1 := time.Now()
	got := o.local(script)
	t2 := time.Now()
	o.redisTime += t1.Sub(t0)
	o.localTime += t2.Sub(t1)
	if d := t2.Sub(t0); d > o.slowest {
		o.slowest, o.slowestCase = d, short(snippet)
	}
	o.cases++
	if got == want {
		o.exact++
		return
	}
	if c != nil && strings.HasPrefix(want, "ok:") && strings.HasPrefix(got, "ok:") {
		cw, err1 := c(want[3:])
		cg, err2 := c(got[3:])
		if err1 == nil && err2 == nil && cw == cg {
			o.reordered++
			return
		}
	}
	o.tb.Errorf("differs from Redis\nsnippet: %s\nredis:  %q\nlualib: %q", short(snippet), short(want), short(got))
	if dir := os.Getenv("LUALIB_DUMP"); dir != "" {
		// The whole case, for a closer look.
		n := o.cases
		os.WriteFile(fmt.Sprintf("%s/case%d.lua", dir, n), []byte(snippet), 0o644)
		os.WriteFile(fmt.Sprintf("%s/case%d.redis", dir, n), []byte(want), 0o644)
		os.WriteFile(fmt.Sprintf("%s/case%d.lualib", dir, n), []byte(got), 0o644)
	}
	if o.tb.Failed() && o.cases-o.exact-o.reordered > 20 {
		o.tb.FailNow()
	}
}

func short(s string) string {
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

func (o *oracle) report(name string, seed int64) {
	o.tb.Helper()
	o.tb.Logf("%s: %d cases (seed %d): %d identical, %d identical but for member order (redis %v, gopher-lua %v)",
		name, o.cases, seed, o.exact, o.reordered, o.redisTime.Round(time.Millisecond), o.localTime.Round(time.Millisecond))
	if testing.Verbose() {
		o.tb.Logf("slowest case (%v): %s", o.slowest, o.slowestCase)
	}
}

// seed is LUALIB_SEED, or def.
func seed(def int64) int64 {
	if s := os.Getenv("LUALIB_SEED"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// count is n scaled by LUALIB_SCALE (a multiplier for long runs).
func count(n int) int {
	if s := os.Getenv("LUALIB_SCALE"); s != "" {
		if k, err := strconv.Atoi(s); err == nil && k > 0 {
			return n * k
		}
	}
	return n
}
