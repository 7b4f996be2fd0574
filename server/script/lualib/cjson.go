package lualib

import (
	"fmt"
	"math"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// cjson is Lua CJSON 2.1.0 as Redis 7.0 ships it.
//
// Encoding: a table is an array when all its keys are positive integers
// (holes become null) unless it is "excessively sparse" (see
// encode_sparse_array; by default an error), otherwise an object, whose
// number keys are written as strings; {} is "{}". Numbers are "%.14g"
// (encode_number_precision), NaN and infinity an error unless
// encode_invalid_numbers allows them; strings escape '"', '\', '/',
// control bytes and DEL, and pass other bytes through untouched. Nesting
// past encode_max_depth (1000) is an error, so cycles fail cleanly.
//
// Decoding is strtod's idea of numbers (with decode_invalid_numbers, on
// by default: hex, leading zeros, '+', inf and nan too), \uXXXX escapes
// (surrogate pairs joined) to UTF-8, JSON null to cjson.null, nesting
// limited by decode_max_depth (1000). The text is read as a C string: a
// NUL byte ends it.

const (
	jsonObjBegin = iota
	jsonObjEnd
	jsonArrBegin
	jsonArrEnd
	jsonString
	jsonNumber
	jsonBoolean
	jsonNull
	jsonColon
	jsonComma
	jsonEnd
	jsonWhitespace
	jsonError
	jsonUnknown
)

var jsonTokenNames = [...]string{
	"T_OBJ_BEGIN", "T_OBJ_END", "T_ARR_BEGIN", "T_ARR_END", "T_STRING",
	"T_NUMBER", "T_BOOLEAN", "T_NULL", "T_COLON", "T_COMMA", "T_END",
	"T_WHITESPACE", "T_ERROR", "T_UNKNOWN",
}

var jsonCharToken [256]int8

// jsonEscape is how each byte is written inside a JSON string ("" for as
// itself).
var jsonEscape [256]string

// jsonUnescape is what the byte after a backslash stands for (0 for an
// invalid escape, 'u' for a \uXXXX escape).
var jsonUnescape [256]byte

func init() {
	for i := range jsonCharToken {
		jsonCharToken[i] = jsonError
	}
	for c, t := range map[byte]int8{
		'{': jsonObjBegin, '}': jsonObjEnd, '[': jsonArrBegin, ']': jsonArrEnd,
		',': jsonComma, ':': jsonColon, 0: jsonEnd,
		' ': jsonWhitespace, '\t': jsonWhitespace, '\n': jsonWhitespace, '\r': jsonWhitespace,
	} {
		jsonCharToken[c] = t
	}
	for _, c := range []byte("fiInNt\"+-0123456789") {
		jsonCharToken[c] = jsonUnknown
	}

	const hex = "0123456789abcdef"
	for c := 0; c < 0x20; c++ {
		jsonEscape[c] = "\\u00" + string(hex[c>>4]) + string(hex[c&15])
	}
	jsonEscape['\b'] = `\b`
	jsonEscape['\t'] = `\t`
	jsonEscape['\n'] = `\n`
	jsonEscape['\f'] = `\f`
	jsonEscape['\r'] = `\r`
	jsonEscape['"'] = `\"`
	jsonEscape['\\'] = `\\`
	jsonEscape['/'] = `\/`
	jsonEscape[0x7f] = `\u007f`

	for _, p := range [][2]byte{
		{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'}, {'t', '\t'},
		{'n', '\n'}, {'f', '\f'}, {'r', '\r'}, {'u', 'u'},
	} {
		jsonUnescape[p[0]] = p[1]
	}
}

// cjsonConfig is one cjson table's settings (per Lua state in Redis, so
// a script's cjson.encode_max_depth(n) lasts until SCRIPT FLUSH).
type cjsonConfig struct {
	sparseConvert  int
	sparseRatio    int32
	sparseSafe     int32
	encodeMaxDepth int32
	decodeMaxDepth int32
	encodeInvalid  int // 0 off, 1 on, 2 "null"
	decodeInvalid  int
	precision      int32
	keepBuffer     int
}

func defaultCJSONConfig() *cjsonConfig {
	return &cjsonConfig{
		sparseRatio:    2,
		sparseSafe:     10,
		encodeMaxDepth: 1000,
		decodeMaxDepth: 1000,
		decodeInvalid:  1,
		precision:      14,
		keepBuffer:     1,
	}
}

func newCJSON(L *lua.LState, null *lua.LUserData) *lua.LTable {
	cfg := defaultCJSONConfig()
	t := register(L, map[string]lua.LGFunction{
		"encode": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				argError(L, 1, "expected 1 argument")
			}
			e := jsonEncoder{L: L, cfg: cfg, null: null, buf: make([]byte, 0, 64)}
			e.value(L.Get(1), 0, 1)
			L.Push(lua.LString(e.buf))
			return 1
		},
		"decode": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				argError(L, 1, "expected 1 argument")
			}
			L.Push(jsonDecode(L, cfg, null, checkLString(L, 1)))
			return 1
		},
		"encode_sparse_array": func(L *lua.LState) int {
			cfgArgs(L, 3)
			enumOption(L, 1, &cfg.sparseConvert, nil)
			integerOption(L, 2, &cfg.sparseRatio, 0, math.MaxInt32)
			integerOption(L, 3, &cfg.sparseSafe, 0, math.MaxInt32)
			return 3
		},
		"encode_max_depth": func(L *lua.LState) int {
			cfgArgs(L, 1)
			return integerOption(L, 1, &cfg.encodeMaxDepth, 1, math.MaxInt32)
		},
		"decode_max_depth": func(L *lua.LState) int {
			cfgArgs(L, 1)
			return integerOption(L, 1, &cfg.decodeMaxDepth, 1, math.MaxInt32)
		},
		"encode_number_precision": func(L *lua.LState) int {
			cfgArgs(L, 1)
			return integerOption(L, 1, &cfg.precision, 1, 14)
		},
		"encode_keep_buffer": func(L *lua.LState) int {
			// Only how C reuses its buffer; the output is the same.
			cfgArgs(L, 1)
			return enumOption(L, 1, &cfg.keepBuffer, nil)
		},
		"encode_invalid_numbers": func(L *lua.LState) int {
			cfgArgs(L, 1)
			return enumOption(L, 1, &cfg.encodeInvalid, []string{"off", "on", "null"})
		},
		"decode_invalid_numbers": func(L *lua.LState) int {
			cfgArgs(L, 1)
			return enumOption(L, 1, &cfg.decodeInvalid, nil)
		},
		"new": func(L *lua.LState) int {
			L.Push(newCJSON(L, null))
			return 1
		},
	})
	t.RawSetString("null", null)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	return t
}

// cfgArgs is json_arg_init: at most n arguments, padded with nils so
// that what the option functions push comes after them.
func cfgArgs(L *lua.LState, n int) {
	if L.GetTop() > n {
		argError(L, n+1, "found too many arguments")
	}
	for L.GetTop() < n {
		L.Push(lua.LNil)
	}
}

// integerOption sets *setting from argument idx unless it is nil, and
// returns the setting. (The range error names argument 1 whichever
// argument it is, as cjson does.)
func integerOption(L *lua.LState, idx int, setting *int32, min, max int32) int {
	if L.Get(idx) != lua.LNil {
		v := int32(checkInteger(L, idx))
		if v < min || v > max {
			argError(L, 1, fmt.Sprintf("expected integer between %d and %d", min, max))
		}
		*setting = v
	}
	L.Push(lua.LNumber(*setting))
	return 1
}

// enumOption sets *setting from argument idx (a boolean, or one of
// options by name, "off"/"on" when options is nil) unless it is nil, and
// returns it: as a boolean when it is off or on, else by name.
func enumOption(L *lua.LState, idx int, setting *int, options []string) int {
	if options == nil {
		options = []string{"off", "on"}
	}
	switch v := L.Get(idx).(type) {
	case *lua.LNilType:
	case lua.LBool:
		*setting = 0
		if v {
			*setting = 1
		}
	default:
		name := checkCString(L, idx)
		found := false
		for i, o := range options {
			if o == name {
				*setting, found = i, true
				break
			}
		}
		if !found {
			argError(L, idx, "invalid option '"+name+"'")
		}
	}
	if *setting <= 1 {
		L.Push(lua.LBool(*setting == 1))
	} else {
		L.Push(lua.LString(options[*setting]))
	}
	return 1
}

type jsonEncoder struct {
	L    *lua.LState
	cfg  *cjsonConfig
	null *lua.LUserData
	buf  []byte
}

func (e *jsonEncoder) fail(v lua.LValue, reason string) {
	raise(e.L, "Cannot serialise %s: %s", v.Type().String(), reason)
}

// value appends v, which sits at stack slot top, at nesting depth.
func (e *jsonEncoder) value(v lua.LValue, depth int32, top int) {
	switch x := v.(type) {
	case lua.LString:
		e.string(string(x))
	case lua.LNumber:
		e.number(x)
	case lua.LBool:
		if x {
			e.buf = append(e.buf, "true"...)
		} else {
			e.buf = append(e.buf, "false"...)
		}
	case *lua.LTable:
		depth++
		if depth > e.cfg.encodeMaxDepth || top+3 > maxCStack {
			raise(e.L, "Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := e.arrayLength(x); n > 0 {
			e.array(x, n, depth, top)
		} else {
			e.object(x, depth, top)
		}
	case *lua.LNilType:
		e.buf = append(e.buf, "null"...)
	default:
		if x == e.null || IsNull(x) {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.fail(v, "type not supported")
	}
}

func (e *jsonEncoder) string(s string) {
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		if esc := jsonEscape[s[i]]; esc != "" {
			e.buf = append(e.buf, s[start:i]...)
			e.buf = append(e.buf, esc...)
			start = i + 1
		}
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
}

func (e *jsonEncoder) number(n lua.LNumber) {
	f := float64(n)
	invalid := f != f || math.IsInf(f, 0)
	switch e.cfg.encodeInvalid {
	case 0:
		if invalid {
			e.fail(n, "must not be NaN or Inf")
		}
	case 1:
		if f != f {
			e.buf = append(e.buf, "nan"...)
			return
		}
	default:
		if invalid {
			e.buf = append(e.buf, "null"...)
			return
		}
	}
	e.buf = append(e.buf, formatG(f, int(e.cfg.precision))...)
}

// arrayLength is lua_array_length: the array's length when every key is
// a positive integer (the largest, as C int), else -1; or the
// excessively sparse error. The running maximum converts as C converts
// it, so keys past 2^31 make an object.
func (e *jsonEncoder) arrayLength(t *lua.LTable) int32 {
	max, items := int32(0), int32(0)
	array := true
	forEach(t, func(k, _ lua.LValue) bool {
		if n, ok := k.(lua.LNumber); ok && n != 0 {
			f := float64(n)
			if math.Floor(f) == f && f >= 1 {
				if f > float64(max) {
					max = cInt32(f)
				}
				items++
				return true
			}
		}
		array = false
		return false
	})
	if !array {
		return -1
	}
	c := e.cfg
	if c.sparseRatio > 0 && max > items*c.sparseRatio && max > c.sparseSafe {
		if c.sparseConvert == 0 {
			e.fail(t, "excessively sparse array")
		}
		return -1
	}
	return max
}

func (e *jsonEncoder) array(t *lua.LTable, n, depth int32, top int) {
	e.buf = append(e.buf, '[')
	for i := int32(1); i <= n; i++ {
		if i > 1 {
			e.buf = append(e.buf, ',')
		}
		e.value(t.RawGet(lua.LNumber(i)), depth, top+1)
	}
	e.buf = append(e.buf, ']')
}

func (e *jsonEncoder) object(t *lua.LTable, depth int32, top int) {
	e.buf = append(e.buf, '{')
	first := true
	forEach(t, func(k, v lua.LValue) bool {
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		switch x := k.(type) {
		case lua.LNumber:
			e.buf = append(e.buf, '"')
			e.number(x)
			e.buf = append(e.buf, '"', ':')
		case lua.LString:
			e.string(string(x))
			e.buf = append(e.buf, ':')
		default:
			e.fail(k, "table key must be a number or string")
		}
		e.value(v, depth, top+2)
		return true
	})
	e.buf = append(e.buf, '}')
}

type jsonToken struct {
	typ   int
	index int
	str   string
	num   float64
	b     bool
	err   string
}

type jsonDecoder struct {
	L     *lua.LState
	cfg   *cjsonConfig
	null  *lua.LUserData
	data  string
	pos   int
	depth int32
	top   int // Lua stack slots the C decoder would be using
	tmp   []byte
}

func jsonDecode(L *lua.LState, cfg *cjsonConfig, null *lua.LUserData, data string) lua.LValue {
	if len(data) >= 2 && (data[0] == 0 || data[1] == 0) {
		raise(L, "JSON parser does not support UTF-16 or UTF-32")
	}
	d := &jsonDecoder{L: L, cfg: cfg, null: null, data: data, top: 1}
	var tok jsonToken
	d.next(&tok)
	v := d.value(&tok)
	d.next(&tok)
	if tok.typ != jsonEnd {
		d.throw("the end", &tok)
	}
	return v
}

// at is the byte at i, as a C string reads it (NUL past the end).
func (d *jsonDecoder) at(i int) byte {
	if i < len(d.data) {
		return d.data[i]
	}
	return 0
}

func (d *jsonDecoder) tokenError(tok *jsonToken, msg string) {
	tok.typ, tok.index, tok.err = jsonError, d.pos, msg
}

func (d *jsonDecoder) next(tok *jsonToken) {
	var c byte
	for {
		c = d.at(d.pos)
		tok.typ = int(jsonCharToken[c])
		if tok.typ != jsonWhitespace {
			break
		}
		d.pos++
	}
	tok.index = d.pos
	switch tok.typ {
	case jsonError:
		d.tokenError(tok, "invalid token")
		return
	case jsonEnd:
		return
	case jsonUnknown:
	default:
		d.pos++
		return
	}
	rest := d.data[d.pos:]
	switch {
	case c == '"':
		d.string(tok)
	case c == '-' || isDigit(c):
		if d.cfg.decodeInvalid == 0 && d.invalidNumber() {
			d.tokenError(tok, "invalid number")
			return
		}
		d.number(tok)
	case len(rest) >= 4 && rest[:4] == "true":
		tok.typ, tok.b = jsonBoolean, true
		d.pos += 4
	case len(rest) >= 5 && rest[:5] == "false":
		tok.typ, tok.b = jsonBoolean, false
		d.pos += 5
	case len(rest) >= 4 && rest[:4] == "null":
		tok.typ = jsonNull
		d.pos += 4
	case d.cfg.decodeInvalid != 0 && d.invalidNumber():
		d.number(tok)
	default:
		d.tokenError(tok, "invalid token")
	}
}

// invalidNumber is json_is_invalid_number: what strtod takes but strict
// JSON does not (a '+', hex, leading zeros, inf, nan).
func (d *jsonDecoder) invalidNumber() bool {
	p := d.pos
	if d.at(p) == '+' {
		return true
	}
	if d.at(p) == '-' {
		p++
	}
	if c := d.at(p); c == '0' {
		c2 := d.at(p + 1)
		return c2|0x20 == 'x' || isDigit(c2)
	} else if c <= '9' {
		return false
	}
	rest := d.data[p:]
	return hasPrefixFold(rest, "inf") || hasPrefixFold(rest, "nan")
}

func (d *jsonDecoder) number(tok *jsonToken) {
	f, n := strtod(d.data[d.pos:])
	if n == 0 {
		d.tokenError(tok, "invalid number")
		return
	}
	tok.typ, tok.num = jsonNumber, f
	d.pos += n
}

func (d *jsonDecoder) string(tok *jsonToken) {
	d.pos++ // the opening quote
	d.tmp = d.tmp[:0]
	for {
		c := d.at(d.pos)
		if c == '"' {
			break
		}
		if c == 0 {
			d.tokenError(tok, "unexpected end of string")
			return
		}
		if c == '\\' {
			c = jsonUnescape[d.at(d.pos+1)]
			if c == 'u' {
				if d.unicodeEscape() {
					continue
				}
				d.tokenError(tok, "invalid unicode escape code")
				return
			}
			if c == 0 {
				d.tokenError(tok, "invalid escape code")
				return
			}
			d.pos++
		}
		d.tmp = append(d.tmp, c)
		d.pos++
	}
	d.pos++ // the closing quote
	tok.typ, tok.str = jsonString, string(d.tmp)
}

func (d *jsonDecoder) hex4(at int) int {
	v := 0
	for i := 0; i < 4; i++ {
		c := d.at(at + i)
		var x int
		switch {
		case isDigit(c):
			x = int(c - '0')
		case c|0x20 >= 'a' && c|0x20 <= 'f':
			x = int(c|0x20-'a') + 10
		default:
			return -1
		}
		v = v<<4 | x
	}
	return v
}

// unicodeEscape appends the UTF-8 of the \uXXXX escape (or surrogate
// pair) at pos and moves past it.
func (d *jsonDecoder) unicodeEscape() bool {
	cp := d.hex4(d.pos + 2)
	if cp < 0 {
		return false
	}
	n := 6
	if cp&0xF800 == 0xD800 {
		if cp&0x400 != 0 {
			return false // a low surrogate first
		}
		if d.at(d.pos+6) != '\\' || d.at(d.pos+7) != 'u' {
			return false
		}
		low := d.hex4(d.pos + 8)
		if low < 0 || low&0xFC00 != 0xDC00 {
			return false
		}
		cp = (cp&0x3FF)<<10 | low&0x3FF + 0x10000
		n = 12
	}
	d.tmp = utf8.AppendRune(d.tmp, rune(cp))
	d.pos += n
	return true
}

func (d *jsonDecoder) throw(expected string, tok *jsonToken) {
	found := jsonTokenNames[tok.typ]
	if tok.typ == jsonError {
		found = tok.err
	}
	raise(d.L, "Expected %s but found %s at character %d", expected, found, tok.index+1)
}

// descend enters an array or object, which needs slots stack slots.
func (d *jsonDecoder) descend(slots int) {
	d.depth++
	if d.depth > d.cfg.decodeMaxDepth || d.top+slots > maxCStack {
		raise(d.L, "Found too many nested data structures (%d) at character %d", d.depth, d.pos)
	}
}

func (d *jsonDecoder) value(tok *jsonToken) lua.LValue {
	switch tok.typ {
	case jsonString:
		return lua.LString(tok.str)
	case jsonNumber:
		return lua.LNumber(tok.num)
	case jsonBoolean:
		return lua.LBool(tok.b)
	case jsonObjBegin:
		return d.object()
	case jsonArrBegin:
		return d.array()
	case jsonNull:
		return d.null
	}
	d.throw("value", tok)
	return nil
}

func (d *jsonDecoder) object() lua.LValue {
	d.descend(3)
	t := d.L.CreateTable(0, 0)
	top := d.top
	d.top += 2 // the table and a key
	var tok jsonToken
	d.next(&tok)
	if tok.typ == jsonObjEnd {
		d.depth--
		d.top = top
		return t
	}
	for {
		if tok.typ != jsonString {
			d.throw("object key string", &tok)
		}
		key := tok.str
		d.next(&tok)
		if tok.typ != jsonColon {
			d.throw("colon", &tok)
		}
		d.next(&tok)
		t.RawSetString(key, d.value(&tok))
		d.next(&tok)
		if tok.typ == jsonObjEnd {
			d.depth--
			d.top = top
			return t
		}
		if tok.typ != jsonComma {
			d.throw("comma or object end", &tok)
		}
		d.next(&tok)
	}
}

func (d *jsonDecoder) array() lua.LValue {
	d.descend(2)
	t := d.L.CreateTable(0, 0)
	top := d.top
	d.top++ // the table
	var tok jsonToken
	d.next(&tok)
	if tok.typ == jsonArrEnd {
		d.depth--
		d.top = top
		return t
	}
	for i := 1; ; i++ {
		t.RawSetInt(i, d.value(&tok))
		d.next(&tok)
		if tok.typ == jsonArrEnd {
			d.depth--
			d.top = top
			return t
		}
		if tok.typ != jsonComma {
			d.throw("comma or array end", &tok)
		}
		d.next(&tok)
	}
}
