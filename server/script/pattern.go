package script

import (
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1's patterns (string.find, match, gmatch, gsub), with its
// frontier (%f), balance (%b), position captures and back references,
// and its error messages. A pattern ends at its first NUL, as Lua 5.1
// reads patterns as C strings; the subject may hold any bytes.

const maxCaptures = 32

const (
	capUnfinished = -1
	capPosition   = -2
)

type matchState struct {
	L     *lua.LState
	src   string
	pat   string
	level int
	capt  [maxCaptures]struct{ init, len int }
}

func (ms *matchState) fail(format string, args ...any) {
	luaError(ms.L, format, args...)
}

// at is the subject's byte at i, or 0 past its end (Lua strings end in a
// NUL).
func (ms *matchState) at(i int) byte {
	if i < len(ms.src) {
		return ms.src[i]
	}
	return 0
}

func (ms *matchState) pat1(p int) byte {
	if p < len(ms.pat) {
		return ms.pat[p]
	}
	return 0
}

func (ms *matchState) classEnd(p int) int {
	c := ms.pat1(p)
	p++
	switch c {
	case '%':
		if p >= len(ms.pat) {
			ms.fail("malformed pattern (ends with '%%')")
		}
		return p + 1
	case '[':
		if ms.pat1(p) == '^' {
			p++
		}
		for {
			if p >= len(ms.pat) {
				ms.fail("malformed pattern (missing ']')")
			}
			c := ms.pat[p]
			p++
			if c == '%' && p < len(ms.pat) {
				p++
			}
			if ms.pat1(p) == ']' {
				break
			}
		}
		return p + 1
	}
	return p
}

func classMatch(c, cl byte) bool {
	var res bool
	switch cl | 0x20 {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = c < 32 || c == 127
	case 'd':
		res = c >= '0' && c <= '9'
	case 'l':
		res = c >= 'a' && c <= 'z'
	case 'p':
		res = c > 32 && c < 127 && !isAlpha(c) && !(c >= '0' && c <= '9')
	case 's':
		res = isSpaceC(c)
	case 'u':
		res = c >= 'A' && c <= 'Z'
	case 'w':
		res = isAlpha(c) || c >= '0' && c <= '9'
	case 'x':
		res = c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if cl >= 'A' && cl <= 'Z' {
		return !res
	}
	return res
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// bracketMatch matches c against the class pat[p:ec+1] ("[...]", ec at
// its ']').
func (ms *matchState) bracketMatch(c byte, p, ec int) bool {
	sig := true
	if ms.pat1(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case ms.pat[p] == '%':
			p++
			if classMatch(c, ms.pat1(p)) {
				return sig
			}
		case ms.pat1(p+1) == '-' && p+2 < ec:
			p += 2
			if ms.pat[p-2] <= c && c <= ms.pat[p] {
				return sig
			}
		case ms.pat[p] == c:
			return sig
		}
	}
	return !sig
}

func (ms *matchState) singleMatch(c byte, p, ep int) bool {
	switch ms.pat[p] {
	case '.':
		return true
	case '%':
		return classMatch(c, ms.pat1(p+1))
	case '[':
		return ms.bracketMatch(c, p, ep-1)
	}
	return ms.pat[p] == c
}

// match returns the end of the match of pat[p:] at src[s:], or -1.
func (ms *matchState) match(s, p int) int {
	for {
		if p >= len(ms.pat) {
			return s
		}
		switch ms.pat[p] {
		case '(':
			if ms.pat1(p+1) == ')' {
				return ms.startCapture(s, p+2, capPosition)
			}
			return ms.startCapture(s, p+1, capUnfinished)
		case ')':
			return ms.endCapture(s, p+1)
		case '%':
			switch c := ms.pat1(p + 1); {
			case c == 'b':
				if s = ms.matchBalance(s, p+2); s < 0 {
					return -1
				}
				p += 4
				continue
			case c == 'f':
				p += 2
				if ms.pat1(p) != '[' {
					ms.fail("missing '[' after '%%f' in pattern")
				}
				ep := ms.classEnd(p)
				var prev byte
				if s > 0 {
					prev = ms.src[s-1]
				}
				if !ms.bracketMatch(prev, p, ep-1) && ms.bracketMatch(ms.at(s), p, ep-1) {
					p = ep
					continue
				}
				return -1
			case c >= '0' && c <= '9':
				if s = ms.matchCapture(s, c); s < 0 {
					return -1
				}
				p += 2
				continue
			}
		case '$':
			if p+1 == len(ms.pat) {
				if s == len(ms.src) {
					return s
				}
				return -1
			}
		}
		ep := ms.classEnd(p)
		m := s < len(ms.src) && ms.singleMatch(ms.src[s], p, ep)
		switch ms.pat1(ep) {
		case '?':
			if m {
				if r := ms.match(s+1, ep+1); r >= 0 {
					return r
				}
			}
			p = ep + 1
			continue
		case '*':
			return ms.maxExpand(s, p, ep)
		case '+':
			if !m {
				return -1
			}
			return ms.maxExpand(s+1, p, ep)
		case '-':
			return ms.minExpand(s, p, ep)
		}
		if !m {
			return -1
		}
		s++
		p = ep
	}
}

func (ms *matchState) maxExpand(s, p, ep int) int {
	i := 0
	for s+i < len(ms.src) && ms.singleMatch(ms.src[s+i], p, ep) {
		i++
	}
	for ; i >= 0; i-- {
		if r := ms.match(s+i, ep+1); r >= 0 {
			return r
		}
	}
	return -1
}

func (ms *matchState) minExpand(s, p, ep int) int {
	for {
		if r := ms.match(s, ep+1); r >= 0 {
			return r
		}
		if s < len(ms.src) && ms.singleMatch(ms.src[s], p, ep) {
			s++
		} else {
			return -1
		}
	}
}

func (ms *matchState) startCapture(s, p, what int) int {
	if ms.level >= maxCaptures {
		ms.fail("too many captures")
	}
	ms.capt[ms.level].init = s
	ms.capt[ms.level].len = what
	ms.level++
	r := ms.match(s, p)
	if r < 0 {
		ms.level--
	}
	return r
}

func (ms *matchState) endCapture(s, p int) int {
	l := -1
	for i := ms.level - 1; i >= 0; i-- {
		if ms.capt[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		ms.fail("invalid pattern capture")
	}
	ms.capt[l].len = s - ms.capt[l].init
	r := ms.match(s, p)
	if r < 0 {
		ms.capt[l].len = capUnfinished
	}
	return r
}

func (ms *matchState) matchBalance(s, p int) int {
	if p >= len(ms.pat) || p+1 >= len(ms.pat) {
		ms.fail("unbalanced pattern")
	}
	if ms.at(s) != ms.pat[p] {
		return -1
	}
	b, e := ms.pat[p], ms.pat[p+1]
	cont := 1
	for s++; s < len(ms.src); s++ {
		switch ms.src[s] {
		case e:
			if cont--; cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (ms *matchState) matchCapture(s int, c byte) int {
	l := ms.checkCapture(c)
	n := ms.capt[l].len
	capt := ms.src[ms.capt[l].init : ms.capt[l].init+n]
	if len(ms.src)-s >= n && ms.src[s:s+n] == capt {
		return s + n
	}
	return -1
}

func (ms *matchState) checkCapture(c byte) int {
	l := int(c) - '1'
	if l < 0 || l >= ms.level || ms.capt[l].len == capUnfinished {
		ms.fail("invalid capture index")
	}
	return l
}

// capture returns capture i of the match src[s:e] (the whole match when
// there are no captures and i is 0).
func (ms *matchState) capture(i, s, e int) lua.LValue {
	if i >= ms.level {
		if i == 0 {
			return lua.LString(ms.src[s:e])
		}
		ms.fail("invalid capture index")
	}
	c := ms.capt[i]
	switch c.len {
	case capUnfinished:
		ms.fail("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(ms.src[c.init : c.init+c.len])
}

// pushCaptures pushes the captures (or the whole match, when wholeOK) and
// returns how many.
func (ms *matchState) pushCaptures(s, e int, wholeOK bool) int {
	n := ms.level
	if n == 0 && wholeOK {
		n = 1
	}
	if n+ms.L.GetTop() > maxCStack {
		ms.fail("too many captures")
	}
	for i := 0; i < n; i++ {
		ms.L.Push(ms.capture(i, s, e))
	}
	return n
}

func cutNUL(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

const patternSpecials = "^$*+?.([%-"

func (v *vm) strFind(find bool) lua.LGFunction {
	return func(L *lua.LState) int {
		s := checkString(L, 1)
		p := checkString(L, 2)
		init := posrelat(optInteger(L, 3, 1), int64(len(s))) - 1
		if init < 0 {
			init = 0
		} else if init > int64(len(s)) {
			init = int64(len(s))
		}
		if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(cutNUL(p), patternSpecials)) {
			if i := strings.Index(s[init:], p); i >= 0 {
				L.Push(num(int(init) + i + 1))
				L.Push(num(int(init) + i + len(p)))
				return 2
			}
			L.Push(lua.LNil)
			return 1
		}
		ms := &matchState{L: L, src: s, pat: cutNUL(p)}
		anchor := strings.HasPrefix(ms.pat, "^")
		if anchor {
			ms.pat = ms.pat[1:]
		}
		for s1 := int(init); ; s1++ {
			ms.level = 0
			if e := ms.match(s1, 0); e >= 0 {
				if find {
					L.Push(num(s1 + 1))
					L.Push(num(e))
					return 2 + ms.pushCaptures(-1, -1, false)
				}
				return ms.pushCaptures(s1, e, true)
			}
			if s1 >= len(s) || anchor {
				break
			}
		}
		L.Push(lua.LNil)
		return 1
	}
}

func (v *vm) strGmatch(L *lua.LState) int {
	s := checkString(L, 1)
	p := cutNUL(checkString(L, 2))
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		ms := &matchState{L: L, src: s, pat: p}
		for src := pos; src <= len(s); src++ {
			ms.level = 0
			if e := ms.match(src, 0); e >= 0 {
				pos = e
				if e == src {
					pos++
				}
				return ms.pushCaptures(src, e, true)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

func (v *vm) strGsub(L *lua.LState) int {
	src := checkString(L, 1)
	p := cutNUL(checkString(L, 2))
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTFunction, lua.LTTable:
	default:
		argError(L, 3, "string/function/table expected")
	}
	maxN := int64(optInt(L, 4, int32(min(len(src)+1, 1<<31-1))))
	ms := &matchState{L: L, src: src, pat: p}
	anchor := strings.HasPrefix(p, "^")
	if anchor {
		ms.pat = p[1:]
	}
	var b []byte
	n := int64(0)
	s := 0
	for n < maxN {
		ms.level = 0
		e := ms.match(s, 0)
		if e >= 0 {
			n++
			b = v.addValue(ms, b, s, e, repl)
			if len(b) > chargeCheck && !v.charge(int64(len(b))) {
				v.noMemory()
			}
		}
		if e >= 0 && e > s {
			s = e
		} else if s < len(src) {
			b = append(b, src[s])
			s++
		} else {
			break
		}
		if anchor {
			break
		}
	}
	b = append(b, src[s:]...)
	L.Push(lua.LString(b))
	L.Push(num(n))
	return 2
}

func (v *vm) addValue(ms *matchState, b []byte, s, e int, repl lua.LValue) []byte {
	L := ms.L
	var val lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news := luaToString(r)
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != '%' {
				b = append(b, c)
				continue
			}
			i++
			var d byte
			if i < len(news) {
				d = news[i]
			}
			switch {
			case d < '0' || d > '9':
				b = append(b, d)
			case d == '0':
				b = append(b, ms.src[s:e]...)
			default:
				b = append(b, luaToString(ms.capture(int(d-'1'), s, e))...)
			}
		}
		return b
	case *lua.LFunction:
		top := L.GetTop()
		L.Push(r)
		n := ms.pushCaptures(s, e, true)
		L.Call(n, 1)
		val = L.Get(-1)
		L.SetTop(top)
	case *lua.LTable:
		val = L.GetTable(r, ms.capture(0, s, e))
	}
	switch x := val.(type) {
	case *lua.LNilType:
		return append(b, ms.src[s:e]...)
	case lua.LBool:
		if !x {
			return append(b, ms.src[s:e]...)
		}
	case lua.LString, lua.LNumber:
		return append(b, luaToString(x)...)
	}
	luaError(L, "invalid replacement value (a %s)", val.Type().String())
	return b
}
