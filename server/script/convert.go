package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicehq/sluice/engine"
)

// Conversions between replies and Lua values, as Redis 7.0's
// redisProtocolToLuaType (a command's reply inside the script, in the
// protocol redis.setresp chose) and luaReplyToRedisReply (the script's
// result).

// toLua converts a command's reply for the script.
func (v *vm) toLua(L *lua.LState, r *engine.Reply) lua.LValue {
	switch r.Kind {
	case engine.ReplyInt:
		return num(float64(r.Int))
	case engine.ReplyBulk:
		if r.Bulk != nil {
			return lua.LString(r.Bulk)
		}
		return lua.LString(r.Str)
	case engine.ReplyNil, engine.ReplyNilArray:
		// RESP2's nil bulk and nil array are false; RESP3's null is nil.
		if v.resp == 3 {
			return lua.LNil
		}
		return lua.LFalse
	case engine.ReplyOK:
		return statusTable(L, "OK")
	case engine.ReplyStatus:
		return statusTable(L, r.Str)
	case engine.ReplyError:
		return errorTable(L, r.Err.Error(), true)
	case engine.ReplyArray:
		return v.arrayTable(L, r.Items)
	case engine.ReplyMap:
		if v.resp != 3 {
			return v.arrayTable(L, r.Items)
		}
		m := L.CreateTable(0, len(r.Items)/2)
		for i := 0; i+1 < len(r.Items); i += 2 {
			k := v.toLua(L, &r.Items[i])
			if k == lua.LNil {
				continue
			}
			m.RawSet(k, v.toLua(L, &r.Items[i+1]))
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("map", m)
		return t
	case engine.ReplySet:
		if v.resp != 3 {
			return v.arrayTable(L, r.Items)
		}
		s := L.CreateTable(0, len(r.Items))
		for i := range r.Items {
			if k := v.toLua(L, &r.Items[i]); k != lua.LNil {
				s.RawSet(k, lua.LTrue)
			}
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("set", s)
		return t
	case engine.ReplyDouble:
		if v.resp != 3 {
			return lua.LString(formatG(r.Float, 17))
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("double", lua.LNumber(r.Float))
		return t
	case engine.ReplyPairs:
		if v.resp != 3 {
			return v.arrayTable(L, r.Items)
		}
		t := L.CreateTable(len(r.Items)/2, 0)
		for i := 0; i+1 < len(r.Items); i += 2 {
			t.RawSetInt(i/2+1, v.arrayTable(L, r.Items[i:i+2]))
		}
		return t
	case engine.ReplyReservation:
		v := engine.ReservationFields(r)
		t := L.CreateTable(len(v), 0)
		for i, n := range v {
			t.RawSetInt(i+1, lua.LNumber(n))
		}
		return t
	case engine.ReplyDecision:
		d := &r.Dec
		round := engine.SecondsRoundedUp
		if r.MS {
			round = engine.MillisRoundedUp
		}
		limited := 0
		if d.Limited {
			limited = 1
		}
		t := L.CreateTable(5, 0)
		t.RawSetInt(1, lua.LNumber(limited))
		t.RawSetInt(2, lua.LNumber(d.Limit))
		t.RawSetInt(3, lua.LNumber(d.Remaining))
		t.RawSetInt(4, lua.LNumber(round(d.RetryAfter)))
		t.RawSetInt(5, lua.LNumber(round(d.ResetAfter)))
		return t
	}
	return lua.LFalse
}

func (v *vm) arrayTable(L *lua.LState, items []engine.Reply) *lua.LTable {
	t := L.CreateTable(len(items), 0)
	for i := range items {
		t.RawSetInt(i+1, v.toLua(L, &items[i]))
	}
	return t
}

func statusTable(L *lua.LState, s string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("ok", lua.LString(s))
	return t
}

// stackLimit is LUAI_MAXCSTACK, which luaReplyToRedisReply's
// lua_checkstack(4) meets in deeply nested (or self-containing) tables.
const stackLimit = maxCStack

// fromLua converts the script's result; stack is how many values
// luaReplyToRedisReply would have on the Lua stack, lv included.
func (v *vm) fromLua(lv lua.LValue, stack int) engine.Reply {
	if stack+4 > stackLimit {
		return engine.Reply{Kind: engine.ReplyError, Err: engine.RawError("ERR reached lua stack limit")}
	}
	switch x := lv.(type) {
	case lua.LString:
		return engine.Reply{Kind: engine.ReplyBulk, Str: string(x)}
	case lua.LBool:
		if v.resp == 3 {
			// A boolean reply: #t/#f in RESP3, :1/:0 in RESP2.
			if x {
				return engine.Reply{Kind: engine.ReplyBool, Int: 1}
			}
			return engine.Reply{Kind: engine.ReplyBool, Int: 0}
		}
		if x {
			return engine.Reply{Kind: engine.ReplyInt, Int: 1}
		}
		return engine.Reply{Kind: engine.ReplyNil}
	case lua.LNumber:
		return engine.Reply{Kind: engine.ReplyInt, Int: luaToInteger(float64(x))}
	case *lua.LTable:
		return v.tableReply(x, stack)
	}
	return engine.Reply{Kind: engine.ReplyNil}
}

func (v *vm) tableReply(t *lua.LTable, stack int) engine.Reply {
	b, _ := v.backing(t)
	if ro := b != t; ro {
		// A protected table's fields read as nothing (rawget on the
		// proxy): an empty array, as Redis answers for a library table.
		return engine.Reply{Kind: engine.ReplyArray, Items: []engine.Reply{}}
	}
	if e, ok := t.RawGetString("err").(lua.LString); ok {
		return tableError(t, cutNUL(string(e)))
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		return engine.Reply{Kind: engine.ReplyStatus, Str: noCRLF(cutNUL(string(s)))}
	}
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		return engine.Reply{Kind: engine.ReplyDouble, Float: float64(d)}
	}
	if n, ok := t.RawGetString("big_number").(lua.LString); ok {
		// A big number: "(" in RESP3, a bulk string in RESP2.
		return engine.Reply{Kind: engine.ReplyBigNumber, Str: noCRLF(string(n))}
	}
	if vs, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		if _, ok := vs.RawGetString("format").(lua.LString); ok {
			if s, ok := vs.RawGetString("string").(lua.LString); ok {
				// A verbatim string: its text in RESP2 (no kind for
				// RESP3's "=").
				return engine.Reply{Kind: engine.ReplyBulk, Str: string(s)}
			}
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		var items []engine.Reply
		k := lua.LValue(lua.LNil)
		for {
			var val lua.LValue
			k, val = m.Next(k)
			if k == lua.LNil {
				break
			}
			items = append(items, v.fromLua(k, stack+4), v.fromLua(val, stack+3))
		}
		return engine.Reply{Kind: engine.ReplyMap, Items: items}
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		var items []engine.Reply
		k := lua.LValue(lua.LNil)
		for {
			k, _ = s.Next(k)
			if k == lua.LNil {
				break
			}
			items = append(items, v.fromLua(k, stack+3))
		}
		return engine.Reply{Kind: engine.ReplySet, Items: items}
	}
	n := 0
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	items := make([]engine.Reply, n)
	for i := range items {
		items[i] = v.fromLua(t.RawGetInt(i+1), stack+1)
	}
	return engine.Reply{Kind: engine.ReplyArray, Items: items}
}

func noCRLF(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		return newlines.Replace(s)
	}
	return s
}
