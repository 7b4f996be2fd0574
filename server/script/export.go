package script

import (
	"math"
	"strconv"
)

// What native implementations of known scripts (the server's script
// acceleration) need to write numbers exactly as a script would.

// NumberString is Lua's tostring of a number (%.14g).
func NumberString(f float64) string { return luaNumberString(f) }

// AppendNumberString appends NumberString(f) to b.
func AppendNumberString(b []byte, f float64) []byte {
	if f == math.Trunc(f) && f > -1e14 && f < 1e14 && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	return appendG(b, f, 14)
}

// AppendCallArg appends CallArg(f) to b.
func AppendCallArg(b []byte, f float64) []byte { return appendArgNumber(b, f) }

// CallArg is a Lua number passed to redis.call, as Redis 7.0 writes it
// (%.17g), in a new slice made once at the size any number takes (at most
// 24 bytes).
func CallArg(f float64) []byte { return appendArgNumber(make([]byte, 0, 24), f) }

// ReplyInteger is a Lua number returned by a script, as an integer reply:
// truncated toward zero, as Redis's C cast does.
func ReplyInteger(f float64) int64 { return luaToInteger(f) }
