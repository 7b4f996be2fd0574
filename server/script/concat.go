package script

import (
	"math"
	"regexp"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// concat is the concatenation helper the parser calls for a .. b .. c:
// Lua 5.1's luaV_concat, pairing from the right, numbers as %.14g,
// __concat for the rest, and its error naming the operand.
func (v *vm) concat(L *lua.LState) int {
	names := strings.Split(checkString(L, 1), "\x00")
	n := L.GetTop() - 1
	vals := make([]lua.LValue, n)
	for i := range vals {
		vals[i] = L.Get(i + 2)
	}
	if len(names) != n {
		names = make([]string, n)
	}
	for len(vals) > 1 {
		last := len(vals) - 1
		a, b := vals[last-1], vals[last]
		if !lua.LVCanConvToString(a) || !lua.LVCanConvToString(b) {
			mm := v.metaConcat(a)
			if mm == lua.LNil {
				mm = v.metaConcat(b)
			}
			if mm == lua.LNil {
				bad, name := a, names[last-1]
				if lua.LVCanConvToString(a) {
					bad, name = b, names[last]
				}
				if name != "" {
					luaError(L, "attempt to concatenate %s (a %s value)", name, bad.Type().String())
				}
				luaError(L, "attempt to concatenate a %s value", bad.Type().String())
			}
			L.Push(mm)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			r := L.Get(-1)
			L.Pop(1)
			vals = append(vals[:last-1], r)
			names = append(names[:last-1], "")
			continue
		}
		// As many strings and numbers as there are from the right.
		k := last
		size := 0
		for k >= 0 && lua.LVCanConvToString(vals[k]) {
			size += len(luaToString(vals[k]))
			k--
		}
		k++
		if size > chargeCheck && !v.charge(int64(size)) {
			v.noMemory()
		}
		buf := make([]byte, 0, size)
		for _, x := range vals[k:] {
			buf = append(buf, luaToString(x)...)
		}
		vals = append(vals[:k], lua.LString(buf))
		names = append(names[:k], "")
	}
	if len(vals) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if x, ok := vals[0].(lua.LNumber); ok {
		// A single operand cannot happen; keep the value's string form.
		L.Push(lua.LString(luaNumberString(float64(x))))
		return 1
	}
	L.Push(vals[0])
	return 1
}

// mod is the modulo helper the parser calls for a % b: Lua 5.1's
// a - floor(a/b)*b over numbers and strings that convert, else __mod.
func (v *vm) mod(L *lua.LState) int {
	names := strings.Split(checkString(L, 1), "\x00")
	a, b := L.Get(2), L.Get(3)
	x, okx := toNumber(a)
	y, oky := toNumber(b)
	if okx && oky {
		L.Push(lua.LNumber(x - math.Floor(x/y)*y))
		return 1
	}
	mm := v.metaField(a, "__mod")
	if mm == lua.LNil {
		mm = v.metaField(b, "__mod")
	}
	if mm != lua.LNil {
		L.Push(mm)
		L.Push(a)
		L.Push(b)
		L.Call(2, 1)
		return 1
	}
	bad, name := b, ""
	if len(names) == 2 {
		name = names[1]
	}
	if !okx {
		bad = a
		if len(names) == 2 {
			name = names[0]
		}
	}
	if name != "" {
		luaError(L, "attempt to perform arithmetic on %s (a %s value)", name, bad.Type().String())
	}
	luaError(L, "attempt to perform arithmetic on a %s value", bad.Type().String())
	return 0
}

// forNum is the numeric for's bound: a number, or a string that
// converts to one.
func (v *vm) forNum(L *lua.LState) int {
	x := L.Get(2)
	if n, ok := x.(lua.LNumber); ok {
		L.Push(n)
		return 1
	}
	if s, ok := x.(lua.LString); ok {
		if f, ok := str2number(string(s)); ok {
			L.Push(lua.LNumber(f))
			return 1
		}
	}
	luaError(L, "'for' %s must be a number", luaToString(L.Get(1)))
	return 0
}

// stringArith is the strings' arithmetic metamethod for op: Lua 5.1's
// coercion (luaO_str2d), then the other operand's metamethod, then the
// error naming the culprit.
func (v *vm) stringArith(op string) lua.LGFunction {
	return func(L *lua.LState) int {
		a, b := L.Get(1), L.Get(2)
		if op == "__unm" {
			b = a
		}
		x, okx := toNumber(a)
		y, oky := toNumber(b)
		if okx && oky {
			var r float64
			switch op {
			case "__add":
				r = x + y
			case "__sub":
				r = x - y
			case "__mul":
				r = x * y
			case "__div":
				r = x / y
			case "__mod":
				r = x - math.Floor(x/y)*y
			case "__pow":
				r = math.Pow(x, y)
			case "__unm":
				r = -x
			}
			L.Push(lua.LNumber(r))
			return 1
		}
		for _, o := range []lua.LValue{a, b} {
			if mm := v.metaField(o, op); mm != lua.LNil {
				L.Push(mm)
				L.Push(a)
				L.Push(b)
				L.Call(2, 1)
				return 1
			}
		}
		bad := b
		if !okx {
			bad = a
		}
		msg := lua.LValue(lua.LString(where(L, 1) + "attempt to perform arithmetic on a " + bad.Type().String() + " value"))
		// Named from the caller's instruction, as a VM error would be.
		L.Error(nameError(L, msg, 1), 0)
		return 0
	}
}

func (v *vm) metaConcat(lv lua.LValue) lua.LValue {
	switch lv.(type) {
	case *lua.LTable, *lua.LUserData:
		return v.metaField(lv, "__concat")
	}
	return lua.LNil
}

// Runtime errors gopher-lua words differently from Lua 5.1, put in Lua
// 5.1's words. Where gopher-lua does not say the operand's type (unary
// minus, length, call) it is given as nil, the common case; Lua's
// variable names ("local 'x'") are not known here.
var (
	reArith   = regexp.MustCompile(`cannot perform \w+ operation between (\w+) and (\w+)$`)
	reIndex   = regexp.MustCompile(`attempt to index a non-table object\((\w+)\) with key '.*'$`)
	reCompare = regexp.MustCompile(`attempt to compare (\w+) with (\w+)$`)
	reArgName = regexp.MustCompile(`bad argument #(\d+) to ([^' (]+) \(`)
	msgFixes  = strings.NewReplacer(
		"__unm undefined", "attempt to perform arithmetic on a nil value",
		"__len undefined", "attempt to get length of a nil value",
		"attempt to call a non-function object", "attempt to call a nil value",
		"for statement init must be a number", "'for' initial value must be a number",
		"for statement limit must be a number", "'for' limit must be a number",
		"for statement step must be a number", "'for' step must be a number",
		"registry overflow", "stack overflow",
		"lua callstack overflow", "stack overflow",
	)
)

func fixMessage(s string) string {
	if m := reArith.FindStringSubmatchIndex(s); m != nil {
		t := s[m[2]:m[3]]
		if t == "number" {
			t = s[m[4]:m[5]]
		}
		return s[:m[0]] + "attempt to perform arithmetic on a " + t + " value"
	}
	if m := reIndex.FindStringSubmatchIndex(s); m != nil {
		return s[:m[0]] + "attempt to index a " + s[m[2]:m[3]] + " value"
	}
	if m := reCompare.FindStringSubmatchIndex(s); m != nil {
		a, b := s[m[2]:m[3]], s[m[4]:m[5]]
		if a == b {
			return s[:m[0]] + "attempt to compare two " + a + " values"
		}
		return s
	}
	s = reArgName.ReplaceAllString(s, "bad argument #$1 to '$2' (")
	return msgFixes.Replace(s)
}

// fixError applies fixMessage to a string error value.
func fixError(lv lua.LValue) lua.LValue {
	if s, ok := lv.(lua.LString); ok {
		return lua.LString(fixMessage(string(s)))
	}
	return lv
}
