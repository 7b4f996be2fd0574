package script

import (
	"errors"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicehq/sluice/engine"
)

// Errors, as Redis 7.0 forms them.
//
// Inside a script an error raised by the redis library is a table
// {err="CODE message"} (luaPushError); any other error value is what Lua
// raised. When the script fails, Redis's error handler
// (__redis__err__handler, run where the error was raised) turns a
// non-table into {err="ERR " .. tostring(value)} and adds the source and
// line of the function that raised it (or of its caller when that is a C
// function); the reply is then "<err> script: <sha>, on <source>:<line>."
// with every CR and LF a space.

var (
	errKilled   = errors.New("Script killed by user with SCRIPT KILL...")
	errNoMemory = errors.New("not enough memory")
	// errStackOverflow is raised as a Lua error (catchable, with its
	// position), not a halt.
	errStackOverflow = errors.New("stack overflow")
)

// errorInfo is what the handler saw where the error was raised.
type errorInfo struct {
	value  lua.LValue // the handler's result
	hasPos bool
	source string
	line   int
}

// position is getinfo(2) from the handler, or getinfo(3) when the
// function that raised the error is a Go (C) function.
func position(L *lua.LState, level int) (source string, line int, ok bool) {
	dbg, ok := L.GetStack(level)
	if !ok {
		return "", 0, false
	}
	fn, _ := L.GetInfo("Slf", dbg, lua.LNil)
	if f, isFn := fn.(*lua.LFunction); isFn && f.IsG {
		if dbg, ok = L.GetStack(level + 1); !ok {
			return "", 0, false
		}
		L.GetInfo("Sl", dbg, lua.LNil)
	}
	return "@" + dbg.Source, dbg.CurrentLine, true
}

// handle does what __redis__err__handler does to err, with level the
// stack level of the function that raised it.
func (v *vm) handle(L *lua.LState, err lua.LValue, level int) lua.LValue {
	if t, ok := err.(*lua.LTable); ok {
		if _, ro := v.back[t]; ro {
			// err['source'] = ... fails on a read-only table and the
			// handler handles its own error.
			e := L.NewTable()
			e.RawSetString("err", lua.LString("ERR err_handler_def:10: Attempt to modify a readonly table"))
			e.RawSetString("source", lua.LString("@err_handler_def"))
			e.RawSetString("line", lua.LNumber(10))
			return e
		}
	} else {
		t := L.CreateTable(0, 3)
		t.RawSetString("err", lua.LString("ERR "+v.tostring(L, err)))
		err = t
	}
	t := err.(*lua.LTable)
	if source, line, ok := position(L, level); ok {
		L.SetField(t, "source", lua.LString(source))
		L.SetField(t, "line", lua.LNumber(line))
	}
	return t
}

// errHandler is the run's error handler (PCall's): it records what the
// reply needs.
func (v *vm) errHandler(L *lua.LState) int {
	err := nameError(L, fixError(L.Get(1)), 1)
	v.errInfo = errorInfo{value: err}
	if source, line, ok := position(L, 1); ok {
		v.errInfo.hasPos, v.errInfo.source, v.errInfo.line = true, source, line
	}
	L.Push(err)
	return 1
}

// errHandlerGlobal is __redis__err__handler as scripts can call it.
func (v *vm) errHandlerGlobal(L *lua.LState) int {
	level := 1
	// Called by xpcall's wrapper: the error was raised below it.
	if dbg, ok := L.GetStack(1); ok {
		if fn, _ := L.GetInfo("f", dbg, lua.LNil); fn == v.xwrap {
			level = 2
		}
	}
	L.Push(v.handle(L, L.Get(1), level))
	return 1
}

// errorReply turns the error a run ended with into its reply.
func (v *vm) errorReply(L *lua.LState) engine.Reply {
	info := v.errInfo
	if info.value == nil {
		// The handler could not run (a Go panic inside the interpreter).
		info.value = lua.LString("internal error")
	}
	if v.ctx.stop == errNoMemory {
		// Lua's out-of-memory error skips the handler: Redis answers
		// "Error running script <sha>, not enough memory".
		return rawError("ERR Error running script " + v.sha + ", not enough memory")
	}
	var msg string
	switch {
	case v.ctx.stop == errKilled:
		msg = "ERR " + errKilled.Error()
	default:
		t, isTable := info.value.(*lua.LTable)
		if isTable {
			if _, ro := v.back[t]; ro {
				return rawError("ERR err_handler_def:10: Attempt to modify a readonly table script: " + v.sha + ", on @err_handler_def:10.")
			}
			switch e := t.RawGetString("err").(type) {
			case lua.LString:
				msg = string(e)
			case lua.LNumber:
				msg = luaNumberString(float64(e))
			default:
				// Redis 7.0 crashes on an error table without a string
				// err (sdscatfmt of NULL); answer something sound.
				msg = "ERR unknown error"
			}
		} else {
			msg = "ERR " + v.tostring(L, info.value)
		}
	}
	msg = cutNUL(msg)
	if info.hasPos {
		msg += " script: " + v.sha + ", on " + info.source + ":" + strconv.Itoa(info.line) + "."
	}
	if t, ok := info.value.(*lua.LTable); ok && v.ctx.stop != errKilled {
		return tableError(t, msg)
	}
	return rawError(msg)
}

var newlines = strings.NewReplacer("\r", " ", "\n", " ")

// rawError is an error reply of a whole line, with no CR or LF in it.
func rawError(line string) engine.Reply {
	if strings.ContainsAny(line, "\r\n") {
		line = newlines.Replace(line)
	}
	return engine.Reply{Kind: engine.ReplyError, Err: engine.RawError(line)}
}

// CommandError is a script's error reply that passes on the error of one
// of its commands: errorstats counted it when the command failed, so the
// reply does not count it again (Redis's ignore_error_stats_update).
type CommandError struct{ engine.RawError }

func (e CommandError) Unwrap() error { return e.RawError }

// tableError is the reply of an error table: a CommandError when the
// table came from a command (its ignore_error_stats_update field, which a
// script may also clear or set).
func tableError(t *lua.LTable, line string) engine.Reply {
	r := rawError(line)
	if t.RawGetString("ignore_error_stats_update") == lua.LTrue {
		r.Err = CommandError{r.Err.(engine.RawError)}
	}
	return r
}

// errorTable is luaPushErrorBuff: an error reply's line as Lua sees it,
// {err="CODE message"}: the code is the line's first word (ERR when it
// has none) and the message loses its leading and trailing CR and LF.
func errorTable(L *lua.LState, line string, fromCommand bool) *lua.LTable {
	line = cutNUL(line)
	code, msg, ok := strings.Cut(line, " ")
	if !ok {
		code, msg = "ERR", line
	}
	msg = strings.Trim(msg, "\r\n")
	t := L.CreateTable(0, 2)
	t.RawSetString("err", lua.LString(code+" "+msg))
	if fromCommand {
		t.RawSetString("ignore_error_stats_update", lua.LTrue)
	}
	return t
}
