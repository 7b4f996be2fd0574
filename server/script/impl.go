package script

// A minimal interpreter, enough for the server's integration: to be
// replaced by the full Redis 7 environment.

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/sluicehq/sluice/engine"
)

type compiled struct {
	body  []byte
	proto *lua.FunctionProto
}

type engineImpl struct {
	mu    sync.RWMutex
	cache map[string]*compiled
	pool  sync.Pool
}

func newEngineImpl(Config) *engineImpl {
	e := &engineImpl{cache: map[string]*compiled{}}
	e.pool.New = func() any { return lua.NewState(lua.Options{SkipOpenLibs: false}) }
	return e
}

func shaOf(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

func (e *engineImpl) load(body []byte) (string, error) {
	sha := shaOf(body)
	e.mu.RLock()
	_, ok := e.cache[sha]
	e.mu.RUnlock()
	if ok {
		return sha, nil
	}
	chunk, err := parse.Parse(bytes.NewReader(body), "@user_script")
	if err != nil {
		return "", errors.New("Error compiling script (new function): " + err.Error())
	}
	proto, err := lua.Compile(chunk, "@user_script")
	if err != nil {
		return "", errors.New("Error compiling script (new function): " + err.Error())
	}
	e.mu.Lock()
	e.cache[sha] = &compiled{body: append([]byte(nil), body...), proto: proto}
	e.mu.Unlock()
	return sha, nil
}

func (e *engineImpl) body(sha string) ([]byte, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	c, ok := e.cache[strings.ToLower(sha)]
	if !ok {
		return nil, false
	}
	return c.body, true
}

func (e *engineImpl) flush() {
	e.mu.Lock()
	e.cache = map[string]*compiled{}
	e.mu.Unlock()
}

func parseFlags(body []byte) (Flags, error) {
	if !bytes.HasPrefix(body, []byte("#!")) {
		return Flags{}, nil
	}
	return Flags{Shebang: true}, nil
}

func (e *engineImpl) run(ctx context.Context, body []byte, keys, args [][]byte, host Host) engine.Reply {
	sha, err := e.load(body)
	if err != nil {
		return engine.Reply{Kind: engine.ReplyError, Err: err}
	}
	e.mu.RLock()
	c := e.cache[sha]
	e.mu.RUnlock()
	L := e.pool.Get().(*lua.LState)
	defer e.pool.Put(L)
	L.SetContext(ctx)
	defer L.RemoveContext()
	L.SetGlobal("KEYS", strTable(L, keys))
	L.SetGlobal("ARGV", strTable(L, args))
	redis := L.NewTable()
	call := func(raise bool) lua.LGFunction {
		return func(L *lua.LState) int {
			n := L.GetTop()
			cmd := make([][]byte, n)
			for i := 1; i <= n; i++ {
				cmd[i-1] = []byte(L.CheckAny(i).String())
			}
			r := host.Call(cmd)
			if r.Kind == engine.ReplyError && raise {
				L.RaiseError("%s", r.Err.Error())
				return 0
			}
			L.Push(toLua(L, &r))
			return 1
		}
	}
	redis.RawSetString("call", L.NewFunction(call(true)))
	redis.RawSetString("pcall", L.NewFunction(call(false)))
	L.SetGlobal("redis", redis)
	L.Push(L.NewFunctionFromProto(c.proto))
	if err := L.PCall(0, 1, nil); err != nil {
		return engine.Reply{Kind: engine.ReplyError, Err: errors.New(err.Error())}
	}
	ret := L.Get(-1)
	L.Pop(1)
	return fromLua(ret)
}

func strTable(L *lua.LState, items [][]byte) *lua.LTable {
	t := L.CreateTable(len(items), 0)
	for i, it := range items {
		t.RawSetInt(i+1, lua.LString(it))
	}
	return t
}

func toLua(L *lua.LState, r *engine.Reply) lua.LValue {
	switch r.Kind {
	case engine.ReplyInt:
		return lua.LNumber(r.Int)
	case engine.ReplyBulk:
		if r.Bulk != nil {
			return lua.LString(r.Bulk)
		}
		return lua.LString(r.Str)
	case engine.ReplyOK:
		t := L.NewTable()
		t.RawSetString("ok", lua.LString("OK"))
		return t
	case engine.ReplyStatus:
		t := L.NewTable()
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case engine.ReplyArray, engine.ReplyMap, engine.ReplySet, engine.ReplyPairs:
		t := L.CreateTable(len(r.Items), 0)
		for i := range r.Items {
			t.RawSetInt(i+1, toLua(L, &r.Items[i]))
		}
		return t
	case engine.ReplyError:
		t := L.NewTable()
		t.RawSetString("err", lua.LString(r.Err.Error()))
		return t
	}
	return lua.LFalse
}

func fromLua(v lua.LValue) engine.Reply {
	switch v := v.(type) {
	case lua.LNumber:
		return engine.Reply{Kind: engine.ReplyInt, Int: int64(v)}
	case lua.LString:
		return engine.Reply{Kind: engine.ReplyBulk, Bulk: []byte(v)}
	case lua.LBool:
		if v {
			return engine.Reply{Kind: engine.ReplyInt, Int: 1}
		}
		return engine.Reply{Kind: engine.ReplyNil}
	case *lua.LTable:
		if ok := v.RawGetString("ok"); ok != lua.LNil {
			return engine.Reply{Kind: engine.ReplyStatus, Str: ok.String()}
		}
		if e := v.RawGetString("err"); e != lua.LNil {
			return engine.Reply{Kind: engine.ReplyError, Err: errors.New(e.String())}
		}
		var items []engine.Reply
		for i := 1; ; i++ {
			x := v.RawGetInt(i)
			if x == lua.LNil {
				break
			}
			items = append(items, fromLua(x))
		}
		return engine.Reply{Kind: engine.ReplyArray, Items: items}
	}
	return engine.Reply{Kind: engine.ReplyNil}
}

var _ = strconv.Itoa
