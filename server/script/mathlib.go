package script

import (
	"math"

	lua "github.com/yuin/gopher-lua"
)

// The math library as Lua 5.1's over C's libm: numeric strings accepted,
// Lua 5.1's messages, math.huge an infinity. math.random and
// math.randomseed are Redis's (tablib.go).

func (v *vm) installMathFuncs(t *lua.LTable) {
	L := v.L
	f1 := func(name string, f func(float64) float64) {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			x := checkNumber(L, 1)
			L.Push(num(x86NaN(f(x), x, 0)))
			return 1
		}))
	}
	f2 := func(name string, f func(a, b float64) float64) {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			a := checkNumber(L, 1)
			b := checkNumber(L, 2)
			L.Push(num(x86NaN(f(a, b), a, b)))
			return 1
		}))
	}
	f1("abs", math.Abs)
	f1("acos", math.Acos)
	f1("asin", math.Asin)
	f1("atan", math.Atan)
	f2("atan2", math.Atan2)
	f1("ceil", math.Ceil)
	f1("cos", math.Cos)
	f1("cosh", math.Cosh)
	f1("deg", func(x float64) float64 { return x / (math.Pi / 180) })
	f1("exp", math.Exp)
	f1("floor", math.Floor)
	f2("fmod", math.Mod)
	f2("mod", math.Mod)
	f1("log", math.Log)
	f1("log10", math.Log10)
	f2("pow", math.Pow)
	f1("rad", func(x float64) float64 { return x * (math.Pi / 180) })
	f1("sin", math.Sin)
	f1("sinh", math.Sinh)
	f1("sqrt", math.Sqrt)
	f1("tan", math.Tan)
	f1("tanh", math.Tanh)
	t.RawSetString("frexp", L.NewFunction(func(L *lua.LState) int {
		m, e := math.Frexp(checkNumber(L, 1))
		L.Push(num(m))
		L.Push(num(e))
		return 2
	}))
	t.RawSetString("ldexp", L.NewFunction(func(L *lua.LState) int {
		x := checkNumber(L, 1)
		L.Push(num(math.Ldexp(x, int(checkInt(L, 2)))))
		return 1
	}))
	t.RawSetString("modf", L.NewFunction(func(L *lua.LState) int {
		i, f := math.Modf(checkNumber(L, 1))
		L.Push(num(i))
		L.Push(num(f))
		return 2
	}))
	minmax := func(name string, less func(a, b float64) bool) {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			n := L.GetTop()
			m := checkNumber(L, 1)
			for i := 2; i <= n; i++ {
				if d := checkNumber(L, i); less(d, m) {
					m = d
				}
			}
			L.Push(num(m))
			return 1
		}))
	}
	minmax("min", func(a, b float64) bool { return a < b })
	minmax("max", func(a, b float64) bool { return a > b })
	t.RawSetString("huge", lua.LNumber(math.Inf(1)))
	t.RawSetString("pi", lua.LNumber(math.Pi))
}

// x86NaN gives a NaN that libm made from numbers the sign x86's default
// NaN has (glibc prints it -nan); a NaN argument passes through.
func x86NaN(r, a, b float64) float64 {
	if r != r && a == a && b == b {
		return math.Copysign(math.NaN(), -1)
	}
	return r
}

// sortTable is Lua 5.1's table.sort: the same quicksort (median of
// three, the pivot kept at u-1), so that elements the order does not
// tell apart end where Lua 5.1 puts them, and the same errors.
func (v *vm) sortTable(L *lua.LState) int {
	t, n := checkTable(L, 1), 0
	b, ro := v.backing(t)
	n = b.Len()
	fn := L.Get(2)
	if fn != lua.LNil {
		if fn.Type() != lua.LTFunction {
			typeError(L, 2, "function")
		}
	}
	s := &sorter{v: v, L: L, t: t, ro: ro, fn: fn}
	s.sort(1, n)
	return 0
}

type sorter struct {
	v  *vm
	L  *lua.LState
	t  *lua.LTable
	ro bool
	fn lua.LValue
}

func (s *sorter) get(i int) lua.LValue { return s.t.RawGetInt(i) }

func (s *sorter) set(i int, x lua.LValue) {
	if s.ro {
		s.L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
	s.t.RawSetInt(i, x)
}

// less is sort_comp: the order function, or lua_lessthan.
func (s *sorter) less(a, b lua.LValue) bool {
	L := s.L
	if s.fn != lua.LNil {
		L.Push(s.fn)
		L.Push(a)
		L.Push(b)
		L.Call(2, 1)
		r := lua.LVAsBool(L.Get(-1))
		L.Pop(1)
		return r
	}
	return s.v.lessThan(L, a, b)
}

// lessThan is Lua 5.1's a < b (luaV_lessthan), its errors raised from a
// library function (no position).
func (v *vm) lessThan(L *lua.LState, a, b lua.LValue) bool {
	switch x := a.(type) {
	case lua.LNumber:
		if y, ok := b.(lua.LNumber); ok {
			return x < y
		}
	case lua.LString:
		if y, ok := b.(lua.LString); ok {
			return x < y
		}
	}
	if a.Type() == b.Type() {
		ma, mb := v.metaField(a, "__lt"), v.metaField(b, "__lt")
		if ma != lua.LNil && L.RawEqual(ma, mb) {
			L.Push(ma)
			L.Push(a)
			L.Push(b)
			L.Call(2, 1)
			r := lua.LVAsBool(L.Get(-1))
			L.Pop(1)
			return r
		}
		L.Error(lua.LString("attempt to compare two "+a.Type().String()+" values"), 0)
	}
	L.Error(lua.LString("attempt to compare "+a.Type().String()+" with "+b.Type().String()), 0)
	return false
}

func (v *vm) metaField(lv lua.LValue, name string) lua.LValue {
	var mt lua.LValue = lua.LNil
	switch x := lv.(type) {
	case *lua.LTable:
		mt = x.Metatable
	case *lua.LUserData:
		mt = x.Metatable
	}
	if m, ok := mt.(*lua.LTable); ok {
		return m.RawGetString(name)
	}
	return lua.LNil
}

func (s *sorter) sort(l, u int) {
	for l < u {
		// Order a[l], a[(l+u)/2], a[u].
		if al, au := s.get(l), s.get(u); s.less(au, al) {
			s.set(l, au)
			s.set(u, al)
		}
		if u-l == 1 {
			return
		}
		i := (l + u) / 2
		if ai, al := s.get(i), s.get(l); s.less(ai, al) {
			s.set(i, al)
			s.set(l, ai)
		} else if au := s.get(u); s.less(au, ai) {
			s.set(i, au)
			s.set(u, ai)
		}
		if u-l == 2 {
			return
		}
		p := s.get(i)
		s.set(i, s.get(u-1))
		s.set(u-1, p)
		i, j := l, u-1
		for {
			i++
			for s.less(s.get(i), p) {
				if i > u {
					luaError(s.L, "invalid order function for sorting")
				}
				i++
			}
			j--
			for s.less(p, s.get(j)) {
				if j < l {
					luaError(s.L, "invalid order function for sorting")
				}
				j--
			}
			if j < i {
				break
			}
			ai, aj := s.get(i), s.get(j)
			s.set(i, aj)
			s.set(j, ai)
		}
		au1, ai := s.get(u-1), s.get(i)
		s.set(u-1, ai)
		s.set(i, au1)
		if i-l < u-i {
			j, i, l = l, i-1, i+1
		} else {
			j, i, u = i+1, u, i-1
		}
		s.sort(j, i)
	}
}
