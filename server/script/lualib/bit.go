package lualib

import (
	"math"
	"math/bits"

	lua "github.com/yuin/gopher-lua"
)

// bit is LuaBitOp 1.0 as Redis builds it: 32-bit operations on Lua's
// doubles. An argument becomes 32 bits by adding 2^52+2^51 to it and
// keeping the low word of the sum's representation, which rounds it to
// the nearest integer (ties to even) and wraps it modulo 2^32 for any
// magnitude below 2^51 (beyond, the low word of the rounded sum, as in
// C); results come back as signed 32-bit numbers.

func newBit(L *lua.LState) *lua.LTable {
	unary := func(op func(uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int { return pushBits(L, op(bitArg(L, 1))) }
	}
	fold := func(op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1)
			// LuaBitOp folds from the last argument down, so a bad
			// argument is reported from the right.
			for i := L.GetTop(); i > 1; i-- {
				b = op(b, bitArg(L, i))
			}
			return pushBits(L, b)
		}
	}
	shift := func(op func(b uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1)
			n := uint(bitArg(L, 2) & 31)
			return pushBits(L, op(b, n))
		}
	}
	return register(L, map[string]lua.LGFunction{
		"tobit": unary(func(b uint32) uint32 { return b }),
		"bnot":  unary(func(b uint32) uint32 { return ^b }),
		"bswap": unary(bits.ReverseBytes32),
		"band":  fold(func(a, b uint32) uint32 { return a & b }),
		"bor":   fold(func(a, b uint32) uint32 { return a | b }),
		"bxor":  fold(func(a, b uint32) uint32 { return a ^ b }),
		"lshift": shift(func(b uint32, n uint) uint32 {
			return b << n
		}),
		"rshift": shift(func(b uint32, n uint) uint32 {
			return b >> n
		}),
		"arshift": shift(func(b uint32, n uint) uint32 {
			return uint32(int32(b) >> n)
		}),
		"rol": shift(func(b uint32, n uint) uint32 {
			return bits.RotateLeft32(b, int(n))
		}),
		"ror": shift(func(b uint32, n uint) uint32 {
			return bits.RotateLeft32(b, -int(n))
		}),
		"tohex": bitToHex,
	})
}

// bitArg is LuaBitOp's barg: lua_tonumber of argument n normalised to 32
// bits. As in Lua 5.1 builds, only a zero result is checked, so a
// non-number fails as "number expected" while any number passes.
func bitArg(L *lua.LState, n int) uint32 {
	f, ok := toNumber(L.Get(n))
	b := uint32(math.Float64bits(f + 6755399441055744.0))
	if b == 0 && !ok {
		typeError(L, n, "number")
	}
	return b
}

func pushBits(L *lua.LState, b uint32) int {
	L.Push(lua.LNumber(int32(b)))
	return 1
}

// bitToHex is bit.tohex(x [, n]): the low n hex digits of x (8 by
// default, at most 8), upper-case for a negative n.
func bitToHex(L *lua.LState) int {
	b := bitArg(L, 1)
	n := int32(8)
	if L.GetTop() >= 2 {
		n = int32(bitArg(L, 2))
	}
	digits := "0123456789abcdef"
	if n < 0 {
		digits = "0123456789ABCDEF"
		// -INT_MIN overflows; Redis's build then prints 8 digits.
		if n == math.MinInt32 {
			n = 8
		} else {
			n = -n
		}
	}
	if n > 8 {
		n = 8
	}
	buf := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		buf[i] = digits[b&15]
		b >>= 4
	}
	L.Push(lua.LString(buf))
	return 1
}
