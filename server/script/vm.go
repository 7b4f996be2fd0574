package script

import (
	"context"
	"math"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/sluicehq/sluice/server/script/lualib"
)

// A vm is one interpreter with Redis 7's environment, built once and
// reused by run after run (the Engine pools them). Between runs nothing a
// script did survives: every table reachable from the globals is
// read-only, as Redis 7 makes them, so the only state a script can change
// is its own (KEYS and ARGV are new tables on every run).
//
// gopher-lua has no read-only tables, so a protected table is an empty
// proxy whose metatable reads through to the real table (__index) and
// refuses writes (__newindex); the few functions that reach into a table
// without metamethods (rawset, rawget, next, pairs, getmetatable,
// setmetatable, table.insert...) are replaced by versions that know the
// proxies.
type vm struct {
	L   *lua.LState
	eng *engineImpl
	// rand is math.random's sequence for the run: the Engine's, or for a
	// Deterministic host one restarted from the seed.
	rand  *rand48
	fresh rand48

	globals *lua.LTable // the real globals: KEYS and ARGV are set here
	env     *lua.LTable // the globals' proxy: scripts' _G and environment

	// back maps a proxy to the table it protects; meta maps it to the
	// metatable getmetatable shows (the real table's, protected).
	back map[*lua.LTable]*lua.LTable
	meta map[*lua.LTable]*lua.LTable
	// roIndex is every proxy's metatable's __newindex.
	roIndex *lua.LFunction

	// strMeta is what getmetatable("") shows: the strings' metatable,
	// protected.
	strMeta *lua.LTable
	handler *lua.LFunction // the run's error handler
	namer   *lua.LFunction // pcall's: names the culprit of a runtime error
	// xwrap is xpcall's handler, calling the script's (xhandlers' last).
	xwrap     *lua.LFunction
	xhandlers []lua.LValue
	// recycle is false once the interpreter must not be reused (a Go
	// panic inside it, a library setting changed).
	recycle bool

	ctx vmContext

	// The last script's main function, kept for its next run.
	lastProto *lua.FunctionProto
	lastFn    *lua.LFunction

	// The current run.
	host    Host
	sha     string
	resp    int // redis.setresp: the protocol of redis.call's replies
	argBuf  [][]byte
	argEnds []int
	byteBuf []byte
	errInfo errorInfo
}

// Lua 5.1's limits that scripts can meet: LUAI_MAXCALLS nested calls
// ("stack overflow") and LUAI_MAXCSTACK values a C function may push
// ("too many results to unpack").
const (
	maxCalls  = 20000
	maxCStack = 8000
)

func newVM(e *engineImpl) *vm {
	// The call stack grows as needed; the depth check (vmContext.poll)
	// stops a recursion with Lua's "stack overflow" well before
	// gopher-lua's own bound, which would panic without a position.
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       maxCalls + 2000,
		RegistrySize:        1024,
		RegistryMaxSize:     e.registryMax,
		MinimizeStackMemory: true,
	})
	v := &vm{
		L:       L,
		eng:     e,
		back:    map[*lua.LTable]*lua.LTable{},
		meta:    map[*lua.LTable]*lua.LTable{},
		recycle: true,
	}
	v.ctx.vm = v
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
		{lua.CoroutineLibName, lua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	lualib.Open(L)
	v.globals = L.G.Global
	v.installBase()
	v.installString()
	v.installTable()
	v.installMath()
	v.installCoroutine()
	v.installRedis()
	v.handler = L.NewFunction(v.errHandler)
	v.globals.RawSetString("__redis__err__handler", L.NewFunction(v.errHandlerGlobal))

	// Keep exactly Redis 7.0's globals.
	keep := map[string]bool{catGlobal: true, modName: true, forName: true,
		callName: true, pcallName: true, callVoidName: true, pcallVoidName: true}
	for _, k := range redisGlobals {
		keep[k] = true
	}
	var drop []lua.LValue
	v.globals.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); !ok || !keep[string(s)] {
			drop = append(drop, k)
		}
	})
	for _, k := range drop {
		v.globals.RawSet(k, lua.LNil)
	}

	// Lock it all: the globals' metatable errs on a missing name, and
	// every table reachable from them becomes read-only.
	v.roIndex = L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	})
	gmeta := L.NewTable()
	gmeta.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		k := L.Get(2)
		if !lua.LVCanConvToString(k) {
			L.RaiseError("Second argument to luaProtectedTableError must be a string or number")
		}
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", luaToString(k))
		return 0
	}))
	v.globals.Metatable = gmeta
	strMeta := L.NewTable()
	v.env = v.protect(v.globals)
	v.globals.RawSetString("_G", v.env)
	strMeta.RawSetString("__index", v.globals.RawGetString("string"))
	// What getmetatable("") shows is strMeta, protected; gopher-lua uses
	// a real table like it, which also has the arithmetic metamethods
	// through which strings coerce to numbers as Lua 5.1's do (gopher-lua
	// would read "010" as octal).
	v.strMeta = v.protect(strMeta)
	used := L.NewTable()
	used.RawSetString("__index", strMeta.RawGetString("__index"))
	for _, op := range []string{"__add", "__sub", "__mul", "__div", "__mod", "__pow", "__unm"} {
		used.RawSetString(op, L.NewFunction(v.stringArith(op)))
	}
	L.SetMetatable(lua.LString(""), used)
	L.Env = v.env
	L.G.Global = v.env
	return v
}

// redisGlobals are Redis 7.0.15's globals (KEYS and ARGV come with each
// run).
var redisGlobals = []string{
	"_G", "_VERSION", "__redis__err__handler", "assert", "bit", "cjson", "cmsgpack",
	"collectgarbage", "coroutine", "error", "gcinfo", "getmetatable", "ipairs", "load",
	"loadstring", "math", "next", "pairs", "pcall", "rawequal", "rawget", "rawset", "redis",
	"select", "setmetatable", "string", "struct", "table", "tonumber", "tostring", "type",
	"unpack", "xpcall",
}

// protect returns t's read-only proxy, protecting the tables it holds and
// its metatable too (luaSetTableProtectionRecursively).
func (v *vm) protect(t *lua.LTable) *lua.LTable {
	if _, ok := v.back[t]; ok {
		return t // already a proxy
	}
	for p, b := range v.back {
		if b == t {
			return p
		}
	}
	p := v.L.NewTable()
	v.back[p] = t
	pm := v.L.NewTable()
	pm.RawSetString("__index", t)
	pm.RawSetString("__newindex", v.roIndex)
	p.Metatable = pm
	var inner []lua.LValue
	t.ForEach(func(k, val lua.LValue) {
		if _, ok := val.(*lua.LTable); ok {
			inner = append(inner, k)
		}
	})
	for _, k := range inner {
		t.RawSet(k, v.protect(t.RawGet(k).(*lua.LTable)))
	}
	if mt, ok := t.Metatable.(*lua.LTable); ok {
		v.meta[p] = v.protect(mt)
	}
	return p
}

// backing returns the table a value reads as: a proxy's protected table,
// or the table itself.
func (v *vm) backing(t *lua.LTable) (*lua.LTable, bool) {
	if b, ok := v.back[t]; ok {
		return b, true
	}
	return t, false
}

// vmContext is the context gopher-lua checks before every instruction
// (LState.SetContext): its Done is the VM's one hook, so it also counts
// instructions, polls the run's own context now and then, and checks
// the memory bound; once the run must stop it returns a closed channel
// and Err says why.
type vmContext struct {
	vm     *vm
	n      uint32
	parent <-chan struct{} // the run's ctx.Done()
	stop   error
	done   chan struct{} // nil while running; closedChan once stopped
	mem    memWatch
	// The last instruction run after a kill (lineHook).
	lastFn *lua.LFunction
	lastPC int
	fresh  bool // the kill has not been raised yet
	// overflow raises "stack overflow" at the next instruction, once.
	overflow bool
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

const (
	pollEvery = 1 << 10 // instructions between polls of the run's ctx
	memEvery  = 1 << 16 // instructions between memory checks
)

func (c *vmContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *vmContext) Value(any) any               { return nil }
func (c *vmContext) Err() error {
	if c.overflow {
		c.overflow = false
		return errStackOverflow
	}
	if c.stop != nil {
		return c.stop
	}
	return context.Canceled
}

func (c *vmContext) Done() <-chan struct{} {
	c.n++
	if c.n&(pollEvery-1) == 0 {
		c.poll()
	}
	if c.overflow {
		return closedChan
	}
	if c.done != nil && c.stop == errKilled {
		if c.fresh {
			// Redis raises the kill in its count hook at once, then sets
			// the line hook.
			c.fresh = false
			c.lineHook()
			return closedChan
		}
		return c.lineHook()
	}
	return c.done
}

// lineHook is when a killed script stops: Redis then sets a line hook
// (luaMaskCountHook), which raises the kill error whenever a function
// starts, a loop jumps back or the line changes, so a script that caught
// the error in a pcall still finishes the line it is on.
func (c *vmContext) lineHook() <-chan struct{} {
	th := c.vm.L.G.CurrentThread
	if th == nil {
		th = c.vm.L
	}
	dbg, ok := th.GetStack(0)
	if !ok {
		return closedChan
	}
	fv, _ := th.GetInfo("f", dbg, lua.LNil)
	fn, ok := fv.(*lua.LFunction)
	if !ok || fn.IsG {
		return closedChan
	}
	pc, ok := framePC(dbg)
	if !ok || pc < 0 || pc >= len(fn.Proto.DbgSourcePositions) {
		return closedChan
	}
	lines := fn.Proto.DbgSourcePositions
	fire := pc == 0
	switch {
	case fn == c.lastFn:
		fire = fire || pc <= c.lastPC || lines[pc] != lines[c.lastPC]
	case pc > 0:
		// Back in a caller, after the call instruction.
		fire = fire || lines[pc] != lines[pc-1]
	}
	c.lastFn, c.lastPC = fn, pc
	if fire {
		return closedChan
	}
	return nil
}

func (c *vmContext) poll() {
	// Lua 5.1 allows LUAI_MAXCALLS nested calls. A call takes at least
	// two instructions, so between two polls the depth grows by at most
	// pollEvery/2, within gopher-lua's margin.
	th := c.vm.L.G.CurrentThread
	if th == nil {
		th = c.vm.L
	}
	if dbg, ok := th.GetStack(0); ok {
		if depth, ok := frameIndex(dbg); ok && depth >= maxCalls-pollEvery {
			c.overflow = true
		}
	}
	if c.parent != nil {
		select {
		case <-c.parent:
			c.halt(errKilled)
		default:
		}
	}
	if c.n&(memEvery-1) == 0 {
		if !c.mem.ok(0) {
			c.halt(errNoMemory)
		}
	}
}

func (c *vmContext) halt(err error) {
	if c.stop == nil {
		c.stop = err
		c.fresh = true
	}
	c.done = closedChan
}

func (c *vmContext) reset(parent <-chan struct{}, limit int64) {
	c.n = 0
	c.parent = parent
	c.stop = nil
	c.done = nil
	c.overflow = false
	c.lastFn = nil
	c.mem.reset(limit)
}

// charge accounts for an allocation of n bytes a library function is
// about to make; false (and the run halted) when it would pass the bound.
func (v *vm) charge(n int64) bool {
	if v.ctx.stop != nil {
		return false
	}
	if !v.ctx.mem.ok(n) {
		v.ctx.halt(errNoMemory)
		return false
	}
	return true
}

// noMemory raises Lua's out of memory error from a library function.
func (v *vm) noMemory() {
	v.ctx.halt(errNoMemory)
	v.L.RaiseError("not enough memory")
}

// smallInts are the numbers 0-1023 already in interfaces: a Go function
// returning one does not allocate.
var smallInts = func() (t [1024]lua.LValue) {
	for i := range t {
		t[i] = lua.LNumber(i)
	}
	return
}()

// num boxes a number for Lua, without allocating for small integers.
func num[T int | int32 | int64 | float64 | byte](x T) lua.LValue {
	f := float64(x)
	if f >= 0 && f < 1024 && f == float64(int(f)) && (f != 0 || !math.Signbit(f)) {
		return smallInts[int(f)]
	}
	return lua.LNumber(f)
}

func luaToString(lv lua.LValue) string {
	switch x := lv.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return luaNumberString(float64(x))
	}
	return lv.String()
}

// toNumber is lua_tonumber: a number, or a string that converts.
func toNumber(lv lua.LValue) (float64, bool) {
	switch x := lv.(type) {
	case lua.LNumber:
		return float64(x), true
	case lua.LString:
		return str2number(string(x))
	}
	return 0, false
}

var _ = math.Abs
