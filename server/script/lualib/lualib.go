// Package lualib is the Lua libraries Redis gives scripts beyond Lua's
// own: cjson, struct, bit and cmsgpack, as gopher-lua modules that behave
// as Redis 7.0's do, byte for byte: the same encodings, the same number
// formatting, the same error texts, and the same treatment of odd input
// (strings cut at a NUL where the C code reads a C string, numbers
// converted as x86-64 converts them where C leaves it undefined).
//
// The modules see Lua values the way the C API does: a string argument
// that looks like a number is a number and a number is a string where a
// string is wanted (Lua 5.1's coercions, with the number printed as
// "%.14g"), a missing argument is "no value" in error texts, and limits
// that Lua's C stack imposes (8,000 slots per C call) are kept, so that
// deep or wide data fails where Redis fails, with Redis's message.
package lualib

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// Open installs cjson, struct, bit and cmsgpack as globals in L, as Redis
// does. Each call makes fresh module tables (cjson's settings live with
// its table, as they live with the Lua state in Redis).
func Open(L *lua.LState) {
	null := L.NewUserData()
	null.Value = nullValue
	L.SetGlobal("cjson", newCJSON(L, null))
	L.SetGlobal("struct", newStruct(L))
	L.SetGlobal("cmsgpack", newCmsgpack(L))
	L.SetGlobal("bit", newBit(L))
}

// nullMarker is the Value of cjson.null, Redis's NULL light userdata.
type nullMarker struct{}

var nullValue = &nullMarker{}

// IsNull reports whether v is cjson.null (of any state Open prepared):
// the value JSON's null decodes to, which Redis's conversion of a
// script's result turns into a nil reply like any userdata.
func IsNull(v lua.LValue) bool {
	ud, ok := v.(*lua.LUserData)
	return ok && ud.Value == nullValue
}

// maxCStack is LUAI_MAXCSTACK: how many values one C function may hold on
// its stack. lua_checkstack fails past it, and the C modules turn that
// into their "stack overflow (...)" or nesting errors.
const maxCStack = 8000

// register makes a module table of Go functions.
func register(L *lua.LState, fns map[string]lua.LGFunction) *lua.LTable {
	t := L.NewTable()
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}

// funcName is the name Lua 5.1's luaL_argerror prints for the running Go
// function: how its caller named it ("tobit" for bit.tobit(x), a local's
// name for an alias), or "?" when it was called from Go (pcall(f, ...)).
func funcName(L *lua.LState) string {
	dbg, ok := L.GetStack(0)
	if !ok {
		return "?"
	}
	if _, err := L.GetInfo("n", dbg, nil); err != nil {
		return "?"
	}
	switch n := dbg.Name; {
	case n == "", n == "(anonymous)", n[0] == '<':
		return "?"
	default:
		return n
	}
}

// argError raises luaL_argerror's "bad argument #n to 'f' (msg)".
func argError(L *lua.LState, n int, msg string) {
	raise(L, "bad argument #%d to '%s' (%s)", n, funcName(L), msg)
}

// typeError raises luaL_typerror's "bad argument #n to 'f' (T expected,
// got U)", where a missing argument is "no value".
func typeError(L *lua.LState, n int, expected string) {
	argError(L, n, fmt.Sprintf("%s expected, got %s", expected, typeName(L, n)))
}

// typeName is luaL_typename of argument n.
func typeName(L *lua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

// checkNumber is luaL_checknumber: a number, or a string Lua 5.1 reads as
// one.
func checkNumber(L *lua.LState, n int) float64 {
	f, ok := toNumber(L.Get(n))
	if !ok {
		typeError(L, n, "number")
	}
	return f
}

// checkInteger is luaL_checkinteger: checkNumber truncated to lua_Integer
// (int64) as the C cast does.
func checkInteger(L *lua.LState, n int) int64 {
	return cInt64(checkNumber(L, n))
}

// optInteger is luaL_optinteger: def when the argument is missing or nil.
func optInteger(L *lua.LState, n int, def int64) int64 {
	if L.Get(n) == lua.LNil {
		return def
	}
	return checkInteger(L, n)
}

// checkLString is luaL_checklstring: a string, or a number printed as
// Lua prints numbers.
func checkLString(L *lua.LState, n int) string {
	switch v := L.Get(n).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return formatNumber(float64(v))
	}
	typeError(L, n, "string")
	return ""
}

// checkCString is luaL_checkstring where the C code then reads a C
// string: the argument up to its first NUL byte.
func checkCString(L *lua.LState, n int) string {
	return cString(checkLString(L, n))
}

// cString cuts s at its first NUL, as C reads it.
func cString(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i]
		}
	}
	return s
}

// raise is luaL_error: the message, after the position of the calling
// Lua code ("user_script:3: ") when the caller is Lua code; a module
// function that pcall (or any Go function) called directly gets none, as
// in C Lua. (gopher-lua's RaiseError looks past Go callers for one.)
func raise(L *lua.LState, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if dbg, ok := L.GetStack(1); ok {
		if _, err := L.GetInfo("Sl", dbg, nil); err == nil && dbg.What != "G" && dbg.CurrentLine > 0 {
			msg = fmt.Sprintf("%s:%d: %s", dbg.Source, dbg.CurrentLine, msg)
		}
	}
	L.Error(lua.LString(msg), 0)
}

// stackOverflow raises luaL_checkstack's error.
func stackOverflow(L *lua.LState, what string) {
	raise(L, "stack overflow (%s)", what)
}

// runError raises an error with no position, as luaG_runerror does when
// the running function is a C function ("table index is nil").
func runError(L *lua.LState, msg string) {
	L.Error(lua.LString(msg), 0)
}

// forEach calls fn for each entry of t in lua_next's order as gopher-lua
// keeps it (the array part, then the other keys in insertion order),
// until fn returns false. (Real Lua's order follows its hash layout, so
// the order of keys in an encoded map or object can differ from Redis's;
// the set of entries cannot.)
func forEach(t *lua.LTable, fn func(k, v lua.LValue) bool) {
	for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
		if !fn(k, v) {
			return
		}
	}
}
