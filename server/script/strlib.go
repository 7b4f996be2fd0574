package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The string library as Lua 5.1's: numbers coerced to strings as %.14g,
// string.format as C's printf, Lua 5.1's argument handling and messages,
// and the allocations that could be large checked against the memory
// bound first. Pattern matching (find, match, gmatch, gsub) is
// gopher-lua's.

func (v *vm) installString() {
	L := v.L
	t := v.globals.RawGetString("string").(*lua.LTable)
	t.RawSetString("__index", lua.LNil)
	set := func(name string, fn lua.LGFunction) { t.RawSetString(name, L.NewFunction(fn)) }

	set("len", func(L *lua.LState) int {
		L.Push(num(len(checkString(L, 1))))
		return 1
	})
	set("sub", func(L *lua.LState) int {
		s := checkString(L, 1)
		l := int64(len(s))
		i := posrelat(checkInteger(L, 2), l)
		j := posrelat(optInteger(L, 3, -1), l)
		if i < 1 {
			i = 1
		}
		if j > l {
			j = l
		}
		if i <= j {
			L.Push(lua.LString(s[i-1 : j]))
		} else {
			L.Push(lua.LString(""))
		}
		return 1
	})
	mapBytes := func(f func(byte) byte) lua.LGFunction {
		return func(L *lua.LState) int {
			s := checkString(L, 1)
			if !v.charge(int64(len(s))) {
				v.noMemory()
			}
			b := []byte(s)
			for i, c := range b {
				b[i] = f(c)
			}
			L.Push(lua.LString(b))
			return 1
		}
	}
	set("upper", mapBytes(func(c byte) byte {
		if c >= 'a' && c <= 'z' {
			return c - 32
		}
		return c
	}))
	set("lower", mapBytes(func(c byte) byte {
		if c >= 'A' && c <= 'Z' {
			return c + 32
		}
		return c
	}))
	set("reverse", func(L *lua.LState) int {
		s := checkString(L, 1)
		if !v.charge(int64(len(s))) {
			v.noMemory()
		}
		b := make([]byte, len(s))
		for i := range b {
			b[i] = s[len(s)-1-i]
		}
		L.Push(lua.LString(b))
		return 1
	})
	set("rep", func(L *lua.LState) int {
		s := checkString(L, 1)
		n := checkInt(L, 2)
		if n <= 0 || len(s) == 0 {
			L.Push(lua.LString(""))
			return 1
		}
		size := int64(len(s)) * int64(n)
		if !v.charge(size) {
			v.noMemory()
		}
		L.Push(lua.LString(strings.Repeat(s, int(n))))
		return 1
	})
	set("byte", func(L *lua.LState) int {
		s := checkString(L, 1)
		l := int64(len(s))
		i := posrelat(optInteger(L, 2, 1), l)
		j := posrelat(optInteger(L, 3, i), l)
		if i <= 0 {
			i = 1
		}
		if j > l {
			j = l
		}
		if i > j {
			return 0
		}
		n := j - i + 1
		if n+int64(L.GetTop()) > maxCStack {
			luaError(L, "stack overflow (string slice too long)")
		}
		for k := i; k <= j; k++ {
			L.Push(num(s[k-1]))
		}
		return int(n)
	})
	set("char", func(L *lua.LState) int {
		n := L.GetTop()
		b := make([]byte, n)
		for i := 1; i <= n; i++ {
			c := checkInt(L, i)
			if c < 0 || c > 255 {
				argError(L, i, "invalid value")
			}
			b[i-1] = byte(c)
		}
		L.Push(lua.LString(b))
		return 1
	})
	set("dump", func(L *lua.LState) int {
		if L.Get(1).Type() != lua.LTFunction {
			typeError(L, 1, "function")
		}
		luaError(L, "unable to dump given function")
		return 0
	})
	set("format", v.strFormat)

	set("find", v.strFind(true))
	set("match", v.strFind(false))
	set("gsub", v.strGsub)
	gmatch := L.NewFunction(v.strGmatch)
	t.RawSetString("gmatch", gmatch)
	t.RawSetString("gfind", gmatch)
}

// posrelat is Lua 5.1's relative string position: negative counts from
// the end.
func posrelat(pos, l int64) int64 {
	if pos < 0 {
		return l + pos + 1
	}
	return pos
}

// strFormat is Lua 5.1's string.format over C's sprintf.
func (v *vm) strFormat(L *lua.LState) int {
	f := checkString(L, 1)
	arg := 1
	var b []byte
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '%' {
			b = append(b, c)
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			b = append(b, '%')
			continue
		}
		arg++
		if arg > L.GetTop() {
			argError(L, arg, "no value")
		}
		// scanformat: flags, width (2 digits), precision (2 digits).
		start := i
		for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
			i++
		}
		if i-start >= 6 {
			luaError(L, "invalid format (repeated flags)")
		}
		flags := f[start:i]
		w := i
		for k := 0; k < 2 && i < len(f) && isDigit(f[i]); k++ {
			i++
		}
		width := f[w:i]
		prec := ""
		hasPrec := false
		if i < len(f) && f[i] == '.' {
			hasPrec = true
			i++
			p := i
			for k := 0; k < 2 && i < len(f) && isDigit(f[i]); k++ {
				i++
			}
			prec = f[p:i]
		}
		if i < len(f) && isDigit(f[i]) {
			luaError(L, "invalid format (width or precision too long)")
		}
		var conv byte
		if i < len(f) {
			conv = f[i]
		}
		spec := cSpec{flags: flags, hasPrec: hasPrec}
		spec.width, _ = strconv.Atoi(width)
		spec.prec, _ = strconv.Atoi(prec)
		switch conv {
		case 'c':
			ch := byte(luaDoubleToInt(checkNumber(L, arg)))
			if ch != 0 {
				// sprintf's result is read as a C string: a NUL adds
				// nothing.
				b = spec.pad(b, []byte{ch})
			} else if spec.width > 1 {
				// the padding before the NUL survives
				if strings.IndexByte(flags, '-') < 0 {
					b = append(b, strings.Repeat(" ", spec.width-1)...)
				}
			}
		case 'd', 'i':
			n := luaToInteger(checkNumber(L, arg))
			b = spec.formatInt(b, n < 0, absU(n), 10, false)
		case 'o', 'u', 'x', 'X':
			n := doubleToUint64(checkNumber(L, arg))
			base := map[byte]int{'o': 8, 'u': 10, 'x': 16, 'X': 16}[conv]
			b = spec.formatUnsigned(b, n, base, conv == 'X')
		case 'e', 'E', 'f', 'g', 'G':
			b = spec.formatFloat(b, checkNumber(L, arg), conv)
		case 'q':
			s := checkString(L, arg)
			b = append(b, '"')
			for k := 0; k < len(s); k++ {
				switch ch := s[k]; ch {
				case '"', '\\', '\n':
					b = append(b, '\\', ch)
				case '\r':
					b = append(b, `\r`...)
				case 0:
					b = append(b, `\000`...)
				default:
					b = append(b, ch)
				}
			}
			b = append(b, '"')
		case 's':
			s := checkString(L, arg)
			if !hasPrec && len(s) >= 100 {
				b = append(b, s...)
				break
			}
			// sprintf reads a C string.
			if k := strings.IndexByte(s, 0); k >= 0 {
				s = s[:k]
			}
			if hasPrec && spec.prec < len(s) {
				s = s[:spec.prec]
			}
			b = spec.pad(b, []byte(s))
		default:
			if conv == 0 {
				luaError(L, "invalid option '%%' to 'format'")
			}
			luaError(L, "invalid option '%%%c' to 'format'", conv)
		}
		if len(b) > chargeCheck && !v.charge(int64(len(b))) {
			v.noMemory()
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func absU(n int64) uint64 {
	if n < 0 {
		return uint64(-n)
	}
	return uint64(n)
}

// doubleToUint64 is x86-64's (unsigned long) cast of a double as gcc
// compiles it.
func doubleToUint64(f float64) uint64 {
	if !(f >= 9223372036854775808.0) { // NaN takes this branch too
		return uint64(luaToInteger(f))
	}
	return uint64(luaToInteger(f-9223372036854775808.0)) ^ 1<<63
}

// cSpec is one printf conversion's flags, width and precision.
type cSpec struct {
	flags   string
	width   int
	prec    int
	hasPrec bool
}

func (s cSpec) has(c byte) bool { return strings.IndexByte(s.flags, c) >= 0 }

// pad pads body to the width: spaces on the left, or on the right with
// '-'.
func (s cSpec) pad(b, body []byte) []byte {
	n := s.width - len(body)
	if n <= 0 {
		return append(b, body...)
	}
	if s.has('-') {
		b = append(b, body...)
		return append(b, strings.Repeat(" ", n)...)
	}
	b = append(b, strings.Repeat(" ", n)...)
	return append(b, body...)
}

// number lays out sign/prefix and digits with the width: zeros between
// them with '0' (when allowed), else spaces.
func (s cSpec) number(b []byte, prefix, digits string, zeroOK bool) []byte {
	n := s.width - len(prefix) - len(digits)
	if n <= 0 {
		b = append(b, prefix...)
		return append(b, digits...)
	}
	switch {
	case s.has('-'):
		b = append(b, prefix...)
		b = append(b, digits...)
		return append(b, strings.Repeat(" ", n)...)
	case s.has('0') && zeroOK:
		b = append(b, prefix...)
		b = append(b, strings.Repeat("0", n)...)
		return append(b, digits...)
	}
	b = append(b, strings.Repeat(" ", n)...)
	b = append(b, prefix...)
	return append(b, digits...)
}

func (s cSpec) formatInt(b []byte, neg bool, u uint64, base int, upper bool) []byte {
	digits := strconv.FormatUint(u, base)
	if s.hasPrec {
		if s.prec == 0 && u == 0 {
			digits = ""
		}
		for len(digits) < s.prec {
			digits = "0" + digits
		}
	}
	prefix := ""
	switch {
	case neg:
		prefix = "-"
	case s.has('+'):
		prefix = "+"
	case s.has(' '):
		prefix = " "
	}
	return s.number(b, prefix, digits, !s.hasPrec)
}

func (s cSpec) formatUnsigned(b []byte, u uint64, base int, upper bool) []byte {
	digits := strconv.FormatUint(u, base)
	if upper {
		digits = strings.ToUpper(digits)
	}
	if s.hasPrec {
		if s.prec == 0 && u == 0 {
			digits = ""
		}
		for len(digits) < s.prec {
			digits = "0" + digits
		}
	}
	prefix := ""
	if s.has('#') {
		switch {
		case base == 8 && (len(digits) == 0 || digits[0] != '0'):
			digits = "0" + digits
		case base == 16 && u != 0:
			prefix = "0x"
			if upper {
				prefix = "0X"
			}
		}
	}
	return s.number(b, prefix, digits, !s.hasPrec)
}

func (s cSpec) formatFloat(b []byte, f float64, conv byte) []byte {
	prefix := ""
	if math.Signbit(f) && !math.IsNaN(f) || math.IsNaN(f) && math.Signbit(f) {
		prefix = "-"
	} else if s.has('+') {
		prefix = "+"
	} else if s.has(' ') {
		prefix = " "
	}
	upper := conv == 'E' || conv == 'G'
	a := math.Abs(f)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		body := "inf"
		if math.IsNaN(f) {
			body = "nan"
		}
		if upper {
			body = strings.ToUpper(body)
		}
		return s.number(b, prefix, body, false)
	}
	prec := 6
	if s.hasPrec {
		prec = s.prec
	}
	var digits string
	switch conv {
	case 'f':
		digits = strconv.FormatFloat(a, 'f', prec, 64)
		if s.has('#') && prec == 0 {
			digits += "."
		}
	case 'e', 'E':
		digits = strconv.FormatFloat(a, 'e', prec, 64)
		if s.has('#') && prec == 0 {
			digits = strings.Replace(digits, "e", ".e", 1)
		}
	case 'g', 'G':
		if prec == 0 {
			prec = 1
		}
		digits = strconv.FormatFloat(a, 'g', prec, 64)
		if s.has('#') {
			digits = keepTrailingZeros(a, prec)
		}
	}
	if upper {
		digits = strings.ToUpper(digits)
	}
	return s.number(b, prefix, digits, true)
}

// keepTrailingZeros is %#.Ng: %g's choice of notation, without removing
// trailing zeros, always with a point.
func keepTrailingZeros(a float64, prec int) string {
	e := strconv.FormatFloat(a, 'e', prec-1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	var out string
	if exp < -4 || exp >= prec {
		out = e
		if !strings.Contains(out, ".") {
			out = strings.Replace(out, "e", ".e", 1)
		}
	} else {
		out = strconv.FormatFloat(a, 'f', prec-1-exp, 64)
		if !strings.Contains(out, ".") {
			out += "."
		}
	}
	return out
}
