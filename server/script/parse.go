package script

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// A Lua 5.1 parser producing gopher-lua's syntax tree, so that scripts
// compile as Redis's Lua compiles them: the same grammar (no goto, no
// //, no attributes), the same syntax errors and limits (200 syntax
// levels, 200 locals, 60 upvalues), the vararg functions' implicit arg
// table, and a tree that works around gopher-lua's compiler where it
// differs from Lua's:
//
//   - a multiple assignment evaluates its targets' tables and keys, then
//     every value, then assigns right to left (gopher-lua assigns in
//     place, so "a, b = b, a" gave 2, 2);
//   - "local f = function ... end" does not see its own f (gopher-lua
//     binds it as "local function f" does);
//   - concatenation calls a helper that formats numbers as %.14g
//     (gopher-lua uses Go's shortest form) and names the operand in its
//     error ("attempt to concatenate local 'x' (a nil value)").

const (
	maxLevels   = 200 // LUAI_MAXCCALLS
	maxLocals   = 200 // LUAI_MAXVARS
	maxUpvalues = 60  // LUAI_MAXUPVALUES
)

// Hidden names: no Lua source can spell them.
const (
	catName   = "\x00cat" // the concatenation helper's local
	catGlobal = "\x00cat" // and the global it is read from
	modName   = "\x00mod" // the modulo helper's local and global
	forName   = "\x00for" // the numeric for's coercion of its bounds
	// redis.call and redis.pcall, and their variants for a call whose
	// reply is not used.
	callName      = "\x00call"
	pcallName     = "\x00pcall"
	callVoidName  = "\x00callv"
	pcallVoidName = "\x00pcallv"
	tempPrefix    = "\x00tmp" // temporaries of multiple assignments
)

type funcState struct {
	parent   *funcState
	blocks   []*blockScope
	vararg   bool
	usesDots bool
	line     int
	nlocals  int // active locals
	// maxLocals is the most locals active at once.
	maxLocals int
	upvals    map[string]bool
}

type blockScope struct {
	names     []string
	breakable bool
}

type parser struct {
	lx     *lexer
	tok    token
	ahead  token
	hasAh  bool
	last   int // line of the last token consumed
	level  int
	fs     *funcState
	ntemps int
	// globalRefs are the reads of globals every run has (hoist.go).
	globalRefs map[*ast.IdentExpr]bool
	// concats are the concatenation calls made so far and their
	// operands, to flatten a chain.
	concats map[*ast.FuncCallExpr][]ast.Expr
}

// parseChunk parses src as Lua 5.1 under chunkname's display name;
// level is how deep the caller already is (Lua counts C calls too).
func parseChunk(src, display string, level int) (chunk []ast.Stmt, err error) {
	p := &parser{lx: &lexer{src: src, line: 1, chunk: display}, level: level}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*syntaxErr)
			if !ok {
				panic(r)
			}
			chunk, err = nil, se
		}
	}()
	p.fs = &funcState{vararg: true, line: 0, upvals: map[string]bool{}}
	p.next()
	p.openBlock(false)
	body := p.block()
	p.check(tkEOS)
	zeroConstants(body)
	body = p.hoist(body)
	// The helpers the chunk uses, read once into locals of the main
	// chunk (upvalues for its functions), unless the chunk's own locals
	// need the registers: then they are read as the hidden globals they
	// also are.
	used := map[string]bool{}
	walkIdents(body, func(id *ast.IdentExpr) {
		if len(id.Value) > 0 && id.Value[0] == 0 && !strings.HasPrefix(id.Value, hoistPrefix) && !strings.HasPrefix(id.Value, tempPrefix) {
			used[id.Value] = true
		}
	})
	var names []string
	var exprs []ast.Expr
	for _, h := range []string{catName, modName, forName, callName, pcallName, callVoidName, pcallVoidName} {
		if used[h] {
			names = append(names, h)
			exprs = append(exprs, ident(h, 0))
		}
	}
	if len(names) == 0 || p.fs.maxLocals+len(names) > maxLocals-60 {
		return body, nil
	}
	helper := &ast.LocalAssignStmt{Names: names, Exprs: exprs}
	return append([]ast.Stmt{helper}, body...), nil
}

func ident(name string, line int) *ast.IdentExpr {
	e := &ast.IdentExpr{Value: name}
	e.SetLine(line)
	e.SetLastLine(line)
	return e
}

func (p *parser) next() {
	p.last = p.tok.line
	if p.hasAh {
		p.tok = p.ahead
		p.hasAh = false
		return
	}
	p.tok = p.lx.next()
}

func (p *parser) lookahead() token {
	if !p.hasAh {
		p.ahead = p.lx.next()
		p.hasAh = true
	}
	return p.ahead
}

// fail is luaX_syntaxerror: near the current token.
func (p *parser) fail(msg string) {
	p.lx.fail(msg, p.tok.t, p.tok.raw)
}

func (p *parser) failExpected(t int) {
	p.fail(fmt.Sprintf("'%s' expected", tokenString(t)))
}

func (p *parser) test(t int) bool {
	if p.tok.t == t {
		p.next()
		return true
	}
	return false
}

func (p *parser) check(t int) {
	if p.tok.t != t {
		p.failExpected(t)
	}
}

func (p *parser) checkNext(t int) {
	p.check(t)
	p.next()
}

func (p *parser) checkMatch(what, who, line int) {
	if !p.test(what) {
		if line == p.lx.line {
			p.failExpected(what)
		}
		p.fail(fmt.Sprintf("'%s' expected (to close '%s' at line %d)", tokenString(what), tokenString(who), line))
	}
}

func (p *parser) checkName() string {
	p.check(tkName)
	s := p.tok.s
	p.next()
	return s
}

func (p *parser) enter() {
	p.level++
	if p.level > maxLevels {
		p.lx.fail("chunk has too many syntax levels", 0, "")
	}
}

func (p *parser) leave() { p.level-- }

func blockFollow(t int) bool {
	switch t {
	case tkElse, tkElseif, tkEnd, tkUntil, tkEOS:
		return true
	}
	return false
}

// Scopes.

func (p *parser) openBlock(breakable bool) {
	p.fs.blocks = append(p.fs.blocks, &blockScope{breakable: breakable})
}

func (p *parser) closeBlock() {
	b := p.fs.blocks[len(p.fs.blocks)-1]
	p.fs.nlocals -= len(b.names)
	p.fs.blocks = p.fs.blocks[:len(p.fs.blocks)-1]
}

func (p *parser) declare(name string) {
	fs := p.fs
	if fs.nlocals+1 > maxLocals {
		p.limitError(fs, maxLocals, "local variables")
	}
	b := fs.blocks[len(fs.blocks)-1]
	b.names = append(b.names, name)
	fs.nlocals++
	fs.maxLocals = max(fs.maxLocals, fs.nlocals)
}

func (p *parser) limitError(fs *funcState, limit int, what string) {
	var msg string
	if fs.line == 0 {
		msg = fmt.Sprintf("main function has more than %d %s", limit, what)
	} else {
		msg = fmt.Sprintf("function at line %d has more than %d %s", fs.line, limit, what)
	}
	p.lx.fail(msg, 0, "")
}

func (fs *funcState) hasLocal(name string) bool {
	for i := len(fs.blocks) - 1; i >= 0; i-- {
		for _, n := range fs.blocks[i].names {
			if n == name {
				return true
			}
		}
	}
	return false
}

// resolve says how a name reads: "local", "upvalue" or "global" (Lua's
// names in its messages), registering upvalues against Lua's limit.
func (p *parser) resolve(name string) string {
	if p.fs.hasLocal(name) {
		return "local"
	}
	for fs := p.fs.parent; fs != nil; fs = fs.parent {
		if fs.hasLocal(name) {
			// Every function between the use and the local gets the
			// upvalue.
			for f := p.fs; f != fs; f = f.parent {
				if !f.upvals[name] {
					f.upvals[name] = true
					if len(f.upvals) > maxUpvalues {
						p.limitError(f, maxUpvalues, "upvalues")
					}
				}
			}
			return "upvalue"
		}
	}
	return "global"
}

// Statements.

// block is Lua's chunk(): statements until a block end; a return or
// break must be last.
func (p *parser) block() []ast.Stmt {
	p.enter()
	var out []ast.Stmt
	last := false
	for !last && !blockFollow(p.tok.t) {
		var s []ast.Stmt
		s, last = p.statement()
		out = append(out, s...)
		p.test(';')
	}
	p.leave()
	return out
}

func setLines(n ast.PositionHolder, line, last int) {
	n.SetLine(line)
	n.SetLastLine(last)
}

func (p *parser) statement() ([]ast.Stmt, bool) {
	line := p.tok.line
	switch p.tok.t {
	case tkIf:
		return []ast.Stmt{p.ifStat(line)}, false
	case tkWhile:
		p.next()
		cond := p.expr()
		p.checkNext(tkDo)
		p.openBlock(true)
		body := p.block()
		p.closeBlock()
		// The jump back is Lua's code at the block's last token.
		blockEnd := p.last
		p.checkMatch(tkEnd, tkWhile, line)
		s := &ast.WhileStmt{Condition: cond, Stmts: body}
		setLines(s, line, blockEnd)
		return []ast.Stmt{s}, false
	case tkDo:
		p.next()
		p.openBlock(false)
		body := p.block()
		p.closeBlock()
		p.checkMatch(tkEnd, tkDo, line)
		s := &ast.DoBlockStmt{Stmts: body}
		setLines(s, line, p.last)
		return []ast.Stmt{s}, false
	case tkFor:
		return []ast.Stmt{p.forStat(line)}, false
	case tkRepeat:
		p.next()
		p.openBlock(true)
		body := p.block()
		p.checkMatch(tkUntil, tkRepeat, line)
		cond := p.expr() // sees the block's locals
		p.closeBlock()
		s := &ast.RepeatStmt{Condition: cond, Stmts: body}
		setLines(s, line, p.last)
		return []ast.Stmt{s}, false
	case tkFunction:
		return []ast.Stmt{p.funcStat(line)}, false
	case tkLocal:
		p.next()
		if p.test(tkFunction) {
			name := p.checkName()
			p.declare(name)
			fn := p.body(false, line)
			s := &ast.LocalAssignStmt{Names: []string{name}, Exprs: []ast.Expr{fn}}
			setLines(s, line, p.last)
			return []ast.Stmt{s}, false
		}
		return p.localStat(line), false
	case tkReturn:
		p.next()
		var exprs []ast.Expr
		if !blockFollow(p.tok.t) && p.tok.t != ';' {
			exprs = p.exprList()
		}
		s := &ast.ReturnStmt{Exprs: exprs}
		setLines(s, line, p.last)
		return []ast.Stmt{s}, true
	case tkBreak:
		p.next()
		ok := false
		for i := len(p.fs.blocks) - 1; i >= 0; i-- {
			if p.fs.blocks[i].breakable {
				ok = true
				break
			}
		}
		if !ok {
			p.fail("no loop to break")
		}
		s := &ast.BreakStmt{}
		setLines(s, line, line)
		return []ast.Stmt{s}, true
	}
	return p.exprStat(line), false
}

func (p *parser) ifStat(line int) ast.Stmt {
	p.next()
	cond := p.expr()
	p.checkNext(tkThen)
	p.openBlock(false)
	then := p.block()
	p.closeBlock()
	top := &ast.IfStmt{Condition: cond, Then: then}
	top.SetLine(line)
	cur := top
	for p.tok.t == tkElseif {
		l := p.tok.line
		p.next()
		c := p.expr()
		p.checkNext(tkThen)
		p.openBlock(false)
		b := p.block()
		p.closeBlock()
		n := &ast.IfStmt{Condition: c, Then: b}
		n.SetLine(l)
		cur.Else = []ast.Stmt{n}
		cur = n
	}
	if p.test(tkElse) {
		p.openBlock(false)
		cur.Else = p.block()
		p.closeBlock()
	}
	p.checkMatch(tkEnd, tkIf, line)
	top.SetLastLine(p.last)
	return top
}

func (p *parser) forStat(line int) ast.Stmt {
	p.next()
	name := p.checkName()
	switch p.tok.t {
	case '=':
		p.next()
		init := p.expr()
		p.checkNext(',')
		limit := p.expr()
		var step ast.Expr
		if p.test(',') {
			step = p.expr()
		} else {
			n := &ast.NumberExpr{Value: "1"}
			setLines(n, line, line)
			step = n
		}
		doLine := p.tok.line
		// Lua 5.1's for takes strings that convert to numbers; gopher-lua
		// refuses them.
		coerce := func(e ast.Expr, what string) ast.Expr {
			if _, ok := numeral(e); ok {
				return e
			}
			k := &ast.StringExpr{Value: what}
			setLines(k, doLine, doLine)
			c := &ast.FuncCallExpr{Func: ident(forName, doLine), Args: []ast.Expr{k, e}, AdjustRet: true}
			setLines(c, doLine, doLine)
			return c
		}
		init, limit, step = coerce(init, "initial value"), coerce(limit, "limit"), coerce(step, "step")
		p.checkNext(tkDo)
		p.openBlock(true)
		p.declare(name)
		body := p.block()
		p.closeBlock()
		p.checkMatch(tkEnd, tkFor, line)
		s := &ast.NumberForStmt{Name: name, Init: init, Limit: limit, Step: step, Stmts: body}
		// Its checks (FORPREP) are Lua's code at the do.
		setLines(s, doLine, p.last)
		return s
	case ',', tkIn:
		names := []string{name}
		for p.test(',') {
			names = append(names, p.checkName())
		}
		p.checkNext(tkIn)
		exprs := p.exprList()
		p.checkNext(tkDo)
		p.openBlock(true)
		for _, n := range names {
			p.declare(n)
		}
		body := p.block()
		p.closeBlock()
		p.checkMatch(tkEnd, tkFor, line)
		s := &ast.GenericForStmt{Names: names, Exprs: exprs, Stmts: body}
		setLines(s, line, p.last)
		return s
	}
	p.fail("'=' or 'in' expected")
	return nil
}

func (p *parser) funcStat(line int) ast.Stmt {
	p.next()
	nameLine := p.tok.line
	name := p.checkName()
	p.resolve(name)
	var fn ast.Expr = ident(name, nameLine)
	fname := &ast.FuncName{}
	method := false
	for p.tok.t == '.' || p.tok.t == ':' {
		isMethod := p.tok.t == ':'
		p.next()
		kl := p.tok.line
		key := p.checkName()
		if isMethod {
			fname.Receiver = fn
			fname.Method = key
			method = true
			break
		}
		k := &ast.StringExpr{Value: key}
		setLines(k, kl, kl)
		g := &ast.AttrGetExpr{Object: fn, Key: k}
		setLines(g, kl, kl)
		fn = g
	}
	if !method {
		fname.Func = fn
	}
	body := p.body(method, line)
	s := &ast.FuncDefStmt{Name: fname, Func: body}
	setLines(s, line, p.last)
	return s
}

func (p *parser) localStat(line int) []ast.Stmt {
	var names []string
	for {
		names = append(names, p.checkName())
		if !p.test(',') {
			break
		}
	}
	var exprs []ast.Expr
	if p.test('=') {
		exprs = p.exprList()
	}
	// The names come into scope after the values.
	for _, n := range names {
		p.declare(n)
	}
	if len(names) == 1 && len(exprs) == 1 {
		if fn, ok := exprs[0].(*ast.FunctionExpr); ok {
			// gopher-lua would let the function see its own name.
			tmp := p.temp()
			a := &ast.LocalAssignStmt{Names: []string{tmp}, Exprs: []ast.Expr{fn}}
			setLines(a, line, p.last)
			b := &ast.LocalAssignStmt{Names: names, Exprs: []ast.Expr{ident(tmp, line)}}
			setLines(b, line, p.last)
			return []ast.Stmt{a, b}
		}
	}
	s := &ast.LocalAssignStmt{Names: names, Exprs: exprs}
	setLines(s, line, p.last)
	return []ast.Stmt{s}
}

func (p *parser) temp() string {
	p.ntemps++
	return fmt.Sprintf("%s%d", tempPrefix, p.ntemps)
}

// exprStat is a call or an assignment.
func (p *parser) exprStat(line int) []ast.Stmt {
	e, kind := p.primaryExp()
	if kind == expCall {
		if c, ok := e.(*ast.FuncCallExpr); ok {
			// A redis.call whose reply nobody reads: the variant that
			// does not convert it.
			if id, ok := c.Func.(*ast.IdentExpr); ok {
				switch id.Value {
				case callName:
					id.Value = callVoidName
				case pcallName:
					id.Value = pcallVoidName
				}
			}
		}
		s := &ast.FuncCallStmt{Expr: e}
		setLines(s, line, p.last)
		return []ast.Stmt{s}
	}
	targets := []ast.Expr{e}
	kinds := []int{kind}
	for {
		if kinds[len(kinds)-1] != expVar {
			p.fail("syntax error")
		}
		if !p.test(',') {
			break
		}
		if len(targets)+p.level > maxLevels {
			p.limitError(p.fs, maxLevels-p.level, "variables in assignment")
		}
		t, k := p.primaryExp()
		targets = append(targets, t)
		kinds = append(kinds, k)
	}
	p.checkNext('=')
	values := p.exprList()
	// The stores come after the values: at the statement's last line.
	for _, t := range targets {
		if g, ok := t.(*ast.AttrGetExpr); ok {
			g.SetLine(p.last)
		}
	}
	if len(targets) == 1 {
		s := &ast.AssignStmt{Lhs: targets, Rhs: values}
		setLines(s, line, p.last)
		return []ast.Stmt{s}
	}
	return []ast.Stmt{p.multiAssign(targets, values, line)}
}

// multiAssign evaluates the targets' tables and keys, then the values,
// into temporaries, and assigns right to left, as Lua 5.1 does.
func (p *parser) multiAssign(targets, values []ast.Expr, line int) ast.Stmt {
	var stmts []ast.Stmt
	assigns := make([]ast.Expr, len(targets))
	for i, t := range targets {
		g, ok := t.(*ast.AttrGetExpr)
		if !ok {
			assigns[i] = t
			continue
		}
		o, k := p.temp(), p.temp()
		pre := &ast.LocalAssignStmt{Names: []string{o, k}, Exprs: []ast.Expr{g.Object, g.Key}}
		setLines(pre, t.Line(), t.LastLine())
		stmts = append(stmts, pre)
		ng := &ast.AttrGetExpr{Object: ident(o, t.Line()), Key: ident(k, t.Line())}
		setLines(ng, p.last, p.last)
		assigns[i] = ng
	}
	vals := make([]string, len(targets))
	for i := range vals {
		vals[i] = p.temp()
	}
	ev := &ast.LocalAssignStmt{Names: vals, Exprs: values}
	setLines(ev, line, p.last)
	stmts = append(stmts, ev)
	for i := len(assigns) - 1; i >= 0; i-- {
		a := &ast.AssignStmt{Lhs: []ast.Expr{assigns[i]}, Rhs: []ast.Expr{ident(vals[i], p.last)}}
		setLines(a, line, p.last)
		stmts = append(stmts, a)
	}
	d := &ast.DoBlockStmt{Stmts: stmts}
	setLines(d, line, p.last)
	return d
}

// Expressions.

const (
	expOther = iota
	expVar   // assignable: a name or an index
	expCall
)

func (p *parser) exprList() []ast.Expr {
	list := []ast.Expr{p.expr()}
	for p.test(',') {
		list = append(list, p.expr())
	}
	return list
}

func (p *parser) expr() ast.Expr {
	e, _ := p.subexpr(0)
	return e
}

var binPriority = map[int][2]int{
	'+': {6, 6}, '-': {6, 6}, '*': {7, 7}, '/': {7, 7}, '%': {7, 7},
	'^': {10, 9}, tkConcat: {5, 4},
	tkEq: {3, 3}, tkNE: {3, 3}, '<': {3, 3}, tkLE: {3, 3}, '>': {3, 3}, tkGE: {3, 3},
	tkAnd: {2, 2}, tkOr: {1, 1},
}

const unaryPriority = 8

// subexpr parses an expression whose operators bind tighter than limit;
// it returns the first operator it did not take.
func (p *parser) subexpr(limit int) (ast.Expr, int) {
	p.enter()
	var e ast.Expr
	line := p.tok.line
	switch p.tok.t {
	case tkNot, '-', '#':
		op := p.tok.t
		p.next()
		operand, _ := p.subexpr(unaryPriority)
		switch op {
		case tkNot:
			e = &ast.UnaryNotOpExpr{Expr: operand}
		case '-':
			if n, ok := numeral(operand); ok {
				e = numberExpr(-n)
			} else {
				e = &ast.UnaryMinusOpExpr{Expr: operand}
			}
		default:
			e = &ast.UnaryLenOpExpr{Expr: operand}
		}
		setLines(e, p.last, p.last)
		_ = line
	default:
		e = p.simpleExp()
	}
	op := p.tok.t
	for {
		pr, ok := binPriority[op]
		if !ok || pr[0] <= limit {
			break
		}
		p.next()
		if op == tkConcat {
			// Right-associative: collect the chain a .. b .. c.
			parts := []ast.Expr{e}
			var rhs ast.Expr
			rhs, op = p.subexpr(pr[1])
			if c, ok := rhs.(*ast.FuncCallExpr); ok && p.concats[c] != nil {
				parts = append(parts, p.concats[c]...)
			} else {
				parts = append(parts, rhs)
			}
			e = p.concat(parts)
			continue
		}
		rhs, nextOp := p.subexpr(pr[1])
		if f, ok := fold(op, e, rhs); ok {
			e = f
			setLines(e, p.last, p.last)
		} else if op == '%' {
			e = p.helperCall(modName, []ast.Expr{e, rhs})
		} else {
			e = binary(op, e, rhs, p.last)
		}
		op = nextOp
	}
	p.leave()
	return e, op
}

// numeral is a number literal's value (or a folded one's).
func numeral(e ast.Expr) (float64, bool) {
	n, ok := e.(*ast.NumberExpr)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	return f, err == nil || isRange(err)
}

func numberExpr(f float64) *ast.NumberExpr {
	return &ast.NumberExpr{Value: luaNumberLiteral(f)}
}

// fold is Lua 5.1's constant folding of arithmetic on two numerals: not
// a division or modulo by zero, nor a NaN.
func fold(op int, a, b ast.Expr) (ast.Expr, bool) {
	x, ok1 := numeral(a)
	y, ok2 := numeral(b)
	if !ok1 || !ok2 {
		return nil, false
	}
	var r float64
	switch op {
	case '+':
		r = x + y
	case '-':
		r = x - y
	case '*':
		r = x * y
	case '/':
		if y == 0 {
			return nil, false
		}
		r = x / y
	case '%':
		if y == 0 {
			return nil, false
		}
		r = x - math.Floor(x/y)*y
	case '^':
		r = math.Pow(x, y)
	default:
		return nil, false
	}
	if r != r {
		return nil, false
	}
	return numberExpr(r), true
}

// walkIdents calls fn for every name in stmts, functions included.
func walkIdents(stmts []ast.Stmt, fn func(*ast.IdentExpr)) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				return
			}
			if id, ok := v.Interface().(*ast.IdentExpr); ok {
				fn(id)
				return
			}
			walk(v.Elem())
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if f := v.Field(i); f.CanInterface() {
					walk(f)
				}
			}
		}
	}
	walk(reflect.ValueOf(stmts))
}

// zeroConstants gives every zero numeral of a function the sign of its
// first: Lua 5.1's constant table holds one key for 0 and -0, so a
// function's later zeros reuse the first one's constant.
func zeroConstants(stmts []ast.Stmt) {
	sign := 0
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				return
			}
			if v.Kind() == reflect.Pointer {
				switch n := v.Interface().(type) {
				case *ast.FunctionExpr:
					return // a function of its own
				case *ast.NumberExpr:
					if f, ok := numeral(n); ok && f == 0 {
						neg := math.Signbit(f)
						switch {
						case sign == 0 && neg:
							sign = -1
						case sign == 0:
							sign = 1
						case sign == -1 && !neg:
							n.Value = "-0.0"
						case sign == 1 && neg:
							n.Value = "0"
						}
					}
					return
				}
			}
			walk(v.Elem())
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if f := v.Field(i); f.CanInterface() {
					walk(f)
				}
			}
		}
	}
	walk(reflect.ValueOf(stmts))
}

func binary(op int, lhs, rhs ast.Expr, line int) ast.Expr {
	var e ast.Expr
	switch op {
	case '+', '-', '*', '/', '%', '^':
		e = &ast.ArithmeticOpExpr{Operator: string(rune(op)), Lhs: lhs, Rhs: rhs}
	case tkAnd:
		e = &ast.LogicalOpExpr{Operator: "and", Lhs: lhs, Rhs: rhs}
	case tkOr:
		e = &ast.LogicalOpExpr{Operator: "or", Lhs: lhs, Rhs: rhs}
	default:
		e = &ast.RelationalOpExpr{Operator: map[int]string{tkEq: "==", tkNE: "~=", '<': "<", tkLE: "<=", '>': ">", tkGE: ">="}[op], Lhs: lhs, Rhs: rhs}
	}
	setLines(e, line, line)
	return e
}

// concat is a call of the helper: cat(names, a, b, ...), where names
// tells each operand's name for the error message, NUL-separated
// ("local 'x'", "global 'y'", "field 'z'", or nothing).
func (p *parser) concat(parts []ast.Expr) ast.Expr {
	call := p.helperCall(catName, parts)
	if p.concats == nil {
		p.concats = map[*ast.FuncCallExpr][]ast.Expr{}
	}
	p.concats[call] = parts
	return call
}

// helperCall calls a helper with the operands' names, then the operands
// (each adjusted to one value).
func (p *parser) helperCall(helper string, parts []ast.Expr) *ast.FuncCallExpr {
	names := ""
	args := make([]ast.Expr, 0, len(parts)+1)
	args = append(args, nil)
	for i, e := range parts {
		if i > 0 {
			names += "\x00"
		}
		names += p.operandName(e)
		switch x := e.(type) {
		case *ast.FuncCallExpr:
			x.AdjustRet = true
		case *ast.Comma3Expr:
			x.AdjustRet = true
		}
		args = append(args, e)
	}
	ns := &ast.StringExpr{Value: names}
	setLines(ns, p.last, p.last)
	args[0] = ns
	call := &ast.FuncCallExpr{Func: ident(helper, p.last), Args: args, AdjustRet: true}
	setLines(call, p.last, p.last)
	return call
}

func (p *parser) operandName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.IdentExpr:
		if p.globalRefs[x] {
			return "global '" + x.Value + "'"
		}
		switch p.resolve(x.Value) {
		case "local":
			return "local '" + x.Value + "'"
		case "upvalue":
			return "upvalue '" + x.Value + "'"
		}
		return "global '" + x.Value + "'"
	case *ast.AttrGetExpr:
		if k, ok := x.Key.(*ast.StringExpr); ok {
			return "field '" + k.Value + "'"
		}
		return "field '?'"
	}
	return ""
}

func (p *parser) simpleExp() ast.Expr {
	line := p.tok.line
	var e ast.Expr
	switch p.tok.t {
	case tkNumber:
		e = &ast.NumberExpr{Value: luaNumberLiteral(p.tok.n)}
	case tkString:
		e = &ast.StringExpr{Value: p.tok.s}
	case tkNil:
		e = &ast.NilExpr{}
	case tkTrue:
		e = &ast.TrueExpr{}
	case tkFalse:
		e = &ast.FalseExpr{}
	case tkDots:
		if !p.fs.vararg {
			p.fail("cannot use '...' outside a vararg function")
		}
		p.fs.usesDots = true
		e = &ast.Comma3Expr{}
	case '{':
		return p.constructor()
	case tkFunction:
		p.next()
		return p.body(false, line)
	default:
		e, _ = p.primaryExp()
		return e
	}
	setLines(e, line, line)
	p.next()
	return e
}

// luaNumberLiteral writes a literal's value so that gopher-lua's
// compiler reads back the same double (it reads integers first, which
// would lose a zero's sign).
func luaNumberLiteral(f float64) string {
	if f == 0 && math.Signbit(f) {
		return "-0.0"
	}
	return formatG(f, 17)
}

func (p *parser) constructor() ast.Expr {
	line := p.tok.line
	p.checkNext('{')
	t := &ast.TableExpr{}
	for p.tok.t != '}' {
		switch {
		case p.tok.t == tkName && p.lookahead().t == '=':
			kl := p.tok.line
			k := &ast.StringExpr{Value: p.checkName()}
			setLines(k, kl, kl)
			p.checkNext('=')
			t.Fields = append(t.Fields, &ast.Field{Key: k, Value: p.expr()})
		case p.tok.t == '[':
			p.next()
			k := p.expr()
			p.checkNext(']')
			p.checkNext('=')
			t.Fields = append(t.Fields, &ast.Field{Key: k, Value: p.expr()})
		default:
			t.Fields = append(t.Fields, &ast.Field{Value: p.expr()})
		}
		if !p.test(',') && !p.test(';') {
			break
		}
	}
	p.checkMatch('}', '{', line)
	setLines(t, line, p.last)
	return t
}

// body parses a function's parameters and block.
func (p *parser) body(method bool, line int) *ast.FunctionExpr {
	fs := &funcState{parent: p.fs, line: line, upvals: map[string]bool{}}
	p.fs = fs
	p.openBlock(false)
	par := &ast.ParList{Names: []string{}}
	if method {
		par.Names = append(par.Names, "self")
		p.declare("self")
	}
	p.checkNext('(')
	if p.tok.t != ')' {
		for {
			switch p.tok.t {
			case tkName:
				n := p.checkName()
				par.Names = append(par.Names, n)
				p.declare(n)
			case tkDots:
				p.next()
				par.HasVargs = true
				fs.vararg = true
			default:
				p.fail("<name> or '...' expected")
			}
			if fs.vararg || !p.test(',') {
				break
			}
		}
	}
	if fs.vararg {
		// LUA_COMPAT_VARARG: a vararg function has a local arg.
		p.declare("arg")
	}
	p.checkNext(')')
	stmts := p.block()
	p.checkMatch(tkEnd, tkFunction, line)
	p.closeBlock()
	p.fs = fs.parent
	// gopher-lua builds a vararg function's arg table itself (Lua 5.1's
	// LUA_COMPAT_VARARG), when the body does not use ....
	zeroConstants(stmts)
	fn := &ast.FunctionExpr{ParList: par, Stmts: stmts}
	setLines(fn, line, p.last)
	return fn
}

// primaryExp is a name or a parenthesized expression, then its
// suffixes: fields, indexes, calls and method calls.
func (p *parser) primaryExp() (ast.Expr, int) {
	var e ast.Expr
	kind := expOther
	line := p.tok.line
	switch p.tok.t {
	case tkName:
		name := p.tok.s
		id := ident(name, line)
		if p.resolve(name) == "global" && fixedGlobals[name] {
			if p.globalRefs == nil {
				p.globalRefs = map[*ast.IdentExpr]bool{}
			}
			p.globalRefs[id] = true
		}
		e = id
		kind = expVar
		p.next()
	case '(':
		p.next()
		inner := p.expr()
		p.checkMatch(')', '(', line)
		switch x := inner.(type) {
		case *ast.FuncCallExpr:
			x.AdjustRet = true
		case *ast.Comma3Expr:
			x.AdjustRet = true
		}
		e = inner
	default:
		p.fail("unexpected symbol")
	}
	for {
		switch p.tok.t {
		case '.':
			p.next()
			kl := p.tok.line
			k := &ast.StringExpr{Value: p.checkName()}
			setLines(k, kl, kl)
			g := &ast.AttrGetExpr{Object: e, Key: k}
			setLines(g, kl, kl)
			e, kind = g, expVar
		case '[':
			p.next()
			k := p.expr()
			p.checkNext(']')
			g := &ast.AttrGetExpr{Object: e, Key: k}
			setLines(g, p.last, p.last)
			e, kind = g, expVar
		case ':':
			p.next()
			m := p.checkName()
			args, al := p.funcArgs()
			c := &ast.FuncCallExpr{Receiver: e, Method: m, Args: args}
			setLines(c, al, p.last)
			e, kind = c, expCall
		case '(', tkString, '{':
			args, al := p.funcArgs()
			c := &ast.FuncCallExpr{Func: p.redisFunc(e), Args: args}
			setLines(c, al, p.last)
			e, kind = c, expCall
		default:
			return e, kind
		}
	}
}

// redisFunc turns redis.call and redis.pcall (the global redis, which
// no script can change) into the main chunk's locals holding them, so a
// call costs no global or field lookup.
func (p *parser) redisFunc(e ast.Expr) ast.Expr {
	g, ok := e.(*ast.AttrGetExpr)
	if !ok {
		return e
	}
	obj, ok1 := g.Object.(*ast.IdentExpr)
	key, ok2 := g.Key.(*ast.StringExpr)
	if !ok1 || !ok2 || obj.Value != "redis" || p.resolve("redis") != "global" {
		return e
	}
	switch key.Value {
	case "call":
		return ident(callName, g.Line())
	case "pcall":
		return ident(pcallName, g.Line())
	}
	return e
}

func (p *parser) funcArgs() ([]ast.Expr, int) {
	line := p.tok.line
	switch p.tok.t {
	case '(':
		if line != p.last {
			p.fail("ambiguous syntax (function call x new statement)")
		}
		p.next()
		var args []ast.Expr
		if p.tok.t != ')' {
			args = p.exprList()
		}
		p.checkMatch(')', '(', line)
		return args, line
	case '{':
		return []ast.Expr{p.constructor()}, line
	case tkString:
		s := &ast.StringExpr{Value: p.tok.s}
		setLines(s, line, line)
		p.next()
		return []ast.Expr{s}, line
	}
	p.fail("function arguments expected")
	return nil, 0
}
