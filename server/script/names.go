package script

import (
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1 names the culprit of a runtime error when it can: "attempt to
// call global 'f' (a nil value)", "attempt to index local 't' (a nil
// value)". gopher-lua's messages do not, so, where an error is raised
// (the handlers run with the stack intact), the faulting instruction is
// read and the register it used traced back to the local, global, field,
// method or upvalue it was loaded from, as Lua's getobjname does.

// framePC is the index of the instruction the frame at dbg is executing.
// gopher-lua keeps it in the frame, which its Debug does not export; it
// is read (never written) through reflection.
func framePC(dbg *lua.Debug) (int, bool) {
	f := reflect.ValueOf(dbg).Elem().FieldByName("frame")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return 0, false
	}
	pc := f.Elem().FieldByName("Pc")
	if !pc.IsValid() || pc.Kind() != reflect.Int {
		return 0, false
	}
	return int(pc.Int()) - 1, true
}

// frameIndex is the frame's depth in its thread's call stack (tail
// calls reuse a frame), read like framePC.
func frameIndex(dbg *lua.Debug) (int, bool) {
	f := reflect.ValueOf(dbg).Elem().FieldByName("frame")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.IsNil() {
		return 0, false
	}
	idx := f.Elem().FieldByName("Idx")
	if !idx.IsValid() || idx.Kind() != reflect.Int {
		return 0, false
	}
	return int(idx.Int()), true
}

func instOp(i uint32) int { return int(i >> 26) }
func instA(i uint32) int  { return int(i>>18) & 0xff }
func instB(i uint32) int  { return int(i & 0x1ff) }
func instC(i uint32) int  { return int(i>>9) & 0x1ff }
func instBx(i uint32) int { return int(i & 0x3ffff) }

const rkBit = 1 << 8

// objName is getobjname: how register reg got its value at pc.
func objName(fn *lua.LFunction, pc, reg int) (kind, name string) {
	if n, ok := localName(fn.Proto, reg, pc); ok {
		if kind, name, ok := hoistedName(n); ok {
			return kind, name
		}
		if strings.HasPrefix(n, "\x00") || strings.HasPrefix(n, "(") {
			return "", ""
		}
		return "local", n
	}
	p := fn.Proto
	constString := func(rk int) (string, bool) {
		if rk&rkBit == 0 || rk&^rkBit >= len(p.Constants) {
			return "", false
		}
		s, ok := p.Constants[rk&^rkBit].(lua.LString)
		return string(s), ok
	}
	for i := pc - 1; i >= 0; i-- {
		in := p.Code[i]
		a := instA(in)
		switch op := instOp(in); op {
		case lua.OP_GETGLOBAL:
			if a == reg {
				if bx := instBx(in); bx < len(p.Constants) {
					return "global", p.Constants[bx].String()
				}
				return "", ""
			}
		case lua.OP_GETTABLE, lua.OP_GETTABLEKS:
			if a == reg {
				if k, ok := constString(instC(in)); ok {
					return "field", k
				}
				return "field", "?"
			}
		case lua.OP_SELF:
			if a == reg {
				if k, ok := constString(instC(in)); ok {
					return "method", k
				}
				return "", ""
			}
			if a+1 == reg {
				return "", ""
			}
		case lua.OP_GETUPVAL:
			if a == reg {
				if b := instB(in); b < len(p.DbgUpvalues) {
					if kind, name, ok := hoistedName(p.DbgUpvalues[b]); ok {
						return kind, name
					}
					if !strings.HasPrefix(p.DbgUpvalues[b], "\x00") {
						return "upvalue", p.DbgUpvalues[b]
					}
				}
				return "", ""
			}
		case lua.OP_MOVE, lua.OP_MOVEN:
			if a == reg {
				if b := instB(in); b < a {
					return objName(fn, i, b)
				}
				return "", ""
			}
		case lua.OP_LOADNIL:
			if reg >= a && reg <= instB(in) {
				return "", ""
			}
		case lua.OP_CALL, lua.OP_VARARG, lua.OP_TFORLOOP:
			if reg >= a {
				return "", ""
			}
		case lua.OP_SETGLOBAL, lua.OP_SETUPVAL, lua.OP_SETTABLE, lua.OP_SETTABLEKS, lua.OP_JMP,
			lua.OP_EQ, lua.OP_LT, lua.OP_LE, lua.OP_TEST, lua.OP_TAILCALL, lua.OP_RETURN,
			lua.OP_SETLIST, lua.OP_CLOSE, lua.OP_NOP:
		default:
			if a == reg {
				return "", ""
			}
		}
	}
	return "", ""
}

// localName is the local in register reg at pc, if any (Lua's
// luaF_getlocalname: the locals active at pc, in order of their
// registers).
func localName(p *lua.FunctionProto, reg, pc int) (string, bool) {
	n := reg
	for _, l := range p.DbgLocals {
		if l.StartPc > pc {
			break
		}
		if pc < l.EndPc {
			if n == 0 {
				return l.Name, true
			}
			n--
		}
	}
	return "", false
}

// nameError rewrites a gopher-lua runtime error raised by the Lua
// function at stack level as Lua 5.1 words it, with the culprit's name
// and type.
func nameError(L *lua.LState, err lua.LValue, level int) lua.LValue {
	s, ok := err.(lua.LString)
	if !ok {
		return err
	}
	dbg, ok := L.GetStack(level)
	if !ok {
		return err
	}
	fv, _ := L.GetInfo("f", dbg, lua.LNil)
	fn, ok := fv.(*lua.LFunction)
	if !ok || fn.IsG {
		return err
	}
	pc, ok := framePC(dbg)
	if !ok || pc < 0 || pc >= len(fn.Proto.Code) {
		return err
	}
	msg := string(s)
	in := fn.Proto.Code[pc]
	regValue := func(r int) lua.LValue {
		_, v := L.GetLocal(dbg, r+1)
		return v
	}
	rkValue := func(rk int) (lua.LValue, bool) {
		if rk&rkBit != 0 {
			if k := rk &^ rkBit; k < len(fn.Proto.Constants) {
				return fn.Proto.Constants[k], true
			}
			return lua.LNil, true
		}
		return regValue(rk), false
	}
	var verb string
	var culprit lua.LValue
	reg, isConst := -1, false
	switch op := instOp(in); {
	case (op == lua.OP_CALL || op == lua.OP_TAILCALL) && strings.HasSuffix(msg, "attempt to call a nil value"):
		verb, reg = "call", instA(in)
		culprit = regValue(reg)
	case (op == lua.OP_GETTABLE || op == lua.OP_GETTABLEKS || op == lua.OP_SELF) && strings.Contains(msg, "attempt to index a "):
		verb, reg = "index", instB(in)
		culprit = regValue(reg)
	case (op == lua.OP_SETTABLE || op == lua.OP_SETTABLEKS) && strings.Contains(msg, "attempt to index a "):
		verb, reg = "index", instA(in)
		culprit = regValue(reg)
	case op >= lua.OP_ADD && op <= lua.OP_POW && strings.Contains(msg, "attempt to perform arithmetic on a "):
		verb = "perform arithmetic on"
		b, bk := rkValue(instB(in))
		if _, isNum := toNumber(b); !isNum {
			culprit, isConst, reg = b, bk, instB(in)
		} else {
			c, ck := rkValue(instC(in))
			culprit, isConst, reg = c, ck, instC(in)
		}
	case op == lua.OP_UNM && strings.Contains(msg, "attempt to perform arithmetic on a "):
		verb, reg = "perform arithmetic on", instB(in)
		culprit = regValue(reg)
	case op == lua.OP_LEN && strings.Contains(msg, "attempt to get length of a "):
		verb, reg = "get length of", instB(in)
		culprit = regValue(reg)
	default:
		return err
	}
	prefix := ""
	if i := strings.Index(msg, "attempt to "); i >= 0 {
		prefix = msg[:i]
	}
	typ := culprit.Type().String()
	if !isConst && reg >= 0 {
		if kind, name := objName(fn, pc, reg); kind != "" {
			return lua.LString(prefix + "attempt to " + verb + " " + kind + " '" + name + "' (a " + typ + " value)")
		}
	}
	return lua.LString(prefix + "attempt to " + verb + " a " + typ + " value")
}
