package script

import (
	"reflect"
	"strings"

	"github.com/yuin/gopher-lua/ast"
)

// Hoisting. Every global a run has (the libraries, redis, KEYS, ARGV)
// is fixed for the run: the globals are read-only and KEYS and ARGV are
// set before it starts. So a script's reads of them, and of the
// libraries' fields (math.max), are read once at the start of the main
// chunk into locals, which the rest reads as registers or upvalues: a
// global read through the read-only proxy costs three table lookups,
// a field of a library three more. Writes stay writes (and fail as
// they must); a field that does not exist reads as nil either way.

const hoistPrefix = "\x00g."

// maxHoisted bounds the locals hoisting adds (a function has 250
// registers).
const maxHoisted = 40

var fixedGlobals = func() map[string]bool {
	m := map[string]bool{"KEYS": true, "ARGV": true}
	for _, g := range redisGlobals {
		if g != "__redis__err__handler" {
			m[g] = true
		}
	}
	return m
}()

// hoistedName maps a hoisted local back to what Lua would call it.
func hoistedName(local string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(local, hoistPrefix)
	if !ok {
		return "", "", false
	}
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		return "field", rest[i+1:], true
	}
	return "global", rest, true
}

func (p *parser) hoist(body []ast.Stmt) []ast.Stmt {
	// A main chunk with many locals of its own keeps its registers.
	if len(p.globalRefs) == 0 || p.fs.maxLocals > maxLocals-maxHoisted-20 {
		return body
	}
	var names []string
	var values []ast.Expr
	seen := map[string]bool{}
	add := func(local string, value ast.Expr) bool {
		if seen[local] {
			return true
		}
		if len(names) >= maxHoisted {
			return false
		}
		seen[local] = true
		names = append(names, local)
		values = append(values, value)
		return true
	}
	// targets are the expressions assigned to, which stay as they are.
	targets := map[ast.Expr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface, reflect.Pointer:
			if v.IsNil() {
				return
			}
			switch n := v.Interface().(type) {
			case *ast.AssignStmt:
				for _, t := range n.Lhs {
					targets[t] = true
				}
			case *ast.FuncDefStmt:
				if n.Name.Func != nil {
					targets[n.Name.Func] = true
				}
			}
			walk(v.Elem())
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				p.hoistAt(v.Index(i), targets, add)
				walk(v.Index(i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if f := v.Field(i); f.CanSet() {
					p.hoistAt(f, targets, add)
					walk(f)
				}
			}
		}
	}
	walk(reflect.ValueOf(body))
	if len(names) == 0 {
		return body
	}
	decl := &ast.LocalAssignStmt{Names: names, Exprs: values}
	return append([]ast.Stmt{decl}, body...)
}

// hoistAt replaces the expression in slot f, if it is a hoistable read.
func (p *parser) hoistAt(f reflect.Value, targets map[ast.Expr]bool, add func(string, ast.Expr) bool) {
	if f.Kind() != reflect.Interface || f.IsNil() || !f.Type().Implements(reflect.TypeOf((*ast.Expr)(nil)).Elem()) {
		return
	}
	e, ok := f.Interface().(ast.Expr)
	if !ok || targets[e] {
		return
	}
	switch x := e.(type) {
	case *ast.IdentExpr:
		if p.globalRefs[x] {
			global := ident(x.Value, 0)
			if add(hoistPrefix+x.Value, global) {
				x.Value = hoistPrefix + x.Value
				delete(p.globalRefs, x)
			}
		}
	case *ast.AttrGetExpr:
		obj, ok1 := x.Object.(*ast.IdentExpr)
		key, ok2 := x.Key.(*ast.StringExpr)
		if !ok1 || !ok2 || !p.globalRefs[obj] || obj.Value == "KEYS" || obj.Value == "ARGV" {
			return
		}
		local := hoistPrefix + obj.Value + "." + key.Value
		read := &ast.AttrGetExpr{Object: ident(obj.Value, 0), Key: &ast.StringExpr{Value: key.Value}}
		if add(local, read) {
			f.Set(reflect.ValueOf(ast.Expr(ident(local, x.Line()))))
		}
	}
}
