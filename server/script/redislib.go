package script

import (
	"crypto/sha1"
	"encoding/hex"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicehq/sluice/engine"
)

// The redis table, as Redis 7.0.15's (script_lua.c luaRegisterRedisAPI,
// eval.c scriptingInit).

// Version is the Redis version scripts see (redis.REDIS_VERSION).
const (
	redisVersion    = "7.0.15"
	redisVersionNum = 0x0007000f
)

// Log levels (redis.LOG_*), as Host.Log receives them.
const (
	LogDebug   = 0
	LogVerbose = 1
	LogNotice  = 2
	LogWarning = 3
)

func (v *vm) installRedis() {
	L := v.L
	r := L.NewTable()
	set := func(name string, fn lua.LGFunction) { r.RawSetString(name, L.NewFunction(fn)) }
	num := func(name string, n float64) { r.RawSetString(name, lua.LNumber(n)) }
	set("call", func(L *lua.LState) int { return v.redisCall(L, true, false) })
	set("pcall", func(L *lua.LState) int { return v.redisCall(L, false, false) })
	g := v.globals
	g.RawSetString(callName, r.RawGetString("call"))
	g.RawSetString(pcallName, r.RawGetString("pcall"))
	g.RawSetString(callVoidName, L.NewFunction(func(L *lua.LState) int { return v.redisCall(L, true, true) }))
	g.RawSetString(pcallVoidName, L.NewFunction(func(L *lua.LState) int { return v.redisCall(L, false, true) }))
	set("log", v.redisLog)
	num("LOG_DEBUG", LogDebug)
	num("LOG_VERBOSE", LogVerbose)
	num("LOG_NOTICE", LogNotice)
	num("LOG_WARNING", LogWarning)
	r.RawSetString("REDIS_VERSION_NUM", lua.LNumber(redisVersionNum))
	r.RawSetString("REDIS_VERSION", lua.LString(redisVersion))
	set("setresp", func(L *lua.LState) int {
		if L.GetTop() != 1 {
			raiseRedisError(L, "redis.setresp() requires one argument.")
		}
		f, _ := toNumber(L.Get(1))
		resp := luaDoubleToInt(f)
		if resp != 2 && resp != 3 {
			raiseRedisError(L, "RESP version must be 2 or 3.")
		}
		v.resp = int(resp)
		return 0
	})
	set("sha1hex", func(L *lua.LState) int {
		if L.GetTop() != 1 {
			raiseRedisError(L, "wrong number of arguments")
		}
		var s string
		switch x := L.Get(1).(type) {
		case lua.LString:
			s = string(x)
		case lua.LNumber:
			s = luaNumberString(float64(x))
		}
		sum := sha1.Sum([]byte(s))
		L.Push(lua.LString(hex.EncodeToString(sum[:])))
		return 1
	})
	set("error_reply", func(L *lua.LState) int {
		s, ok := L.Get(1).(lua.LString)
		if L.GetTop() != 1 || !ok {
			L.Push(errorTable(L, "ERR wrong number or type of arguments", false))
			return 1
		}
		line := string(s)
		if len(line) > 0 && line[0] == '-' {
			line = line[1:]
		}
		L.Push(errorTable(L, line, false))
		return 1
	})
	set("status_reply", func(L *lua.LState) int {
		s, ok := L.Get(1).(lua.LString)
		if L.GetTop() != 1 || !ok {
			L.Push(errorTable(L, "ERR wrong number or type of arguments", false))
			return 1
		}
		L.Push(statusTable(L, string(s)))
		return 1
	})
	set("set_repl", func(L *lua.LState) int {
		if L.GetTop() != 1 {
			raiseRedisError(L, "redis.set_repl() requires two arguments.")
		}
		f, _ := toNumber(L.Get(1))
		if luaDoubleToInt(f)&^3 != 0 {
			raiseRedisError(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
		}
		// Effects replication is the server's: accepted, no effect.
		return 0
	})
	num("REPL_NONE", 0)
	num("REPL_AOF", 1)
	num("REPL_SLAVE", 2)
	num("REPL_REPLICA", 2)
	num("REPL_ALL", 3)
	set("acl_check_cmd", func(L *lua.LState) int {
		args, msg := v.commandArgs(L)
		if msg != "" {
			raiseRedisError(L, msg)
		}
		known, allowed := true, true
		if a, ok := v.host.(ACLHost); ok {
			known, allowed = a.CheckACL(args)
		}
		if !known {
			raiseRedisError(L, "Invalid command passed to redis.acl_check_cmd()")
		}
		L.Push(lua.LBool(allowed))
		return 1
	})
	set("breakpoint", func(L *lua.LState) int {
		// Outside the Lua debugger: false.
		L.Push(lua.LFalse)
		return 1
	})
	set("debug", func(L *lua.LState) int { return 0 })
	set("replicate_commands", func(L *lua.LState) int {
		L.Push(lua.LTrue)
		return 1
	})
	v.globals.RawSetString("redis", r)
}

// raiseRedisError raises a redis library error: {err="ERR <msg>"}, with
// no position (luaPushError, luaError).
func raiseRedisError(L *lua.LState, msg string) {
	L.Error(errorTable(L, "ERR "+msg, false), 0)
}

// commandArgs is luaArgsToRedisArgv: the arguments as a command, numbers
// as %.17g, or the error text.
func (v *vm) commandArgs(L *lua.LState) ([][]byte, string) {
	n := L.GetTop()
	if n == 0 {
		return nil, "Please specify at least one argument for this redis lib call"
	}
	buf := v.byteBuf[:0]
	ends := v.argEnds[:0]
	for i := 1; i <= n; i++ {
		switch x := L.Get(i).(type) {
		case lua.LString:
			buf = append(buf, x...)
		case lua.LNumber:
			buf = appendArgNumber(buf, float64(x))
		default:
			v.byteBuf, v.argEnds = buf, ends
			return nil, "Lua redis lib command arguments must be strings or integers"
		}
		ends = append(ends, len(buf))
	}
	args := v.argBuf[:0]
	start := 0
	for _, end := range ends {
		args = append(args, buf[start:end:end])
		start = end
	}
	v.byteBuf, v.argEnds, v.argBuf = buf, ends, args
	return args, ""
}

// redisCall is redis.call (raise) and redis.pcall; void when the
// script does not use the reply.
func (v *vm) redisCall(L *lua.LState, raise, void bool) int {
	args, msg := v.commandArgs(L)
	if msg != "" {
		t := errorTable(L, "ERR "+msg, false)
		if raise {
			L.Error(t, 0)
		}
		if void {
			return 0
		}
		L.Push(t)
		return 1
	}
	rep := v.host.Call(args)
	if rep.Kind == engine.ReplyError {
		if !raise && void {
			return 0
		}
		t := errorTable(L, rep.Err.Error(), true)
		if raise {
			L.Error(t, 0)
		}
		L.Push(t)
		return 1
	}
	if void {
		return 0
	}
	L.Push(v.toLua(L, &rep))
	return 1
}

// redisLog is redis.log(level, message...).
func (v *vm) redisLog(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		raiseRedisError(L, "redis.log() requires two arguments or more.")
	}
	f, ok := toNumber(L.Get(1))
	if !ok {
		raiseRedisError(L, "First argument must be a number (log level).")
	}
	level := luaDoubleToInt(f)
	if level < LogDebug || level > LogWarning {
		raiseRedisError(L, "Invalid debug level.")
	}
	var msg []byte
	for i := 2; i <= n; i++ {
		var s string
		switch x := L.Get(i).(type) {
		case lua.LString:
			s = string(x)
		case lua.LNumber:
			s = luaNumberString(float64(x))
		default:
			continue
		}
		if i != 2 {
			msg = append(msg, ' ')
		}
		msg = append(msg, s...)
	}
	v.host.Log(int(level), string(msg))
	return 0
}
