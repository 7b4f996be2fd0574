package script

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The base library as Redis 7.0's Lua 5.1 has it, where gopher-lua's
// differs: Redis's own pcall, error levels, number formatting (%.14g) and
// parsing (strtod), Lua 5.1's limits and messages, and the functions that
// must see through read-only proxies.

func (v *vm) installBase() {
	g := v.globals
	L := v.L
	set := func(name string, fn lua.LGFunction) { g.RawSetString(name, L.NewFunction(fn)) }
	set("pcall", v.pcall)
	v.namer = L.NewFunction(func(L *lua.LState) int {
		L.Push(nameError(L, fixError(v.stopValue(L, L.Get(1))), 1))
		return 1
	})
	set("error", v.baseError)
	set("tostring", func(L *lua.LState) int {
		checkAny(L, 1)
		L.Push(lua.LString(v.tostring(L, L.Get(1))))
		return 1
	})
	set("tonumber", baseToNumber)
	// xpcall's handler gets the error as Lua 5.1 words it: through one
	// shared Go wrapper, which the stack-level logic of the error
	// handlers skips.
	v.xwrap = L.NewFunction(func(L *lua.LState) int {
		h := v.xhandlers[len(v.xhandlers)-1]
		L.Push(h)
		L.Push(nameError(L, fixError(v.stopValue(L, L.Get(1))), 1))
		L.Call(1, 1)
		return 1
	})
	set("xpcall", func(L *lua.LState) int {
		checkAny(L, 2)
		v.xhandlers = append(v.xhandlers, L.Get(2))
		defer func() { v.xhandlers = v.xhandlers[:len(v.xhandlers)-1] }()
		L.SetTop(1)
		if err := L.PCall(0, lua.MultRet, v.xwrap); err != nil {
			L.SetTop(0)
			L.Push(lua.LFalse)
			L.Push(v.errValue(err))
			return 2
		}
		L.Insert(lua.LTrue, 1)
		return L.GetTop()
	})
	next := L.NewFunction(v.next)
	g.RawSetString("next", next)
	g.RawSetString("pairs", L.NewFunction(func(L *lua.LState) int {
		checkTable(L, 1)
		L.Push(next)
		L.Push(L.Get(1))
		L.Push(lua.LNil)
		return 3
	}))
	set("rawget", func(L *lua.LState) int {
		t := checkTable(L, 1)
		checkAny(L, 2)
		b, _ := v.backing(t)
		L.Push(b.RawGet(L.Get(2)))
		return 1
	})
	set("rawset", func(L *lua.LState) int {
		t := checkTable(L, 1)
		checkAny(L, 2)
		checkAny(L, 3)
		if _, ro := v.back[t]; ro {
			L.Error(lua.LString("Attempt to modify a readonly table"), 0)
		}
		v.rawSet(L, t, L.Get(2), L.Get(3))
		L.SetTop(1)
		return 1
	})
	set("getmetatable", func(L *lua.LState) int {
		checkAny(L, 1)
		L.Push(v.getMetatable(L.Get(1)))
		return 1
	})
	set("setmetatable", func(L *lua.LState) int {
		t := checkTable(L, 1)
		mt := L.Get(2)
		if mt.Type() != lua.LTNil && mt.Type() != lua.LTTable {
			argError(L, 2, "nil or table expected")
		}
		if m, ok := t.Metatable.(*lua.LTable); ok && m.RawGetString("__metatable") != lua.LNil {
			luaError(L, "cannot change a protected metatable")
		}
		if _, ro := v.back[t]; ro {
			L.Error(lua.LString("Attempt to modify a readonly table"), 0)
		}
		if p, ok := mt.(*lua.LTable); ok {
			// A protected metatable works as the table it protects.
			if b, ro := v.back[p]; ro {
				mt = b
			}
		}
		t.Metatable = mt
		L.SetTop(1)
		return 1
	})
	set("unpack", func(L *lua.LState) int {
		t := checkTable(L, 1)
		b, _ := v.backing(t)
		i := optInt(L, 2, 1)
		var e int64
		if L.Get(3) == lua.LNil {
			e = int64(b.Len())
		} else {
			e = int64(checkInt(L, 3))
		}
		if int64(i) > e {
			return 0
		}
		n := e - int64(i) + 1
		if n <= 0 || n+int64(L.GetTop()) > maxCStack {
			luaError(L, "too many results to unpack")
		}
		for k := int64(i); k <= e; k++ {
			L.Push(b.RawGetInt(int(k)))
		}
		return int(n)
	})
	set("select", func(L *lua.LState) int {
		n := L.GetTop()
		if s, ok := L.Get(1).(lua.LString); ok && s == "#" {
			L.Push(num(n - 1))
			return 1
		}
		i := int(checkInt(L, 1))
		if i < 0 {
			i = n + i
		} else if i > n {
			i = n
		}
		if i < 1 {
			argError(L, 1, "index out of range")
		}
		return n - i
	})
	v.globals.RawSetString(catGlobal, L.NewFunction(v.concat))
	v.globals.RawSetString(modName, L.NewFunction(v.mod))
	v.globals.RawSetString(forName, L.NewFunction(v.forNum))
	set("assert", func(L *lua.LState) int {
		checkAny(L, 1)
		if !lua.LVAsBool(L.Get(1)) {
			luaError(L, "%s", optString(L, 2, "assertion failed!"))
		}
		return L.GetTop()
	})
	set("collectgarbage", func(L *lua.LState) int {
		opt := optString(L, 1, "collect")
		switch opt {
		case "count":
			L.Push(num(float64(heapObjects()) / 1024))
		case "step":
			L.Push(lua.LFalse)
		case "setpause", "setstepmul":
			L.Push(num(200))
		case "collect", "stop", "restart":
			// The heap is Go's; a script does not get to drive its
			// collector.
			L.Push(num(0))
		default:
			argError(L, 1, "invalid option '"+opt+"'")
		}
		return 1
	})
	set("gcinfo", func(L *lua.LState) int {
		L.Push(num(heapObjects() >> 10))
		return 1
	})
	set("loadstring", func(L *lua.LState) int {
		src := checkString(L, 1)
		name := optString(L, 2, src)
		return v.load(L, src, name)
	})
	set("load", func(L *lua.LState) int {
		fn := L.Get(1)
		if fn.Type() != lua.LTFunction {
			typeError(L, 1, "function")
		}
		name := optString(L, 2, "=(load)")
		var b strings.Builder
		for {
			L.Push(fn)
			L.Call(0, 1)
			r := L.Get(-1)
			L.Pop(1)
			if r == lua.LNil {
				break
			}
			s, ok := r.(lua.LString)
			if !ok {
				if n, isNum := r.(lua.LNumber); isNum {
					s = lua.LString(luaNumberString(float64(n)))
				} else {
					L.Push(lua.LNil)
					L.Push(lua.LString(v.where(L, 1) + "reader function must return a string"))
					return 2
				}
			}
			if len(s) == 0 {
				break
			}
			if !v.charge(int64(len(s))) {
				v.noMemory()
			}
			b.WriteString(string(s))
		}
		return v.load(L, b.String(), name)
	})
}

// load compiles a chunk for loadstring and load: the function, or nil and
// the error.
func (v *vm) load(L *lua.LState, src, chunkname string) int {
	proto, err := compileChunk(src, chunkname, 1)
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(err.Error()))
		return 2
	}
	L.Push(L.NewFunctionFromProto(proto))
	return 1
}

// pcall is Redis's (luaRedisPcall): Lua's pcall, except that an error
// table with an err field comes back as that field, as errors were
// strings before Redis 7.
func (v *vm) pcall(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		// Redis inserts its result placeholder and calls it.
		L.Push(lua.LFalse)
		L.Push(lua.LString("attempt to call a boolean value"))
		return 2
	}
	if err := L.PCall(n-1, lua.MultRet, v.namer); err != nil {
		ev := v.errValue(err)
		if t, ok := ev.(*lua.LTable); ok {
			if e := t.RawGetString("err"); lua.LVCanConvToString(e) {
				ev = e
			}
		}
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(ev)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// stopValue is the error a halted run raises, as Lua code sees it:
// Redis's kill error table, Lua's memory error string.
func (v *vm) stopValue(L *lua.LState, ev lua.LValue) lua.LValue {
	s, ok := ev.(lua.LString)
	if !ok || v.ctx.stop == nil || !strings.HasSuffix(string(s), v.ctx.stop.Error()) {
		return ev
	}
	if v.ctx.stop == errNoMemory {
		return lua.LString(errNoMemory.Error())
	}
	return errorTable(L, "ERR "+errKilled.Error(), false)
}

// errValue is the Lua value of an error PCall returned; a Go panic inside
// the interpreter also retires it.
func (v *vm) errValue(err error) lua.LValue {
	if aerr, ok := err.(*lua.ApiError); ok {
		if aerr.Type == lua.ApiErrorPanic {
			v.recycle = false
		}
		if aerr.Object != nil {
			return aerr.Object
		}
	}
	return lua.LString(err.Error())
}

// baseError is Lua 5.1's error(message [, level]): a string or number
// message gets the position of the function at level (1, the caller of
// error, by default; 0 for none).
func (v *vm) baseError(L *lua.LState) int {
	level := optInt(L, 2, 1)
	msg := L.Get(1)
	if lua.LVCanConvToString(msg) && level > 0 {
		msg = lua.LString(v.where(L, int(level)) + luaToString(msg))
	}
	L.Error(msg, 0)
	return 0
}

// luaError is luaL_error: the message with the position of the running
// function's caller when that is a Lua function.
func luaError(L *lua.LState, format string, args ...any) {
	L.Error(lua.LString(where(L, 1)+fmt.Sprintf(format, args...)), 0)
}

func (v *vm) where(L *lua.LState, level int) string { return where(L, level) }

// where is luaL_where: "chunk:line: " for the Lua function at level
// (0 is the running Go function), or nothing.
func where(L *lua.LState, level int) string {
	dbg, ok := L.GetStack(level)
	if !ok {
		return ""
	}
	fn, _ := L.GetInfo("Slf", dbg, lua.LNil)
	if f, isFn := fn.(*lua.LFunction); !isFn || f.IsG || dbg.CurrentLine <= 0 {
		return ""
	}
	return dbg.Source + ":" + strconv.Itoa(dbg.CurrentLine) + ": "
}

// tostring is Lua 5.1's tostring: __tostring, else numbers as %.14g.
func (v *vm) tostring(L *lua.LState, lv lua.LValue) string {
	switch x := lv.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return luaNumberString(float64(x))
	case *lua.LTable:
		if m, ok := v.getMetatable(x).(*lua.LTable); ok {
			if b, ro := v.back[m]; ro {
				m = b
			}
			if fn := m.RawGetString("__tostring"); fn != lua.LNil {
				L.Push(fn)
				L.Push(x)
				L.Call(1, 1)
				r := L.Get(-1)
				L.Pop(1)
				return luaToString(r)
			}
		}
	}
	return lv.String()
}

func (v *vm) getMetatable(lv lua.LValue) lua.LValue {
	switch x := lv.(type) {
	case *lua.LTable:
		if _, ro := v.back[x]; ro {
			if m := v.meta[x]; m != nil {
				return m
			}
			return lua.LNil
		}
		m, ok := x.Metatable.(*lua.LTable)
		if !ok {
			return lua.LNil
		}
		if mm := m.RawGetString("__metatable"); mm != lua.LNil {
			return mm
		}
		// A protected table set as a metatable shows as its proxy.
		for p, b := range v.back {
			if b == m {
				return p
			}
		}
		return m
	case lua.LString:
		return v.strMeta
	}
	return v.L.GetMetatable(lv)
}

// next is Lua's next, reading a proxy's protected table.
func (v *vm) next(L *lua.LState) int {
	t := checkTable(L, 1)
	b, _ := v.backing(t)
	k, val := b.Next(L.Get(2))
	for b == v.globals && hiddenGlobal(k) {
		k, val = b.Next(k)
	}
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(val)
	return 2
}

// hiddenGlobal says whether k is one of the parser's helpers, which
// scripts cannot name and pairs does not show.
func hiddenGlobal(k lua.LValue) bool {
	s, ok := k.(lua.LString)
	return ok && len(s) > 0 && s[0] == 0
}

// rawSet is lua_rawset's checks on the key and the store.
func (v *vm) rawSet(L *lua.LState, t *lua.LTable, k, val lua.LValue) {
	switch x := k.(type) {
	case *lua.LNilType:
		L.Error(lua.LString("table index is nil"), 0)
	case lua.LNumber:
		if math.IsNaN(float64(x)) {
			L.Error(lua.LString("table index is NaN"), 0)
		}
	}
	t.RawSet(k, val)
}

func baseToNumber(L *lua.LState) int {
	base := optInt(L, 2, 10)
	if base == 10 {
		checkAny(L, 1)
		if f, ok := toNumber(L.Get(1)); ok {
			L.Push(num(f))
			return 1
		}
		L.Push(lua.LNil)
		return 1
	}
	s := checkString(L, 1)
	if base < 2 || base > 36 {
		argError(L, 2, "base out of range")
	}
	if n, ok := strtoulBase(s, int(base)); ok {
		L.Push(num(n))
		return 1
	}
	L.Push(lua.LNil)
	return 1
}

func isSpaceC(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// strtoulBase is tonumber(s, base): strtoul with at least one digit and
// nothing but spaces after it.
func strtoulBase(s string, base int) (float64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	i := 0
	for i < len(s) && isSpaceC(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && i+2 < len(s) && digitVal(s[i+2]) < 16 {
		i += 2
	}
	start := i
	var n uint64
	overflow := false
	for i < len(s) {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		hi, lo := mulAdd(n, uint64(base), uint64(d))
		if hi != 0 {
			overflow = true
		}
		n = lo
		i++
	}
	if i == start {
		return 0, false
	}
	for i < len(s) && isSpaceC(s[i]) {
		i++
	}
	if i != len(s) {
		return 0, false
	}
	if overflow {
		n = math.MaxUint64
	} else if neg {
		n = -n
	}
	return float64(n), true
}

func mulAdd(a, b, c uint64) (hi, lo uint64) {
	// a*b + c with the carry.
	const mask = 1<<32 - 1
	a1, a0 := a>>32, a&mask
	b1, b0 := b>>32, b&mask
	p00 := a0 * b0
	p01 := a0 * b1
	p10 := a1 * b0
	p11 := a1 * b1
	mid := p00>>32 + p01&mask + p10&mask
	lo = p00&mask | mid<<32
	hi = p11 + p01>>32 + p10>>32 + mid>>32
	lo2 := lo + c
	if lo2 < lo {
		hi++
	}
	return hi, lo2
}

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return 99
}

// str2number is Lua 5.1's luaO_str2d over glibc's strtod: leading
// spaces, a decimal or hexadecimal number, inf or nan, then only spaces.
func str2number(s string) (float64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f, end := strtod(s)
	if end == 0 {
		return 0, false
	}
	if end < len(s) && (s[end] == 'x' || s[end] == 'X') {
		n, e := strtoul16(s)
		f, end = n, e
	}
	for end < len(s) && isSpaceC(s[end]) {
		end++
	}
	return f, end == len(s)
}

// strtoul16 is strtoul(s, &end, 16), for luaO_str2d's "0x" retry.
func strtoul16(s string) (float64, int) {
	i := 0
	for i < len(s) && isSpaceC(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && digitVal(s[i+2]) < 16 {
		i += 2
	}
	start := i
	var n uint64
	over := false
	for i < len(s) && digitVal(s[i]) < 16 {
		if n>>60 != 0 {
			over = true
		}
		n = n<<4 | uint64(digitVal(s[i]))
		i++
	}
	if i == start {
		return 0, 0
	}
	if over {
		n = math.MaxUint64
	} else if neg {
		n = -n
	}
	return float64(n), i
}

// strtod returns the value of the longest prefix of s that glibc's strtod
// accepts and its length (0: none).
func strtod(s string) (float64, int) {
	i := 0
	for i < len(s) && isSpaceC(s[i]) {
		i++
	}
	start := i
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	rest := s[i:]
	lower := strings.ToLower(rest[:min(len(rest), 8)])
	switch {
	case strings.HasPrefix(lower, "infinity"):
		return signed(math.Inf(1), neg), i + 8
	case strings.HasPrefix(lower, "inf"):
		return signed(math.Inf(1), neg), i + 3
	case strings.HasPrefix(lower, "nan"):
		end := i + 3
		if end < len(s) && s[end] == '(' {
			j := end + 1
			for j < len(s) && (digitVal(s[j]) < 36 || s[j] == '_') {
				j++
			}
			if j < len(s) && s[j] == ')' {
				end = j + 1
			}
		}
		nan := math.Float64frombits(0x7FF8000000000000)
		if neg {
			nan = math.Float64frombits(0xFFF8000000000000)
		}
		return nan, end
	}
	if len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		j := i + 2
		mant := j
		digits := 0
		for j < len(s) && digitVal(s[j]) < 16 {
			j++
			digits++
		}
		frac := ""
		if j < len(s) && s[j] == '.' {
			k := j + 1
			for k < len(s) && digitVal(s[k]) < 16 {
				k++
			}
			if k-j-1 > 0 || digits > 0 {
				frac = s[j+1 : k]
				digits += k - j - 1
				j = k
			}
		}
		if digits == 0 {
			// "0x" alone: strtod reads the 0.
			return signed(0, neg), i + 1
		}
		intPart := s[mant:j]
		if frac != "" || strings.HasSuffix(intPart, ".") {
			intPart = s[mant : j-len(frac)-1]
		}
		exp := "0"
		if j < len(s) && (s[j] == 'p' || s[j] == 'P') {
			k := j + 1
			if k < len(s) && (s[k] == '+' || s[k] == '-') {
				k++
			}
			d := k
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			if k > d {
				exp = s[j+1 : k]
				j = k
			}
		}
		lit := "0x" + intPart
		if intPart == "" {
			lit = "0x0"
		}
		if frac != "" {
			lit += "." + frac
		}
		f, err := strconv.ParseFloat(lit+"p"+exp, 64)
		if err != nil && !isRange(err) {
			return 0, 0
		}
		return signed(f, neg), j
	}
	j := i
	digits := 0
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		k := j + 1
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		digits += k - j - 1
		if digits > 0 {
			j = k
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		d := k
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > d {
			j = k
		}
	}
	f, err := strconv.ParseFloat(s[start:j], 64)
	if err != nil && !isRange(err) {
		return 0, 0
	}
	return f, j
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func signed(f float64, neg bool) float64 {
	if neg {
		return -f
	}
	return f
}

// Argument checks with Lua 5.1's messages ("bad argument #1 to 'rep'
// (number expected, got no value)").

func typeName(L *lua.LState, n int) string {
	if n > L.GetTop() {
		return "no value"
	}
	return L.Get(n).Type().String()
}

func argError(L *lua.LState, n int, msg string) {
	name := "?"
	if dbg, ok := L.GetStack(0); ok {
		L.GetInfo("n", dbg, lua.LNil)
		if dbg.Name != "" && !strings.HasPrefix(dbg.Name, "<") && !strings.HasPrefix(dbg.Name, "(") && dbg.Name != "main chunk" {
			name = dbg.Name
			if i := strings.LastIndexAny(name, ".:"); i >= 0 {
				if name[i] == ':' {
					n--
					if n == 0 {
						luaError(L, "calling '%s' on bad self (%s)", name[i+1:], msg)
					}
				}
				name = name[i+1:]
			}
		}
	}
	luaError(L, "bad argument #%d to '%s' (%s)", n, name, msg)
}

func typeError(L *lua.LState, n int, want string) {
	argError(L, n, want+" expected, got "+typeName(L, n))
}

func checkAny(L *lua.LState, n int) {
	if n > L.GetTop() {
		argError(L, n, "value expected")
	}
}

func checkTable(L *lua.LState, n int) *lua.LTable {
	t, ok := L.Get(n).(*lua.LTable)
	if !ok {
		typeError(L, n, "table")
	}
	return t
}

func checkNumber(L *lua.LState, n int) float64 {
	f, ok := toNumber(L.Get(n))
	if !ok {
		typeError(L, n, "number")
	}
	return f
}

func checkInt(L *lua.LState, n int) int32 { return luaCheckInt(checkNumber(L, n)) }

func checkInteger(L *lua.LState, n int) int64 { return luaToInteger(checkNumber(L, n)) }

func optInt(L *lua.LState, n int, d int32) int32 {
	if L.Get(n) == lua.LNil {
		return d
	}
	return checkInt(L, n)
}

func optInteger(L *lua.LState, n int, d int64) int64 {
	if L.Get(n) == lua.LNil {
		return d
	}
	return checkInteger(L, n)
}

func checkString(L *lua.LState, n int) string {
	switch x := L.Get(n).(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return luaNumberString(float64(x))
	}
	typeError(L, n, "string")
	return ""
}

func optString(L *lua.LState, n int, d string) string {
	if L.Get(n) == lua.LNil {
		return d
	}
	return checkString(L, n)
}
