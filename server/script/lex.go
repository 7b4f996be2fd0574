package script

import (
	"fmt"
	"strings"
)

// A Lua 5.1 lexer, for a parser that gives Lua 5.1's syntax errors
// ("user_script:1: unexpected symbol near '+'") where gopher-lua's
// parser would say "syntax error", and Lua 5.1's numerals and string
// escapes.

// Tokens past the single characters (which are their own byte).
const (
	tkAnd = 257 + iota
	tkBreak
	tkDo
	tkElse
	tkElseif
	tkEnd
	tkFalse
	tkFor
	tkFunction
	tkIf
	tkIn
	tkLocal
	tkNil
	tkNot
	tkOr
	tkRepeat
	tkReturn
	tkThen
	tkTrue
	tkUntil
	tkWhile
	tkConcat
	tkDots
	tkEq
	tkGE
	tkLE
	tkNE
	tkNumber
	tkName
	tkString
	tkEOS
)

var reserved = map[string]int{
	"and": tkAnd, "break": tkBreak, "do": tkDo, "else": tkElse, "elseif": tkElseif,
	"end": tkEnd, "false": tkFalse, "for": tkFor, "function": tkFunction, "if": tkIf,
	"in": tkIn, "local": tkLocal, "nil": tkNil, "not": tkNot, "or": tkOr,
	"repeat": tkRepeat, "return": tkReturn, "then": tkThen, "true": tkTrue,
	"until": tkUntil, "while": tkWhile,
}

var tokenNames = map[int]string{
	tkConcat: "..", tkDots: "...", tkEq: "==", tkGE: ">=", tkLE: "<=", tkNE: "~=",
	tkNumber: "<number>", tkName: "<name>", tkString: "<string>", tkEOS: "<eof>",
}

func init() {
	for k, v := range reserved {
		tokenNames[v] = k
	}
}

type token struct {
	t    int
	s    string  // a name's or string's value
	n    float64 // a number's value
	raw  string  // the text as written (names, strings, numbers), for messages
	line int
}

// syntaxErr is a compile error with Lua's text.
type syntaxErr struct{ msg string }

func (e *syntaxErr) Error() string { return e.msg }

type lexer struct {
	src   string
	pos   int
	line  int
	chunk string // the chunk's display name
	buf   []byte // the current token's text
}

func (lx *lexer) cur() int {
	if lx.pos < len(lx.src) {
		return int(lx.src[lx.pos])
	}
	return -1
}

func (lx *lexer) peekAt(i int) int {
	if lx.pos+i < len(lx.src) {
		return int(lx.src[lx.pos+i])
	}
	return -1
}

// fail is luaX_lexerror: the message at the current line, near the
// token when there is one.
func (lx *lexer) fail(msg string, tok int, raw string) {
	m := fmt.Sprintf("%s:%d: %s", lx.chunk, lx.line, msg)
	if tok != 0 {
		m += " near '" + tokenText(tok, raw) + "'"
	}
	panic(&syntaxErr{m})
}

func tokenText(tok int, raw string) string {
	switch tok {
	case tkName, tkString, tkNumber:
		return raw
	}
	return tokenString(tok)
}

// tokenString is luaX_token2str.
func tokenString(tok int) string {
	if tok < 257 {
		if tok < 32 || tok == 127 {
			return fmt.Sprintf("char(%d)", tok)
		}
		return string([]byte{byte(tok)})
	}
	return tokenNames[tok]
}

func (lx *lexer) save(c int) { lx.buf = append(lx.buf, byte(c)) }

func (lx *lexer) saveNext() {
	lx.save(lx.cur())
	lx.pos++
}

func isNewline(c int) bool { return c == '\n' || c == '\r' }

// newline skips \n, \r, \n\r or \r\n.
func (lx *lexer) newline() {
	old := lx.cur()
	lx.pos++
	if c := lx.cur(); isNewline(c) && c != old {
		lx.pos++
	}
	lx.line++
}

func (lx *lexer) next() token {
	lx.buf = lx.buf[:0]
	for {
		c := lx.cur()
		switch {
		case c == -1:
			return token{t: tkEOS, line: lx.line}
		case isNewline(c):
			lx.newline()
		case c == ' ' || c == '\t' || c == '\v' || c == '\f':
			lx.pos++
		case c == '-':
			if lx.peekAt(1) != '-' {
				lx.pos++
				return token{t: '-', line: lx.line}
			}
			lx.pos += 2
			if lx.cur() == '[' {
				if sep := lx.skipSep(); sep >= 0 {
					lx.longString(false, sep)
					lx.buf = lx.buf[:0]
					continue
				}
				lx.buf = lx.buf[:0]
			}
			for lx.cur() != -1 && !isNewline(lx.cur()) {
				lx.pos++
			}
		case c == '[':
			sep := lx.skipSep()
			if sep >= 0 {
				s := lx.longString(true, sep)
				return token{t: tkString, s: s, raw: string(lx.buf), line: lx.line}
			}
			if sep != -1 {
				lx.fail("invalid long string delimiter", tkString, string(lx.buf))
			}
			return token{t: '[', line: lx.line}
		case c == '=' || c == '<' || c == '>' || c == '~':
			lx.pos++
			if lx.cur() != '=' {
				return token{t: c, line: lx.line}
			}
			lx.pos++
			return token{t: map[int]int{'=': tkEq, '<': tkLE, '>': tkGE, '~': tkNE}[c], line: lx.line}
		case c == '"' || c == '\'':
			s := lx.readString(c)
			return token{t: tkString, s: s, raw: string(lx.buf), line: lx.line}
		case c == '.':
			if lx.peekAt(1) == '.' {
				if lx.peekAt(2) == '.' {
					lx.pos += 3
					return token{t: tkDots, line: lx.line}
				}
				lx.pos += 2
				return token{t: tkConcat, line: lx.line}
			}
			if !isDigitI(lx.peekAt(1)) {
				lx.pos++
				return token{t: '.', line: lx.line}
			}
			return lx.readNumeral()
		case isDigitI(c):
			return lx.readNumeral()
		case c == '_' || isAlpha(byte(c)):
			start := lx.pos
			for c := lx.cur(); c == '_' || c >= 0 && (isAlpha(byte(c)) || isDigit(byte(c))); c = lx.cur() {
				lx.pos++
			}
			word := lx.src[start:lx.pos]
			if t, ok := reserved[word]; ok {
				return token{t: t, line: lx.line}
			}
			return token{t: tkName, s: word, raw: word, line: lx.line}
		default:
			lx.pos++
			return token{t: c, line: lx.line}
		}
	}
}

func isDigitI(c int) bool { return c >= '0' && c <= '9' }

// skipSep reads [=*[ or ]=*]: its level when the second bracket follows,
// else -1 - the number of '=' seen (so -1 means a lone bracket).
func (lx *lexer) skipSep() int {
	s := lx.cur()
	lx.saveNext()
	count := 0
	for lx.cur() == '=' {
		lx.saveNext()
		count++
	}
	if lx.cur() == s {
		return count
	}
	return -count - 1
}

func (lx *lexer) longString(isString bool, sep int) string {
	lx.saveNext() // the second [
	if isNewline(lx.cur()) {
		lx.newline()
	}
	for {
		switch c := lx.cur(); {
		case c == -1:
			msg := "unfinished long comment"
			if isString {
				msg = "unfinished long string"
			}
			lx.fail(msg, tkEOS, "")
		case c == '[':
			if lx.skipSep() == sep {
				lx.saveNext()
				if sep == 0 {
					lx.fail("nesting of [[...]] is deprecated", '[', "")
				}
			}
		case c == ']':
			if lx.skipSep() == sep {
				lx.saveNext()
				if !isString {
					return ""
				}
				raw := lx.buf
				return string(raw[2+sep : len(raw)-2-sep])
			}
		case isNewline(c):
			lx.save('\n')
			lx.newline()
			if !isString {
				lx.buf = lx.buf[:0]
			}
		default:
			if isString {
				lx.saveNext()
			} else {
				lx.pos++
			}
		}
	}
}

func (lx *lexer) readString(delim int) string {
	lx.saveNext()
	var val []byte
	for lx.cur() != delim {
		c := lx.cur()
		switch {
		case c == -1:
			lx.fail("unfinished string", tkEOS, "")
		case isNewline(c):
			lx.fail("unfinished string", tkString, string(lx.buf))
		case c == '\\':
			lx.saveNext()
			e := lx.cur()
			var out int
			switch e {
			case 'a':
				out = '\a'
			case 'b':
				out = '\b'
			case 'f':
				out = '\f'
			case 'n':
				out = '\n'
			case 'r':
				out = '\r'
			case 't':
				out = '\t'
			case 'v':
				out = '\v'
			case '\n', '\r':
				lx.save('\n')
				lx.newline()
				val = append(val, '\n')
				continue
			case -1:
				continue // the loop reports the unfinished string
			default:
				if !isDigitI(e) {
					lx.saveNext()
					val = append(val, byte(e))
					continue
				}
				n := 0
				for i := 0; i < 3 && isDigitI(lx.cur()); i++ {
					n = n*10 + lx.cur() - '0'
					lx.saveNext()
				}
				if n > 255 {
					lx.fail("escape sequence too large", tkString, string(lx.buf))
				}
				val = append(val, byte(n))
				continue
			}
			lx.saveNext()
			val = append(val, byte(out))
		default:
			lx.saveNext()
			val = append(val, byte(c))
		}
	}
	lx.saveNext()
	return string(val)
}

func (lx *lexer) readNumeral() token {
	for isDigitI(lx.cur()) || lx.cur() == '.' {
		lx.saveNext()
	}
	if c := lx.cur(); c == 'e' || c == 'E' {
		lx.saveNext()
		if c := lx.cur(); c == '+' || c == '-' {
			lx.saveNext()
		}
	}
	for c := lx.cur(); c == '_' || c >= 0 && (isAlpha(byte(c)) || isDigit(byte(c))); c = lx.cur() {
		lx.saveNext()
	}
	raw := string(lx.buf)
	f, ok := str2number(raw)
	if !ok || strings.IndexByte(raw, 0) >= 0 {
		lx.fail("malformed number", tkNumber, raw)
	}
	return token{t: tkNumber, n: f, raw: raw, line: lx.line}
}
