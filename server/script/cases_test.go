package script_test

import (
	"strconv"
	"strings"
)

// handCases are the hand-written differential cases: one script per
// line (¶ in a line is a newline), run with no keys and args, then the
// cases that need keys and args.
func handCases() []evalCase {
	var cs []evalCase
	for _, line := range strings.Split(handScripts, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		cs = append(cs, evalCase{body: strings.ReplaceAll(line, "¶", "\n")})
	}
	cs = append(cs,
		evalCase{body: "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", keys: []string{"a", "b"}, args: []string{"x", ""}},
		evalCase{body: "KEYS[1] = 'changed' return KEYS", keys: []string{"a"}},
		evalCase{body: "return redis.call('SET', KEYS[1], ARGV[1])", keys: []string{"k"}, args: []string{"v\x00\r\n"}},
		evalCase{body: "return redis.call('GET', KEYS[1])", keys: []string{"k"}},
		evalCase{body: "return ARGV[1] + 1", args: []string{" 10 "}},
		evalCase{body: "return tonumber(ARGV[1])", args: []string{"0x1F"}},
		evalCase{body: "return ARGV", args: []string{"1", "2", "3"}},
		evalCase{body: "#!lua\r\nreturn 15"},
		evalCase{body: "#!lua flags=no-writes\x00junk\nreturn 16"},
		evalCase{body: "#!lua\x00\nreturn 17"},
		evalCase{body: "return 'a\x00b'"},
		evalCase{body: "return {err='a\x00b'}"},
		evalCase{body: "error('a\x00b')"},
		evalCase{body: "return \"\r\n\""},
		evalCase{body: manyLocals(199)},
		evalCase{body: manyLocals(200)},
		evalCase{body: manyLocals(201)},
		evalCase{body: gcraScript, keys: []string{"rl"}, args: []string{"10", "10", "3600", "1"}},
		evalCase{body: gcraScript, keys: []string{"rl"}, args: []string{"10", "10", "3600", "5"}},
	)
	return append(cs, extraCases...)
}

var extraCases []evalCase

// manyLocals declares n locals in the main chunk, then uses libraries.
func manyLocals(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = "a" + strconv.Itoa(i)
	}
	return "local " + strings.Join(names, ",") + " = 1 return tostring(a0) .. string.rep('x', 2) .. math.max(1, 2) .. #KEYS"
}

// knownDivergent are cases that differ, and why: gopher-lua's VM.
var knownDivergent = map[string]string{
	manyLocals(199): "gopher-lua's 200 registers per function (Lua's 250)",
	manyLocals(200): "gopher-lua's 200 registers per function (Lua's 250)",
	"local t = setmetatable({}, {__len=function() return 7 end}) return #t": "gopher-lua honours __len on tables",
	"local t = {} table.insert(t, 5, 1) return {#t, t[5]}":                  "gopher-lua's # of a table with holes",
}

// gcraScript is a GCRA limiter in the style of go-redis/redis_rate's
// allowN, with a fixed clock (TIME would differ between the servers).
const gcraScript = `local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])
local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst
local now = 1700000000.123456 - 1483228800
local tat = redis.call("GET", rate_limit_key)
if not tat then
  tat = now
else
  tat = tonumber(tat)
end
tat = math.max(tat, now)
local new_tat = tat + increment
local allow_at = new_tat - burst_offset
local diff = now - allow_at
local remaining = diff / emission_interval
if remaining < 0 then
  local reset_after = tat - now
  local retry_after = diff * -1
  return {0, 0, tostring(retry_after), tostring(reset_after)}
end
local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end
local retry_after = -1
return {cost, remaining, tostring(retry_after), tostring(reset_after)}`

const handScripts = `
// conversions
return 1
return -1
return 3.99
return -3.99
return 1e30
return -1e30
return 0/0
return 1/0
return 2^63
return -2^63
return 2^53+1
return "str"
return ""
return true
return false
return nil
return
return {}
return {1,2,nil,4}
return {nil, 1}
return {1,{2,{3,{4,{5}}}},"x"}
return {true,false,1,nil,2}
return {ok="fine"}
return {ok="a\r\nb"}
return {err="bad"}
return {err="a\nb\r\nc"}
return {err=""}
return {err="-MY"}
return {ok=1}
return {err=1}
return {err={}}
return {1,2,ok="x"}
return {1,2,err="x"}
return {err="e", ok="o"}
return {double=1.5}
return {double=0.1}
return {double=1/0}
return {double=-1/0}
return {double=0/0}
return {double="1.5"}
return {double=3}
return {double=1e300}
return {big_number="123"}
return {big_number="12\r\n3"}
return {big_number=123}
return {verbatim_string={format="txt", string="hello"}}
return {verbatim_string={format="txt"}}
return {verbatim_string="x"}
return {map={a=1}}
return {map={}}
return {map={a={1,2}}}
return {map={[1]="one"}}
return {set={a=true}}
return {set={}}
return {set={a=true, b=false}}
return {map=1}
return {set="x"}
return {{ok="nested"}, {err="nested err"}}
return {redis.error_reply("x"), 1}
return {1, print}
return string
return _G
return redis
return function() end
return coroutine.create(function() end)
local t = {} t[1] = t return t
local t = {} t.map = t return t
return {string.byte("abc", 1, -1)}
return {[1]=1,[2]=2,[4]=4}
local t = {} t[3]=3 t[2]=2 t[1]=1 return t
return {1, 2, [3.0]=3}
// redis.setresp
redis.setresp(3) return redis.call("SET", "k", "v")
redis.setresp(3) return true
redis.setresp(3) return false
redis.setresp(3) return nil
redis.setresp(3) return {double=2.5}
redis.setresp(3) return {map={a=1}}
redis.setresp(3) return {set={x=true}}
redis.setresp(3) return {big_number="999"}
redis.setresp(3) return {verbatim_string={format="txt", string="v"}}
redis.setresp(3) redis.setresp(2) return false
redis.setresp(3) return redis.call("GET", "nokey")
redis.setresp(3) return {redis.call("GET", "nokey") == nil}
return {redis.call("GET", "nokey") == false}
redis.setresp(3) redis.call("HSET", "h3", "a", "1") return redis.call("HGETALL", "h3")
redis.call("HSET", "h2", "a", "1") return redis.call("HGETALL", "h2")
redis.setresp(3) redis.call("HSET", "h4", "a", "1") local r = redis.call("HGETALL", "h4") return {type(r), type(r.map), r.map.a}
redis.setresp(3) redis.call("SADD", "s3", "a") local r = redis.call("SMEMBERS", "s3") return {type(r.set), tostring(r.set.a)}
redis.setresp(3) redis.call("ZADD", "z3", "1.5", "a") local r = redis.call("ZSCORE", "z3", "a") return {type(r), r.double}
redis.call("ZADD", "z2", "0.1", "a") return redis.call("ZSCORE", "z2", "a")
redis.setresp(3) return redis.call("ZSCORE", "z3", "a")
redis.setresp(4)
redis.setresp()
redis.setresp("3") return "ok"
redis.setresp(3.7) return "ok"
redis.setresp(2, 3)
// redis.call and pcall
return redis.call("SET", "k", "v")
return redis.call("GET", "k")
return redis.call("PING")
return redis.call("PING", "hi")
return redis.call("DEL", "k", "nokey")
return redis.call("INCR", "cnt")
return redis.call("INCRBYFLOAT", "f", 0.1)
return redis.call("INCRBYFLOAT", "f", "1e3")
return redis.call("get")
return redis.call("nosuch")
return redis.pcall("nosuch")
return redis.call("GET", "a", "b")
return redis.call()
return redis.pcall()
return redis.call({})
return redis.call("set","k",{})
return redis.call("set","k",true)
return redis.call("set","k",nil)
return redis.call("set", "k")
return redis.pcall("set", "k", print)
redis.call("set","k",0.1) return redis.call("get","k")
redis.call("set","k",1e20) return redis.call("get","k")
redis.call("set","k",3) return redis.call("get","k")
redis.call("set","k",-0.0) return redis.call("get","k")
redis.call("set","k",1/0) return redis.call("get","k")
redis.call("set","k",-1/0) return redis.call("get","k")
redis.call("set","k",0/0) return redis.call("get","k")
redis.call("set","k",123456789012345678) return redis.call("get","k")
redis.call("set","k",1e15) return redis.call("get","k")
redis.call("set","k",2^53) return redis.call("get","k")
redis.call("set","k",1/3) return redis.call("get","k")
redis.call("set","k",1e-7) return redis.call("get","k")
redis.call("set","k",100) return redis.call("get","k")
redis.call("set","k",0.30000000000000004) return redis.call("get","k")
redis.call("set", "str", "abc") return redis.call("INCR", "str")
redis.call("set", "str", "abc") return redis.pcall("INCR", "str")
redis.call("set", "str", "abc") return redis.pcall("LPUSH", "str", "x")
redis.call("set", "str", "abc") return redis.call("LPUSH", "str", "x")
return redis.pcall("EVAL", "return 1", "0")
return redis.pcall("MULTI")
return redis.call("SUBSCRIBE", "c")
return redis.pcall("BLPOP", "l", "0")
return redis.call("HSET", "h", "f", 1.5, "g", 2)
return redis.call("HGETALL", "h")
return redis.call("HMGET", "h", "f", "nope", "g")
return redis.call("LRANGE", "nolist", 0, -1)
return redis.call("RPUSH", "list", 1, 2.5, "x")
return redis.call("LRANGE", "list", 0, -1)
return redis.call("EXISTS", "list", "nokey")
return redis.call("TYPE", "list")
return redis.call("OBJECT", "ENCODING", "list")
return redis.call("SET", "k", "v", "NX")
return redis.call("SET", "nx1", "v", "GET")
return redis.call("EXPIRE", "k", 100)
return redis.call("ZADD", "zz", 1, "a", 2.5, "b")
return redis.call("ZRANGE", "zz", 0, -1)
return redis.call("ZINCRBY", "zz", 0.1, "a")
return redis.call("SCARD", "nosuchset")
local ok, e = pcall(redis.call, "nosuch") return {tostring(ok), type(e), e}
local ok, e = pcall(redis.call, "INCR", "str") return {tostring(ok), type(e), e}
local ok, e = pcall(error, "x") return {tostring(ok), type(e), e}
local ok, e = pcall(error, {err="x"}) return {tostring(ok), type(e), e}
local ok, e = pcall(error, {x=1}) return {tostring(ok), type(e)}
local ok, e = pcall(error, {err=5}) return {tostring(ok), type(e)}
local ok, e = pcall(function() local x = nil + 1 end) return {tostring(ok), type(e)}
local ok, e = xpcall(function() redis.call("nosuch") end, function(m) return m end) return {tostring(ok), type(e), e}
local ok, e = xpcall(function() redis.call("nosuch") end, function(m) return type(m) end) return {tostring(ok), type(e), e}
local ok, e = xpcall(function() error("x") end, function(m) return "h:" .. m end) return {tostring(ok), e}
return pcall()
return {pcall(function() return 1,2,3 end)}
return {pcall(redis.call, "PING")}
return {pcall(redis.pcall, "nosuch")}
local r = redis.pcall("nosuch") return {type(r), r.err}
local r = redis.pcall("INCR", "str") return {type(r), r.err, tostring(r.ignore_error_stats_update)}
local r = redis.error_reply("MY x") return {r.err}
local r = redis.status_reply("fine") return {r.ok}
// errors
error("boom")
error({err="boom"})
error({err="MYERR boom"})
error()
error(nil)
error(12)
error(12.5)
error(true)
error("a\nb")
error({err="a\nb\r\nc"})
error("lvl0", 0)
error("x", 3)
error({err="ERR x", source="src", line=5})
error({err="ERR x", source=1, line=5})
error(_G)
error(string)
error(getmetatable(""))
local function f()¶ error("deep")¶end¶f()
local function f()¶ redis.call("nosuch")¶end¶f()
local function f()¶ error("lvl2", 2)¶end¶f()
local function f()¶ return redis.call("nosuch")¶end¶return f()
local function f()¶ error("tail")¶end¶return f()
¶¶local x = nil + 1
¶¶return redis.call("nosuch")
local t = setmetatable({}, {__index=function() error("in meta") end}) return t.x
return redis.error_reply("boom")
return redis.error_reply("MY boom")
return redis.error_reply("-MY boom")
return redis.error_reply("boom\r\nxx")
return redis.error_reply("")
return redis.error_reply("-")
return redis.error_reply("- x")
return redis.error_reply("-MY")
return redis.error_reply(1)
return redis.error_reply()
return redis.error_reply("a", "b")
return redis.status_reply("a\r\nb")
return redis.status_reply(1)
return redis.status_reply()
return redis.status_reply("")
// globals
x = 1
return y
string.x = 1
redis.call = nil
redis = nil
KEYS = {}
_G.x = 1
_G["redis"] = 1
rawset(string, "x", 1)
rawset(_G, "x", 1)
rawset({}, nil, 1)
setmetatable(_G, nil)
setmetatable(string, {})
return getmetatable(_G) == nil
return type(getmetatable(_G).__index)
getmetatable(_G).x=1
getmetatable("").x = 1 return 1
getmetatable("").__index = {} return 1
return getmetatable("").__index == string
return getmetatable("").x
table.insert(string, 1)
table.insert(_G, "x")
table.remove(string)
table.sort(math)
return rawget(string, "format") == string.format
return rawget(_G, "redis") == redis
return rawget(_G, "nosuch")
return rawequal(_G, _G)
local lib = {bit=1, cjson=1, cmsgpack=1, struct=1} local t = {} for k in pairs(_G) do if not lib[k] then t[#t+1] = k end end table.sort(t) return t
local t = {} for k in pairs(string) do t[#t+1] = k end table.sort(t) return t
local t = {} for k in pairs(math) do t[#t+1] = k end table.sort(t) return t
local t = {} for k in pairs(table) do t[#t+1] = k end table.sort(t) return t
local t = {} for k in pairs(coroutine) do t[#t+1] = k end table.sort(t) return t
local t = {} for k, v in pairs(redis) do t[#t+1] = k .. "=" .. type(v) end table.sort(t) return t
local lib = {bit=1, cjson=1, cmsgpack=1, struct=1} local t = {} for k, v in next, _G do if not lib[k] then t[#t+1] = k end end return #t
local lib = {bit=1, cjson=1, cmsgpack=1, struct=1} local n = 0 for k, v in pairs(_G) do if not lib[k] then n = n + 1 end end return n
return {type(os), type(io), type(debug), type(require), type(dofile), type(loadfile), type(print), type(module), type(getfenv), type(setfenv), type(newproxy)}
return type(os)
return type(print)
return type(getfenv)
return type(setfenv)
return type(newproxy)
return type(gcinfo())
return type(collectgarbage("count"))
return collectgarbage()
return collectgarbage("step")
return collectgarbage("bogus")
return {_VERSION}
return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM, redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING, redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}
return _G == getfenv
local x = 5 return x
local function f() return 1 end return f()
return loadstring("return 1+1")()
return {loadstring("return +")}
return loadstring("return 2", "chunk")()
local f = loadstring("return KEYS") return type(f())
local f = loadstring("x = 1") local ok, e = pcall(f) return {tostring(ok), e}
local f = loadstring("return y") local ok, e = pcall(f) return {tostring(ok), e}
return load(function() return nil end)
local parts = {"return ", "40", "+2"} local i = 0 return load(function() i = i + 1 return parts[i] end)()
// redis lib
return redis.sha1hex("")
return redis.sha1hex("abc")
return redis.sha1hex(123)
return redis.sha1hex(1.5)
return redis.sha1hex()
return redis.sha1hex("a", "b")
return redis.breakpoint()
return {redis.debug("x")}
return redis.replicate_commands()
return redis.set_repl(redis.REPL_ALL)
return redis.set_repl(redis.REPL_NONE)
return redis.set_repl(7)
return redis.set_repl(-1)
return redis.set_repl()
return redis.set_repl("1")
redis.log(redis.LOG_WARNING, "hello", 1, {}, "x")
redis.log(redis.LOG_DEBUG, "dbg")
redis.log(redis.LOG_WARNING)
redis.log("x", "y")
redis.log("3", "y")
redis.log(9, "y")
redis.log(-1, "y")
redis.log(2.9, "y") return 1
return redis.acl_check_cmd("get", "x")
return redis.acl_check_cmd()
return redis.acl_check_cmd("get", {})
// base library
return tostring(nil)..1
return #nil
return ("x"):bad()
return tostring(0.1+0.2)
return tostring(1e15)
return tostring(1e16)
return tostring(-0.0)
return tostring(1/0)
return tostring(-1/0)
return tostring(0/0)
return tostring(2^53)
return tostring(123456789012)
return tostring(99999999999999)
return tostring(999999999999999)
return tostring(1e100)
return tostring(1e-5)
return tostring(123.456)
return tostring(true)
return tostring(10/3)
return tostring(-7 % 3)
return tostring(7 % -3)
return tostring(5.5 % 2)
return tostring(2^0.5)
return tostring(math.pi)
return tostring(math.huge)
return tostring(tonumber("inf"))
return tostring(tonumber("-inf"))
return tostring(tonumber("nan"))
return tostring(tonumber("0x1p4"))
return tostring(tonumber(" 0x10 "))
return tostring(tonumber("1e"))
return tostring(tonumber(""))
return tostring(tonumber("  "))
return tostring(tonumber("10", 16))
return tostring(tonumber("zz", 36))
return tostring(tonumber("8", 8))
return tostring(tonumber("ff", 16))
return tostring(tonumber("-ff", 16))
return tostring(tonumber("0x10", 16))
return tostring(tonumber("1", 1))
return tostring(tonumber("010"))
return tostring(tonumber("1e5"))
return tostring(tonumber(".5"))
return tostring(tonumber("5."))
return tostring(tonumber("."))
return tostring(tonumber("0x"))
return tostring(tonumber("1 2"))
return tostring(tonumber(nil))
return tostring(tonumber({}))
return tostring(tonumber(true))
return tostring(tonumber("1e400"))
return tostring(tonumber("infinity"))
return tostring(tonumber("0x1.8"))
return tostring(tonumber("\t5\n"))
return tonumber()
return tostring("10" + 1)
return tostring("0x10" + 1)
return tostring(" 5 " * 2)
return 1 .. ""
return 0.1 .. ""
return 1e15 .. ""
return (0.1 + 0.2) .. ""
return select("#", 1, nil, 3)
return select(-1, 1, 2, 3)
return select(2, "a", "b", "c")
return select(0, 1)
return select("x", 1)
return {unpack({1,2,3})}
return {unpack({1,2,3}, 2)}
return {unpack({1,2,3}, 2, 5)}
return #{unpack({}, 1, 7000)}
return #{unpack({}, 1, 9000)}
return select('#', unpack({}, 1, 7990))
return #{unpack({}, 1, 1e6)}
return unpack({}, 3, 1)
return type(next({}))
return next({}, nil)
return {next({10})}
return assert(1, 2)
return assert(false)
return assert(nil, "msg")
return assert(false, 42)
return type(assert)
return rawequal(1, 1)
return rawequal({}, {})
return type(setmetatable({}, {}))
local t = setmetatable({}, {__metatable="locked"}) return getmetatable(t)
local t = setmetatable({}, {__metatable="locked"}) setmetatable(t, {})
local t = setmetatable({}, {__tostring=function() return "T!" end}) return tostring(t)
local t = setmetatable({}, {__index=function(t, k) return k .. "!" end}) return t.x
local t = setmetatable({}, {__newindex=function(t, k, v) rawset(t, k, v * 2) end}) t.x = 5 return t.x
local t = setmetatable({}, {__call=function(self, a) return a + 1 end}) return t(41)
local t = setmetatable({}, {__add=function(a, b) return 99 end}) return t + 1
local t = setmetatable({}, {__len=function() return 7 end}) return #t
local t = setmetatable({}, {__eq=function() return true end}) return t == setmetatable({}, getmetatable(t))
local t = setmetatable({}, {__concat=function(a, b) return "cat" end}) return t .. "x"
return setmetatable({}, {__index=string}).format("%d", 5)
return #setmetatable({}, getmetatable(_G))
local t = setmetatable({}, getmetatable(_G)) return t.x
return type(_G)
return _G._G == _G
return _G.redis == redis
return type(_G.KEYS)
return select('#', ...)
return ...
// string library
return string.len("abc")
return string.len(123)
return string.len()
return string.sub("hello", 2, 4)
return string.sub("hello", -3)
return string.sub("hello", 0)
return string.sub("hello", 10)
return string.sub("hello", 2, 100)
return string.sub("hello", -100, 2)
return string.sub(12345, 2, 3)
return string.sub("hello")
return string.upper("abc") .. string.lower("ABC")
return string.upper("ÿa")
return string.reverse("abc")
return string.rep("ab", 3)
return string.rep("ab", 3, ",")
return string.rep("x", 0)
return string.rep("x", -1)
return #string.rep("a", 3.7)
return #string.rep("x", 2^31)
return string.rep(5, 2)
return string.rep("x")
return {string.byte("abc")}
return {string.byte("abc", 1, -1)}
return {string.byte("abc", -1)}
return {string.byte("abc", 10)}
return {string.byte("", 1)}
return string.char(72, 105)
return string.char()
return string.char(256)
return string.char(-1)
return string.char("65")
return string.format("%d", 3.7)
return string.format("%d", -3.7)
return string.format("%5.2f|%s|%q", 3.14159, "a", "a\nb\0c\r")
return string.format("%g %g %g %g", 1e15, 0.1, 100, 1e-5)
return string.format("%s %s", 1e15, 0.1+0.2)
return string.format("%.3s|%-5s|%5s", "abcdef", "ab", "ab")
return string.format("%x %X %o %c %e %E %i %u", 255, 255, 8, 65, 1.5, 1.5, 3, 4)
return string.format("%5.1f%%", 99.44)
return string.format("%q", 1/3)
return string.format("%d", 2^53)
return string.format("%d", -2^63)
return string.format("%d", 2^63)
return string.format("%x", -1)
return string.format("%u", -1)
return string.format("%o", -1)
return string.format("%x", 2^64)
return string.format("%x", 2^63)
return string.format("%d", 0/0)
return string.format("%f %e %g", 1/0, -1/0, 0/0)
return string.format("%5.1f|%-8.3e|%+g|% g|%#g|%#.0f|%#x|%#o|%08.3f|%-08d|%+5d|% d", 3.14159, 1234.5, 2, 3, 1.5, 2, 255, 8, -3.14159, 42, 42, 42)
return string.format("%.0f %.0f %.0f %.0f", 0.5, 1.5, 2.5, -0.5)
return string.format("%.20f", 0.1)
return string.format("%10.4g|%-10.4G|%.10g", 123456789, 0.000012345, 1/3)
return string.format("%c%c%c", 72, 0, 105)
return string.format("%5c|%-5c|", 65, 66)
return string.format("%s", nil)
return string.format("%s", true)
return string.format("%s", {})
return string.format("%d", "12")
return string.format("%d", "x")
return string.format("%d")
return string.format("%y", 1)
return string.format("%", 1)
return string.format("%123d", 1)
return string.format("%1.123f", 1)
return string.format("%------d", 1)
return string.format("%s", string.rep("x", 150))
return #string.format("%5s", string.rep("x", 150))
return string.format("%.105s", string.rep("x", 150))
return string.format("%s|%5s", "a\0b", "c\0d")
return string.format("%q", "\0\1\2\r\n\t\"\\")
return string.format("%.3d|%.0d|%5.3d|%-5.3x|", 7, 0, -7, 255)
return string.format("%05d|%05s|%-05d|", -42, "ab", 7)
return string.format("%.14g", 0.1)
return string.format("%.17g", 0.1)
return string.format("%.99f", 1)
return string.format("%a", 1)
return {string.find("hello world", "o w")}
return {string.find("hello", "l+")}
return {string.find("hello", "l", 1, true)}
return {string.find("a.b", ".", 1, true)}
return {string.find("hello", "xyz")}
return {string.find("hello", "")}
return {string.find("hello", "", 10)}
return {string.find("hello", "(h)(e)")}
return {string.find(12345, 3)}
return {string.match("key:123", "(%a+):(%d+)")}
return {string.match("hello", "()ll()")}
return {string.match("  trim  ", "^%s*(.-)%s*$")}
return string.match("hello", "%f[%w]%w+")
return string.gsub("hello world", "o", "0")
return {string.gsub("abc", "%w", "%0%0")}
return {string.gsub("abc", "", "-")}
return {string.gsub("hello", "(l)(l)", {ll="LL"})}
return {string.gsub("hello", "l", {l="L"})}
return {string.gsub("hello world", "%w+", function(w) return w:upper() end)}
return {string.gsub("abc", "b", "%1")}
return {string.gsub("abc", "b", "%2")}
return {string.gsub("abc", "b", "%")}
return {string.gsub("aaa", "a", "b", 2)}
return {string.gsub("x = 1", "(%w+)%s*=%s*(%w+)", "%2=%1")}
return {string.gsub(123, 2, 9)}
return {string.gsub("abc", "b", 5)}
return {string.gsub("abc", "b", true)}
local t = {} for w in string.gmatch("one two three", "%a+") do t[#t+1] = w end return t
local t = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do t[#t+1] = k .. v end return t
local t = {} for w in string.gfind("a b", "%a") do t[#t+1] = w end return t
return string.dump(print)
return type(string.dump)
return ("%d items"):format(3)
return ("abc"):len()
return ("abc"):sub(2)
return #"abc"
return "a" < "b"
return "a" < 1
return {pcall(string.rep)}
// table library
return table.concat({1, 2.5, "x", 1e15}, ",")
return table.concat({1, {}}, ",")
return table.concat({}, ",", 1, 3)
return table.concat({1,2,3}, ", ", 2, 3)
return table.concat({1,2,3}, nil)
return table.concat({"a", "b"})
return table.getn({1,2})
return table.maxn({1,2,[10]=1})
return table.maxn({})
return table.foreach({1,2}, function(k,v) end)
return table.foreachi({5,6}, function(k,v) return k+v end)
return table.foreach({a=1}, function(k, v) return k end)
return table.setn({}, 1)
return table.insert({}, 1, 2, 3)
local t = {} table.insert(t, 5, 1) return {#t, t[5]}
local t = {1,2,3} table.insert(t, 1, 0) return t
local t = {1,2,3} table.insert(t, "x") return t
local t = {1,2,3} return {table.remove(t), #t}
local t = {1,2,3} return {table.remove(t, 1), t[1], t[2], t[3]}
local t = {} return {table.remove(t)}
local t = {3,1,2} table.sort(t) return t
local t = {3,1,2} table.sort(t, function(a, b) return a > b end) return t
local t = {"b", "a", "c"} table.sort(t) return t
return table.sort({3,1,"x"})
local t = {5,3,8,1,9,2} table.sort(t, function(a, b) return a < b end) return t
return #{1, 2, 3, nil, 5}
return #{1, nil, 3}
return #{nil, nil, 3}
// math library
return math.floor(-3.5)
return math.ceil(-3.5)
return math.floor("2.5")
return math.floor("a")
return math.max(1, 5, 3)
return math.min(1, 5, -3)
return math.max()
return math.fmod(7, 3)
return math.fmod(-7, 3)
return tostring(math.fmod(7, 0))
return {math.modf(3.7)}
return {math.modf(-3.7)}
return {math.frexp(8)}
return tostring(math.ldexp(1, 10))
return math.abs(-5)
return tostring(math.sqrt(2))
return tostring(math.log(10))
return tostring(math.log10(1000))
return tostring(math.exp(1))
return tostring(math.pow(2, 10))
return tostring(math.sin(1))
return tostring(math.deg(math.pi))
return tostring(math.rad(180))
return tostring(math.mod(7, 3))
return tostring(math.atan2(1, 1))
return tostring(math.cosh(1))
// math.random: Redis's rand48, continuing across scripts
return math.random()
return {math.random(), math.random(), math.random()}
return math.random(10)
return math.random(5, 9)
return math.random(0)
return math.random(3, 1)
return math.random(1, 2, 3)
return math.random("7")
return math.random(2^31)
return math.random(1.9)
math.randomseed(42) return {math.random(100), math.random(100), math.random(100)}
return {math.random(100), math.random(100)}
math.randomseed(-1) return tostring(math.random())
math.randomseed(2^33 + 7) return math.random(1000)
math.randomseed("5") return math.random(1000)
math.randomseed() return 1
return tostring(math.random())
// coroutines
local co = coroutine.create(function(a) local b = coroutine.yield(a+1) return b*2 end) local ok1, v1 = coroutine.resume(co, 1) local ok2, v2 = coroutine.resume(co, 10) return {tostring(ok1), v1, tostring(ok2), v2, coroutine.status(co)}
local gen = coroutine.wrap(function() for i = 1, 3 do coroutine.yield(i) end end) return {gen(), gen(), gen()}
return {coroutine.resume(coroutine.create(function() error("in co") end))}
return coroutine.running()
local co = coroutine.create(function() return redis.call("PING") end) return {coroutine.resume(co)}
return {coroutine.resume(coroutine.create(function() return redis.pcall("nosuch") end))}
// shebang
#!lua¶return 1
#!lua flags=no-writes¶return redis.call("GET", "k")
#!lua flags=no-writes¶return redis.call("SET", "k", "v")
#!lua flags=no-writes¶return redis.pcall("SET", "k", "v")
#!lua flags=no-writes,allow-oom¶return 2
#!lua flags=allow-stale,no-cluster,allow-cross-slot-keys¶return 3
#!lua flags=¶return 4
#!lua flags=bogus¶return 5
#!lua flags=no-writes,,allow-oom¶return 6
#!lua name=mylib¶return 7
#!lua  flags=no-writes  ¶return 8
#!python¶return 9
#!lua "flags=no-writes"¶return 10
#!lua 'flags=no-writes'¶return 11
#!lua "flags=no-writes¶return 12
#!lua flags="no-writes"x¶return 13
#!¶return 14
#!lua
#!lua¶¶error("line 3")
#! lua¶return 16
# comment¶return 17
// compile errors
return +
x =
local function
return 'unfinished
return "a" .. 
for i = 1 do end
if true then
end
return 1e
return 0x
local t = {1, 2
return ]]
return 1 +* 2
function f() end
local function f() end return type(f)
a.b.c = 1
return ...
break
goto x
// syntax that Lua 5.1 has
local a, b = 1, 2 a, b = b, a return {a, b}
local t = {n = 1, [2] = "two", "one"} return {t[1], t[2], t.n}
local s = 0 for i = 10, 1, -2 do s = s + i end return s
local s = 0 for i = 1, 3 do for j = 1, 3 do s = s + i * j end end return s
local s = "" for k, v in ipairs({"a", "b", "c"}) do s = s .. k .. v end return s
local i = 0 repeat i = i + 1 until i >= 5 return i
local i = 0 while true do i = i + 1 if i > 3 then break end end return i
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end return fib(20)
local function va(...) return select("#", ...), ... end return {va(1, nil, 3)}
local function f(...) local t = {...} return #t end return f(1, 2, 3)
local function f(...) return arg end return type(f(1))
local t = {} t[1.5] = "x" t[-1] = "y" return {t[1.5], t[-1]}
local t = {[1]="a", [1.0]="b"} return t[1]
return 2^-1
return -2^2
return not nil == true
return 1 == 1.0
return "10" == 10
return 7 // 2
return 0x10
return 1e2
return .5
return 3 % math.huge
return [[long
string]]
return [==[with ]] inside]==]
return "\65\066\x41\z"
return "\a\b\f\n\r\t\v\\\"\'"
return 'it''s'
--[[ block comment ]] return 1
-- line comment¶return 2
local a <const> = 1
// errors passed on
local ok, e = pcall(redis.call, 'NOSUCH') error(e)
local ok, e = pcall(redis.call, 'NOSUCH') error(e, 0)
local ok, e = pcall(redis.call, 'NOSUCH') return redis.error_reply(e)
local ok, e = xpcall(function() redis.call('NOSUCH') end, function(e) return e end) error(e)
local ok, e = xpcall(function() redis.call('NOSUCH') end, __redis__err__handler) return {e.err, e.source, e.line}
local ok, e = xpcall(function() error('x') end, __redis__err__handler) return {e.err, e.source, e.line}
local ok, e = xpcall(function() local t = nil return t.x end, function(m) return m end) return e
local ok, e = pcall(function() local t = nil return t.x end) return e
local ok, e = pcall(function() return nosuch() end) return e
local ok, e = pcall(string.rep) return e
local ok, e = pcall(error) return {tostring(ok), tostring(e)}
local ok, e = pcall(error, nil) return {tostring(ok), tostring(e)}
local ok, e = pcall(error, "m", 2) return e
local function lvl() error("up", 2) end local ok, e = pcall(lvl) return e
local ok, e = pcall(pcall) return {tostring(ok), tostring(e)}
return select('#', pcall(error))
return {xpcall(function() return 1, 2 end, print)}
return xpcall(function() error({err="T"}) end, function(e) return e.err end)
return coroutine.wrap(function() local ok, e = pcall(redis.call, 'NOSUCH') return e end)()
// line numbers of multi-line statements
local x = 1 +¶  nil
local t = nil¶return t¶.x
return redis.call(¶"nosuch"¶)
local s = "a" ..¶ nil
nosuchf(¶)
error(¶"x"¶)
local t = {¶1,¶nil + 1¶}
if¶nil > 1¶then return 1 end
local a = {}¶a.b.c¶= 1
for i = 1,¶nil do end
local x = 5¶return x()
local t = {}¶return t:nomethod()
return #nosuch
return -{}
return {} .. "x"
local u = nil¶local function f() return u.x end¶return f()
local u = nil¶local function f() return u() end¶return f()
return math.nosuch()
return string.nosuch("x")
local t = {} t.x.y = 1
return ("x") + 1
return "10" + {}
return 1 < "x"
return {} < {}
return nil < nil
// limits
local function f() return 1 + f() end local ok, e = pcall(f) return {tostring(ok), e}
local function f() return 1 + f() end local ok, e = pcall(f) local ok2, e2 = pcall(f) return {e, e2}
local co = coroutine.create(function() local function f(n) return 1 + f(n) end return f(1) end) return {coroutine.resume(co)}
local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end return coroutine.wrap(function() return f(10000) end)()
local function f(n) return 1 + f(n+1) end return f(1)
local function f(n) if n == 0 then return 0 end return 1 + f(n-1) end return f(15000)
local function f(n) if n == 0 then return 0 end return 1 + f(n-1) end return f(100000)
local s = 0 for i = 1, 100000 do s = s + i end return s
local t = {} for i = 1, 10000 do t[i] = i end return #t
local t = {} for i = 1, 1000 do t[#t+1] = tostring(i) end return table.concat(t, ","):len()
local t = {} t[100000000] = 1 return t[100000000]
local t = {} t[5000000] = 1 return #t
`

func init() {
	extraCases = append(extraCases,
		evalCase{body: "return ARGV[1] + 1", args: []string{"010"}},
		evalCase{body: "return ARGV[1] * 2", args: []string{"0x10"}},
		evalCase{body: "return -ARGV[1]", args: []string{" 7 "}},
		evalCase{body: "return ARGV[1] % 3", args: []string{"10"}},
		evalCase{body: "return ARGV[1] ^ 2", args: []string{"3"}},
		evalCase{body: "return ARGV[1] + 1", args: []string{"abc"}},
		evalCase{body: "local x = ARGV[1] return x + 1", args: []string{"abc"}},
		evalCase{body: "return ARGV[1] + {}", args: []string{"1"}},
		evalCase{body: "return ARGV[1] + 1", args: []string{"1e"}},
		evalCase{body: "return ARGV[1] + 1", args: []string{"inf"}},
		evalCase{body: "return tostring(ARGV[1] + 0)", args: []string{"\v5\f"}},
		evalCase{body: "return ARGV[1] - 0", args: []string{"0b101"}},
		evalCase{body: "local s = 0 for i = ARGV[1], ARGV[2] do s = s + i end return s", args: []string{"1", "10"}},
		evalCase{body: "for i = 1, ARGV[1] do end return 1", args: []string{"x"}},
		evalCase{body: "for i = 1, 2, ARGV[1] do end return 1", args: []string{"0x1"}},
		evalCase{body: "for i = ARGV[1], 2 do end return 1", args: []string{""}},
	)
}
