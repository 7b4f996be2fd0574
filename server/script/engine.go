package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/ast"

	"github.com/sluicehq/sluice/engine"
)

func init() {
	// gopher-lua fills a table's array part up to a new integer key:
	// t[60000000] = 1 would allocate a gigabyte in one instruction. Past
	// this index keys go to the hash part, which has no such gap.
	lua.MaxArrayIndex = 1 << 22
}

// compiled is one cached script.
type compiled struct {
	sha   string
	body  []byte
	flags Flags
	proto *lua.FunctionProto
}

type engineImpl struct {
	mu    sync.RWMutex
	cache map[string]*compiled
	// byBody finds a cached script by its text, which costs a map hash
	// where its SHA1 costs a pass of SHA1 over it.
	byBody map[string]*compiled

	// free are idle interpreters. Not a sync.Pool: building one costs
	// about a millisecond, and a pool is emptied by every collection.
	freeMu      sync.Mutex
	free        []*vm
	rand        *rand48
	memLimit    int64
	registryMax int
}

func newEngineImpl(cfg Config) *engineImpl {
	e := &engineImpl{
		cache:       map[string]*compiled{},
		byBody:      map[string]*compiled{},
		rand:        newRand48(),
		memLimit:    cfg.MemoryLimit,
		registryMax: 1 << 20,
	}
	if e.memLimit == 0 {
		e.memLimit = defaultMemoryLimit
	}
	return e
}

func shaOf(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// load compiles body (once: it is cached by its SHA1) as luaCreateFunction
// does: the shebang first, then the Lua from the shebang's newline on.
func (e *engineImpl) load(body []byte) (*compiled, error) {
	e.mu.RLock()
	c, ok := e.byBody[string(body)]
	e.mu.RUnlock()
	if ok {
		return c, nil
	}
	sha := shaOf(body)
	e.mu.RLock()
	c, ok = e.cache[sha]
	e.mu.RUnlock()
	if ok {
		return c, nil
	}
	flags, skip, err := parseShebang(body)
	if err != nil {
		return nil, engine.RawError("ERR " + err.Error())
	}
	proto, err := compileChunk(string(body[skip:]), "@user_script", 0)
	if err != nil {
		return nil, engine.RawError("ERR Error compiling script (new function): " + err.Error())
	}
	text := string(body)
	c = &compiled{sha: sha, body: []byte(text), flags: flags, proto: proto}
	e.mu.Lock()
	if old, ok := e.cache[sha]; ok {
		c = old
	} else {
		e.cache[sha] = c
		e.byBody[text] = c
	}
	e.mu.Unlock()
	return c, nil
}

// cached finds a cached script by its SHA1 in hex of either case, without
// allocating: EVALSHA looks one up on every call.
func cached[T string | []byte](e *engineImpl, sha T) (*compiled, bool) {
	var lower [40]byte
	if len(sha) != len(lower) {
		return nil, false // the cache's keys are 40 hex digits
	}
	for i := range len(sha) {
		ch := sha[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		lower[i] = ch
	}
	e.mu.RLock()
	c, ok := e.cache[string(lower[:])]
	e.mu.RUnlock()
	return c, ok
}

func (e *engineImpl) body(sha string) ([]byte, bool) {
	if c, ok := cached(e, sha); ok {
		return c.body, true
	}
	return nil, false
}

func (e *engineImpl) flags(sha string) (Flags, bool) {
	if c, ok := cached(e, sha); ok {
		return c.flags, true
	}
	return Flags{}, false
}

func (e *engineImpl) flush() {
	e.mu.Lock()
	e.cache = map[string]*compiled{}
	e.byBody = map[string]*compiled{}
	e.mu.Unlock()
}

// compileChunk parses and compiles Lua source under Lua's chunk name
// (a "@file" or "=name", or the source itself for loadstring).
func compileChunk(src, chunkname string, level int) (proto *lua.FunctionProto, err error) {
	display := chunkID(chunkname)
	defer func() {
		if r := recover(); r != nil {
			proto, err = nil, fmt.Errorf("%s: %v", display, r)
		}
	}()
	chunk, err := parseChunk(src, display, level)
	if err != nil {
		return nil, err
	}
	if treeDepth(chunk) > maxSyntaxDepth {
		return nil, fmt.Errorf("%s: chunk has too many syntax levels", display)
	}
	proto, err = lua.Compile(chunk, display)
	if err != nil {
		return nil, syntaxError(err, display)
	}
	// A main chunk is vararg with no arg table (only functions get one).
	proto.IsVarArg &^= lua.VarArgNeedsArg | lua.VarArgHasArg
	return proto, nil
}

// chunkID is luaO_chunkid: how Lua names a chunk in messages.
func chunkID(source string) string {
	const idSize = 60
	switch {
	case strings.HasPrefix(source, "="):
		s := source[1:]
		if len(s) > idSize-1 {
			s = s[:idSize-1]
		}
		return s
	case strings.HasPrefix(source, "@"):
		s := source[1:]
		if max := idSize - len(" '...' ") - 1; len(s) > max {
			return "..." + s[len(s)-max:]
		}
		return s
	}
	max := idSize - len(` [string "..."] `) - 1
	l := strings.IndexAny(source, "\n\r")
	if l < 0 {
		l = len(source)
	}
	if l > max {
		l = max
	}
	if l < len(source) {
		return `[string "` + source[:l] + `..."]`
	}
	return `[string "` + source + `"]`
}

// syntaxError puts gopher-lua's compile errors (its limits) in Lua's
// form, "chunk:line: message".
func syntaxError(err error, display string) error {
	var ce *lua.CompileError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s:%d: %s", display, ce.Line, ce.Message)
	}
	return fmt.Errorf("%s: %s", display, strings.TrimSpace(err.Error()))
}

// maxSyntaxDepth bounds the parsed tree's depth, which the compiler
// recurses over. The parser already refuses what Lua 5.1 refuses (200
// levels of blocks and subexpressions); a long chain of left-associative
// operators (1 + 1 + 1 ...) nests the tree without nesting Lua's levels,
// and only that, past this depth, is refused here and not by Redis.
const maxSyntaxDepth = 100000

// treeDepth measures chunk's depth without recursion (the tree can be
// arbitrarily deep), walking every field that holds nodes.
func treeDepth(chunk []ast.Stmt) int {
	type item struct {
		v     reflect.Value
		depth int
	}
	stack := []item{{reflect.ValueOf(chunk), 0}}
	max := 0
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if it.depth > max {
			max = it.depth
			if max > maxSyntaxDepth {
				return max
			}
		}
		v := it.v
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if !v.IsNil() {
				stack = append(stack, item{v.Elem(), it.depth})
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				stack = append(stack, item{v.Index(i), it.depth})
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Field(i)
				switch f.Kind() {
				case reflect.Interface, reflect.Pointer, reflect.Slice, reflect.Struct:
					stack = append(stack, item{f, it.depth + 1})
				}
			}
		}
	}
	return max
}

// maxFree bounds the idle interpreters kept: about as many as can run
// at once.
var maxFree = 2 * runtime.GOMAXPROCS(0)

func (e *engineImpl) getVM() *vm {
	e.freeMu.Lock()
	if n := len(e.free); n > 0 {
		v := e.free[n-1]
		e.free = e.free[:n-1]
		e.freeMu.Unlock()
		return v
	}
	e.freeMu.Unlock()
	return newVM(e)
}

// putVM keeps v for another run, unless it must not be reused: a Go
// panic inside it, or a run big enough to have grown its stacks (it
// read the heap), whose memory it would keep.
func (e *engineImpl) putVM(v *vm) {
	if !v.recycle || v.ctx.mem.base >= 0 || v.ctx.n >= 1<<20 {
		v.L.Close()
		return
	}
	v.host = nil
	v.errInfo = errorInfo{}
	v.xhandlers = v.xhandlers[:0]
	e.freeMu.Lock()
	if len(e.free) < maxFree {
		e.free = append(e.free, v)
		v = nil
	}
	e.freeMu.Unlock()
	if v != nil {
		v.L.Close()
	}
}

func (e *engineImpl) run(ctx context.Context, body []byte, keys, args [][]byte, host Host) (rep engine.Reply) {
	c, err := e.load(body)
	if err != nil {
		return engine.Reply{Kind: engine.ReplyError, Err: err}
	}
	return e.runCompiled(ctx, c, keys, args, host)
}

func (e *engineImpl) runCompiled(ctx context.Context, c *compiled, keys, args [][]byte, host Host) (rep engine.Reply) {
	v := e.getVM()
	defer func() {
		if r := recover(); r != nil {
			// A Go panic outside the interpreter's own recovery: retire
			// the interpreter, answer an error.
			v.recycle = false
			rep = rawError(fmt.Sprintf("ERR Error running script %s, %v", c.sha, r))
		}
		e.putVM(v)
	}()
	return v.run(ctx, c, keys, args, host)
}

func (v *vm) run(ctx context.Context, c *compiled, keys, args [][]byte, host Host) engine.Reply {
	L := v.L
	v.host = host
	v.sha = c.sha
	v.resp = 2
	v.rand = v.eng.rand
	if d, ok := host.(Deterministic); ok && d.Deterministic() {
		v.fresh.x.Store(rand48Init)
		v.rand = &v.fresh
	}
	v.globals.RawSetString("KEYS", v.argTable(keys))
	v.globals.RawSetString("ARGV", v.argTable(args))
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	v.ctx.reset(done, v.eng.memLimit)
	if done != nil || v.eng.memLimit > 0 {
		L.SetContext(&v.ctx)
		defer L.RemoveContext()
	}
	// The main function has no upvalues and no state: one per script
	// and interpreter.
	if v.lastProto != c.proto {
		v.lastProto, v.lastFn = c.proto, L.NewFunctionFromProto(c.proto)
	}
	L.Push(v.lastFn)
	if err := L.PCall(0, 1, v.handler); err != nil {
		if v.errInfo.value == nil {
			v.errInfo.value = fixError(v.errValue(err))
			// The handler could not run: a full call stack. Lua's handler
			// would give the message's own position.
			if s, ok := v.errInfo.value.(lua.LString); ok {
				if m := reOverflow.FindStringSubmatch(string(s)); m != nil {
					line, _ := strconv.Atoi(m[2])
					v.errInfo.hasPos, v.errInfo.source, v.errInfo.line = true, "@"+m[1], line
				}
			}
		}
		if aerr, ok := err.(*lua.ApiError); ok && aerr.Type == lua.ApiErrorPanic {
			v.recycle = false
		}
		L.SetTop(0)
		return v.errorReply(L)
	}
	ret := L.Get(-1)
	L.SetTop(0)
	// A script that caught its kill and ended on the same line returns,
	// as in Redis.
	return v.fromLua(ret, 2)
}

var reOverflow = regexp.MustCompile(`^(user_script):(\d+): stack overflow$`)

func (v *vm) argTable(items [][]byte) *lua.LTable {
	t := v.L.CreateTable(len(items), 0)
	for i, it := range items {
		t.RawSetInt(i+1, lua.LString(it))
	}
	return t
}
