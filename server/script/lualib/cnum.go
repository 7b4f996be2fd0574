package lualib

import (
	"math"
	"math/bits"
	"strconv"

	lua "github.com/yuin/gopher-lua"
)

// This file is the C arithmetic the modules lean on, as it comes out on
// x86-64 with glibc: number <-> text as Lua 5.1 and cjson do it (strtod,
// "%.14g"), and the casts from double to integer, which C leaves
// undefined out of range and the hardware answers with its "integer
// indefinite" (the lowest integer).

const (
	two63 = 9223372036854775808.0
	two31 = 2147483648.0
)

// cInt64 is (int64_t)f as cvttsd2si computes it: truncation, and
// math.MinInt64 for NaN and out-of-range values.
func cInt64(f float64) int64 {
	if f != f || f >= two63 || f < -two63 {
		return math.MinInt64
	}
	return int64(f)
}

// cInt32 is (int)f likewise, with math.MinInt32 for what does not fit.
func cInt32(f float64) int32 {
	if f != f || f >= two31 || f <= -two31-1 {
		return math.MinInt32
	}
	return int32(f)
}

// cUint64 is (uint64_t)f as gcc compiles it for x86-64: values below 2^63
// (and NaN) through the signed conversion, the rest offset by 2^63.
func cUint64(f float64) uint64 {
	if f >= two63 {
		return uint64(cInt64(f-two63)) ^ (1 << 63)
	}
	return uint64(cInt64(f))
}

// formatNumber is Lua 5.1's number to string: "%.14g".
func formatNumber(f float64) string { return formatG(f, 14) }

// formatG is C's "%.<prec>g" (glibc: "inf", "-inf", "nan", "-nan").
func formatG(f float64, prec int) string {
	switch {
	case f != f:
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'g', prec, 64)
}

// toNumber is lua_tonumber: numbers, and strings that Lua 5.1's
// luaO_str2d reads whole as a number (strtod's syntax, surrounding
// white space allowed, the string read as a C string).
func toNumber(v lua.LValue) (float64, bool) {
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x), true
	case lua.LString:
		return str2d(string(x))
	}
	return 0, false
}

func str2d(s string) (float64, bool) {
	s = cString(s)
	f, n := strtod(s)
	if n == 0 {
		return 0, false
	}
	for ; n < len(s); n++ {
		if !isSpace(s[n]) {
			return 0, false
		}
	}
	return f, true
}

func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

func isHex(c byte) bool {
	return isDigit(c) || ((c|0x20) >= 'a' && (c|0x20) <= 'f')
}

// hasPrefixFold is strncasecmp(s, prefix, len(prefix)) == 0 for an ASCII
// lower-case prefix.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// strtod is glibc's strtod in the C locale: it returns the value of the
// longest prefix of s that is a number and that prefix's length (0 when
// there is none). It reads decimal and hexadecimal numbers (correctly
// rounded, overflow to infinity), "inf", "infinity" and "nan", "nan(...)"
// in any case, after optional white space and a sign.
func strtod(s string) (float64, int) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	rest := s[i:]
	var f float64
	var n int
	switch {
	case hasPrefixFold(rest, "inf"):
		f, n = math.Inf(1), 3
		if hasPrefixFold(rest, "infinity") {
			n = 8
		}
	case hasPrefixFold(rest, "nan"):
		f, n = nanPayload(rest)
	case len(rest) >= 2 && rest[0] == '0' && (rest[1]|0x20) == 'x':
		f, n = hexNumber(rest)
	default:
		f, n = decimalNumber(rest)
	}
	if n == 0 {
		return 0, 0
	}
	if neg {
		f = -f
	}
	return f, i + n
}

// nanPayload reads "nan" and an optional "(n-char-sequence)", whose value
// (as strtoull reads it in base 0) glibc puts in the NaN's mantissa.
func nanPayload(s string) (float64, int) {
	const quiet = 0x7ff8000000000000
	n := 3
	bits := uint64(quiet)
	if n < len(s) && s[n] == '(' {
		j := n + 1
		for j < len(s) && (isDigit(s[j]) || isAlpha(s[j]) || s[j] == '_') {
			j++
		}
		if j < len(s) && s[j] == ')' {
			if m, ok := strtoull0(s[n+1 : j]); ok {
				bits = quiet | m&(1<<51-1)
			}
			n = j + 1
		}
	}
	return math.Float64frombits(bits), n
}

// strtoull0 is strtoull(s, &end, 0) required to read all of s (no sign or
// space: s is alphanumeric); overflow saturates as strtoull does.
func strtoull0(s string) (uint64, bool) {
	base := 10
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1]|0x20) == 'x' && isHex(s[2]):
		base, s = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	if s == "" {
		return 0, false
	}
	var v uint64
	over := false
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		var d int
		switch {
		case isDigit(s[i]):
			d = int(s[i] - '0')
		case c >= 'a' && c <= 'z':
			d = int(c-'a') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		hi, lo := bits.Mul64(v, uint64(base))
		lo, carry := bits.Add64(lo, uint64(d), 0)
		if hi != 0 || carry != 0 {
			over = true
		}
		v = lo
	}
	if over {
		return math.MaxUint64, true
	}
	return v, true
}

// decimalNumber reads digits, an optional fraction and an optional
// exponent (taken only when it has digits).
func decimalNumber(s string) (float64, int) {
	i, digits := 0, 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, 0
	}
	i = exponent(s, i, 'e')
	f, err := strconv.ParseFloat(s[:i], 64)
	if err != nil && !isRange(err) {
		return 0, 0
	}
	return f, i
}

// hexNumber reads "0x" hex digits, an optional fraction and an optional
// binary exponent; with no hex digit only the "0" is a number.
func hexNumber(s string) (float64, int) {
	i, digits := 2, 0
	for i < len(s) && isHex(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isHex(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	if digits == 0 {
		return 0, 1
	}
	end := exponent(s, i, 'p')
	text := s[:end]
	if end == i {
		text += "p0"
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRange(err) {
		return 0, 0
	}
	return f, end
}

// exponent returns where a number ends after an optional exponent that
// starts at s[i] with letter (either case), a sign and digits.
func exponent(s string, i int, letter byte) int {
	if i >= len(s) || s[i]|0x20 != letter {
		return i
	}
	j := i + 1
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	if j >= len(s) || !isDigit(s[j]) {
		return i
	}
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	return j
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
