package script

import (
	"math"
	"strconv"
)

// C's printf %.Ng for a double, which Go's 'g' format matches digit for
// digit, except for infinities and NaNs, which glibc spells inf, -inf, nan
// and -nan (the sign of a NaN is its sign bit: 0/0 on x86 is -nan).
func formatG(f float64, prec int) string {
	var buf [32]byte // %.17g is at most 24 bytes: one allocation, the string's
	return string(appendG(buf[:0], f, prec))
}

func appendG(b []byte, f float64, prec int) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		if math.Signbit(f) {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', prec, 64)
}

// luaNumberString is Lua 5.1's number to string conversion (tostring,
// string coercion): LUAI_NUMFFORMAT, "%.14g".
func luaNumberString(f float64) string {
	if f == math.Trunc(f) && f > -1e14 && f < 1e14 {
		// The common case, integers of up to 14 digits, without the
		// general formatter. (-0 still goes below, to print "-0".)
		if f != 0 || !math.Signbit(f) {
			return strconv.FormatInt(int64(f), 10)
		}
	}
	return formatG(f, 14)
}

// argNumberString is how Redis 7.0 passes a Lua number to a command
// (luaArgsToRedisArgv): "%.17g".
func appendArgNumber(b []byte, f float64) []byte {
	if f == math.Trunc(f) && f >= -1e15 && f <= 1e15 && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	return appendG(b, f, 17)
}

// luaToInteger is C's (long long) cast of a double as Redis applies it to
// a script's number reply: truncation toward zero; NaN and values out of
// range become LLONG_MIN, as x86's cvttsd2si does.
func luaToInteger(f float64) int64 {
	if f != f || f >= 9223372036854775807 || f < -9223372036854775808 {
		return math.MinInt64
	}
	return int64(f)
}

// luaDoubleToInt is C's (int) cast of a double (an int assigned
// lua_tonumber's result): truncation, and INT_MIN when out of range or NaN
// (x86's cvttsd2si).
func luaDoubleToInt(f float64) int32 {
	if f != f || f >= 2147483648 || f <= -2147483649 {
		return math.MinInt32
	}
	return int32(f)
}

// luaCheckInt is luaL_checkint's conversion: the double cast to a 64-bit
// lua_Integer, then to int, which keeps the low 32 bits.
func luaCheckInt(f float64) int32 {
	return int32(luaToInteger(f))
}
