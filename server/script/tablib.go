package script

import (
	lua "github.com/yuin/gopher-lua"
)

// The table library as Lua 5.1's, with the functions gopher-lua lacks
// (foreach, foreachi, setn), numbers joined as %.14g, and writes to
// read-only tables refused.

func (v *vm) installTable() {
	L := v.L
	t := v.globals.RawGetString("table").(*lua.LTable)
	set := func(name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }
	getn := func(L *lua.LState, n int) (*lua.LTable, int) {
		tb := checkTable(L, n)
		b, _ := v.backing(tb)
		return tb, b.Len()
	}
	set("getn", func(L *lua.LState) int {
		_, n := getn(L, 1)
		L.Push(num(n))
		return 1
	})
	set("setn", func(L *lua.LState) int {
		checkTable(L, 1)
		luaError(L, "'setn' is obsolete")
		return 0
	})
	set("maxn", func(L *lua.LState) int {
		tb := checkTable(L, 1)
		b, _ := v.backing(tb)
		max := 0.0
		b.ForEach(func(k, _ lua.LValue) {
			if n, ok := k.(lua.LNumber); ok && float64(n) > max {
				max = float64(n)
			}
		})
		L.Push(num(max))
		return 1
	})
	set("insert", func(L *lua.LState) int {
		tb, e := getn(L, 1)
		e++
		var pos int
		switch L.GetTop() {
		case 2:
			pos = e
		case 3:
			pos = int(checkInt(L, 2))
			if pos > e {
				e = pos
			}
			if _, ro := v.back[tb]; ro {
				if e > pos {
					L.Error(lua.LString("Attempt to modify a readonly table"), 0)
				}
			} else {
				for i := e; i > pos; i-- {
					tb.RawSetInt(i, tb.RawGetInt(i-1))
				}
			}
		default:
			luaError(L, "wrong number of arguments to 'insert'")
		}
		if _, ro := v.back[tb]; ro {
			L.Error(lua.LString("Attempt to modify a readonly table"), 0)
		}
		tb.RawSetInt(pos, L.Get(L.GetTop()))
		return 0
	})
	set("remove", func(L *lua.LState) int {
		tb, e := getn(L, 1)
		pos := int(optInt(L, 2, int32(e)))
		if e == 0 {
			return 0
		}
		if _, ro := v.back[tb]; ro {
			L.Error(lua.LString("Attempt to modify a readonly table"), 0)
		}
		L.Push(tb.RawGetInt(pos))
		for ; pos < e; pos++ {
			tb.RawSetInt(pos, tb.RawGetInt(pos+1))
		}
		tb.RawSetInt(e, lua.LNil)
		return 1
	})
	set("concat", func(L *lua.LState) int {
		sep := optString(L, 2, "")
		tb, n := getn(L, 1)
		b, _ := v.backing(tb)
		i := int(optInt(L, 3, 1))
		last := n
		if L.Get(4) != lua.LNil {
			last = int(checkInt(L, 4))
		}
		var out []byte
		for ; i <= last; i++ {
			switch x := b.RawGetInt(i).(type) {
			case lua.LString:
				out = append(out, x...)
			case lua.LNumber:
				out = append(out, luaNumberString(float64(x))...)
			default:
				luaError(L, "invalid value (%s) at index %d in table for 'concat'", x.Type().String(), i)
			}
			if i != last {
				out = append(out, sep...)
			}
			if len(out) > chargeCheck && !v.charge(int64(len(out))) {
				v.noMemory()
			}
		}
		L.Push(lua.LString(out))
		return 1
	})
	set("foreach", func(L *lua.LState) int {
		tb := checkTable(L, 1)
		fn := L.Get(2)
		if fn.Type() != lua.LTFunction {
			typeError(L, 2, "function")
		}
		b, _ := v.backing(tb)
		k := lua.LValue(lua.LNil)
		for {
			var val lua.LValue
			k, val = b.Next(k)
			if k == lua.LNil {
				return 0
			}
			L.Push(fn)
			L.Push(k)
			L.Push(val)
			L.Call(2, 1)
			if r := L.Get(-1); r != lua.LNil {
				return 1
			}
			L.Pop(1)
		}
	})
	set("foreachi", func(L *lua.LState) int {
		tb, n := getn(L, 1)
		fn := L.Get(2)
		if fn.Type() != lua.LTFunction {
			typeError(L, 2, "function")
		}
		b, _ := v.backing(tb)
		for i := 1; i <= n; i++ {
			L.Push(fn)
			L.Push(num(i))
			L.Push(b.RawGetInt(i))
			L.Call(2, 1)
			if r := L.Get(-1); r != lua.LNil {
				return 1
			}
			L.Pop(1)
		}
		return 0
	})
	set("sort", v.sortTable)
}

func (v *vm) installMath() {
	L := v.L
	t := v.globals.RawGetString("math").(*lua.LTable)
	v.installMathFuncs(t)
	set := func(name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }
	// math.random and math.randomseed are Redis's: the Engine's rand48.
	set("random", func(L *lua.LState) int {
		r := float64(v.rand.next()%rand48Max) / float64(rand48Max)
		switch L.GetTop() {
		case 0:
			L.Push(num(r))
		case 1:
			u := checkInt(L, 1)
			if u < 1 {
				argError(L, 1, "interval is empty")
			}
			L.Push(num(floor(r*float64(u)) + 1))
		case 2:
			l := checkInt(L, 1)
			u := checkInt(L, 2)
			if l > u {
				argError(L, 2, "interval is empty")
			}
			L.Push(num(floor(r*(float64(u)-float64(l)+1)) + float64(l)))
		default:
			luaError(L, "wrong number of arguments")
		}
		return 1
	})
	set("randomseed", func(L *lua.LState) int {
		v.rand.seed(checkInt(L, 1))
		return 0
	})
}

func floor(f float64) float64 {
	i := float64(int64(f))
	if i > f {
		i--
	}
	return i
}

// installCoroutine keeps gopher-lua's coroutines, but a new coroutine
// must check the run's context as the main thread does, rather than get
// a child context of it (which costs a goroutine).
func (v *vm) installCoroutine() {
	L := v.L
	t := v.globals.RawGetString("coroutine").(*lua.LTable)
	for _, name := range []string{"create", "wrap"} {
		fn := t.RawGetString(name).(*lua.LFunction).GFunction
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			if L.Get(1).Type() != lua.LTFunction {
				typeError(L, 1, "function")
			}
			if !v.charge(coroutineCost) {
				v.noMemory()
			}
			ctx := L.RemoveContext()
			n := fn(L)
			if ctx != nil {
				L.SetContext(ctx)
				switch th := L.Get(-1).(type) {
				case *lua.LState:
					th.SetContext(ctx)
				case *lua.LFunction:
					// wrap's closure holds its thread as an upvalue.
					for _, up := range th.Upvalues {
						if th2, ok := up.Value().(*lua.LState); ok {
							th2.SetContext(ctx)
						}
					}
				}
			}
			return n
		}))
	}
}

// coroutineCost is what a coroutine's own stacks cost, charged to the
// memory bound.
const coroutineCost = 64 << 10
