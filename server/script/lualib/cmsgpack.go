package lualib

import (
	"encoding/binary"
	"math"

	lua "github.com/yuin/gopher-lua"
)

// cmsgpack is lua-cmsgpack 0.4.0 as Redis 7.0 ships it.
//
// Encoding: a number that converts to int64 and back unchanged is an
// integer in the smallest MessagePack form (positive/negative fixnum,
// uint/int 8-64), any other number a float 32 when float32 holds it
// exactly, else a float 64; a string is a fixstr/str8/16/32; a table
// whose keys are exactly 1..n (n = 0 included) is an array, any other a
// map; a table nested 16 deep, and every other type (nil, functions,
// userdata such as cjson.null), is nil.
//
// Decoding: str8-32 and the fix and 8-64 forms above; bin, ext and the
// rest are "Bad data format in input.", truncated data "Missing bytes in
// input."; unsigned 64-bit values wrap to signed as lua_pushinteger does.
// Lua's C stack limit applies, so a stream of more than about 8,000
// values, or nesting deeper than about 4,000 arrays, fails as in Redis.

const msgpackMaxNesting = 16

func newCmsgpack(L *lua.LState) *lua.LTable {
	t := register(L, map[string]lua.LGFunction{
		"pack":         msgpackPack,
		"unpack":       msgpackUnpack,
		"unpack_one":   msgpackUnpackOne,
		"unpack_limit": msgpackUnpackLimit,
	})
	t.RawSetString("_NAME", lua.LString("cmsgpack"))
	t.RawSetString("_VERSION", lua.LString("lua-cmsgpack 0.4.0"))
	t.RawSetString("_COPYRIGHT", lua.LString("Copyright (C) 2012, Salvatore Sanfilippo"))
	t.RawSetString("_DESCRIPTION", lua.LString("MessagePack C implementation for Lua"))
	return t
}

// msgpackEncoder encodes Lua values, counting the slots the C encoder
// would hold on Lua's stack so as to fail where it fails.
type msgpackEncoder struct {
	L   *lua.LState
	buf []byte
}

func (e *msgpackEncoder) checkStack(top, n int, what string) {
	if top+n > maxCStack {
		stackOverflow(e.L, what)
	}
}

// encode appends v, which sits at stack slot top.
func (e *msgpackEncoder) encode(v lua.LValue, level, top int) {
	switch x := v.(type) {
	case lua.LString:
		e.encodeBytes(string(x))
	case lua.LBool:
		if x {
			e.buf = append(e.buf, 0xc3)
		} else {
			e.buf = append(e.buf, 0xc2)
		}
	case lua.LNumber:
		e.encodeNumber(float64(x))
	case *lua.LTable:
		if level == msgpackMaxNesting {
			e.buf = append(e.buf, 0xc0)
			return
		}
		if n, ok := e.arrayLength(x, top); ok {
			e.encodeArray(x, n, level, top)
		} else {
			e.encodeMap(x, level, top)
		}
	default:
		e.buf = append(e.buf, 0xc0)
	}
}

func (e *msgpackEncoder) encodeBytes(s string) {
	n := len(s)
	switch {
	case n < 32:
		e.buf = append(e.buf, 0xa0|byte(n))
	case n <= 0xff:
		e.buf = append(e.buf, 0xd9, byte(n))
	case n <= 0xffff:
		e.buf = append(e.buf, 0xda, byte(n>>8), byte(n))
	default:
		e.buf = append(e.buf, 0xdb)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	}
	e.buf = append(e.buf, s...)
}

func (e *msgpackEncoder) encodeNumber(f float64) {
	if i := cInt64(f); !math.IsInf(f, 0) && float64(i) == f {
		e.encodeInt(i)
		return
	}
	if f32 := float32(f); float64(f32) == f {
		e.buf = append(e.buf, 0xca)
		e.buf = binary.BigEndian.AppendUint32(e.buf, math.Float32bits(f32))
		return
	}
	e.buf = append(e.buf, 0xcb)
	e.buf = binary.BigEndian.AppendUint64(e.buf, math.Float64bits(f))
}

func (e *msgpackEncoder) encodeInt(n int64) {
	b := e.buf
	switch {
	case n >= 0 && n <= 127:
		b = append(b, byte(n))
	case n >= 0 && n <= 0xff:
		b = append(b, 0xcc, byte(n))
	case n >= 0 && n <= 0xffff:
		b = append(b, 0xcd, byte(n>>8), byte(n))
	case n >= 0 && n <= 0xffffffff:
		b = append(b, 0xce)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	case n >= 0:
		b = append(b, 0xcf)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	case n >= -32:
		b = append(b, byte(n))
	case n >= -128:
		b = append(b, 0xd0, byte(n))
	case n >= -32768:
		b = append(b, 0xd1, byte(n>>8), byte(n))
	case n >= -2147483648:
		b = append(b, 0xd2)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
	default:
		b = append(b, 0xd3)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	e.buf = b
}

// arrayLength is table_is_an_array: whether t's keys are exactly the
// integers 1..n (as C int), and n.
func (e *msgpackEncoder) arrayLength(t *lua.LTable, top int) (int, bool) {
	e.checkStack(top, 2, "in function table_is_an_array")
	count, max := int32(0), int32(0)
	array := true
	forEach(t, func(k, _ lua.LValue) bool {
		n, isNum := k.(lua.LNumber)
		if !isNum || n <= 0 || math.IsInf(float64(n), 0) || float64(cInt32(float64(n))) != float64(n) {
			array = false
			return false
		}
		if float64(n) > float64(max) {
			max = cInt32(float64(n))
		}
		count++
		return true
	})
	return int(count), array && max == count
}

func (e *msgpackEncoder) encodeArray(t *lua.LTable, n, level, top int) {
	e.encodeHeader(n, 0x90, 0xdc, 0xdd)
	e.checkStack(top, 1, "in function mp_encode_lua_table_as_array")
	for j := 1; j <= n; j++ {
		e.encode(t.RawGet(lua.LNumber(j)), level+1, top+1)
	}
}

func (e *msgpackEncoder) encodeMap(t *lua.LTable, level, top int) {
	e.checkStack(top, 3, "in function mp_encode_lua_table_as_map")
	n := 0
	forEach(t, func(_, _ lua.LValue) bool { n++; return true })
	e.encodeHeader(n, 0x80, 0xde, 0xdf)
	forEach(t, func(k, v lua.LValue) bool {
		e.encode(k, level+1, top+3)
		e.encode(v, level+1, top+2)
		return true
	})
}

func (e *msgpackEncoder) encodeHeader(n int, fix, b16, b32 byte) {
	switch {
	case n <= 15:
		e.buf = append(e.buf, fix|byte(n))
	case n <= 0xffff:
		e.buf = append(e.buf, b16, byte(n>>8), byte(n))
	default:
		e.buf = append(e.buf, b32)
		e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(n))
	}
}

// msgpackPack is cmsgpack.pack(v, ...): the arguments' encodings one
// after the other.
func msgpackPack(L *lua.LState) int {
	nargs := L.GetTop()
	if nargs == 0 {
		argError(L, 0, "MessagePack pack needs input.")
	}
	if nargs+nargs > maxCStack {
		argError(L, 0, "Too many arguments for MessagePack pack.")
	}
	e := &msgpackEncoder{L: L}
	for i := 1; i <= nargs; i++ {
		top := nargs + i - 1
		e.checkStack(top, 1, "in function mp_check")
		e.encode(L.Get(i), 0, top+1)
	}
	L.Push(lua.LString(e.buf))
	return 1
}

const (
	mpOK = iota
	mpEOF
	mpBadFormat
)

// msgpackDecoder decodes from data[pos:], counting the values the C
// decoder would hold on Lua's stack (top).
type msgpackDecoder struct {
	L    *lua.LState
	data string
	pos  int
	top  int
}

func (d *msgpackDecoder) left() int { return len(d.data) - d.pos }

// decode reads one value (leaving it "pushed": top grows by one).
func (d *msgpackDecoder) decode() (lua.LValue, int) {
	if d.left() < 1 {
		return nil, mpEOF
	}
	if d.top+1 > maxCStack {
		stackOverflow(d.L, "too many return values at once; use unpack_one or unpack_limit instead.")
	}
	p := d.data[d.pos:]
	need := func(n int) bool { return len(p) >= n }
	var v lua.LValue
	size := 0 // bytes consumed by a scalar
	switch c := p[0]; {
	case c == 0xcc:
		if !need(2) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(p[1]), 2
	case c == 0xd0:
		if !need(2) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(int8(p[1])), 2
	case c == 0xcd:
		if !need(3) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(be16(p[1:])), 3
	case c == 0xd1:
		if !need(3) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(int16(be16(p[1:]))), 3
	case c == 0xce:
		if !need(5) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(be32(p[1:])), 5
	case c == 0xd2:
		if !need(5) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(int32(be32(p[1:]))), 5
	case c == 0xcf, c == 0xd3:
		if !need(9) {
			return nil, mpEOF
		}
		// Both become lua_Integer, so a uint64 past 2^63 wraps.
		v, size = lua.LNumber(float64(int64(be64(p[1:])))), 9
	case c == 0xc0:
		v, size = lua.LNil, 1
	case c == 0xc3:
		v, size = lua.LTrue, 1
	case c == 0xc2:
		v, size = lua.LFalse, 1
	case c == 0xca:
		if !need(5) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(float64(math.Float32frombits(be32(p[1:])))), 5
	case c == 0xcb:
		if !need(9) {
			return nil, mpEOF
		}
		v, size = lua.LNumber(math.Float64frombits(be64(p[1:]))), 9
	case c == 0xd9:
		if !need(2) {
			return nil, mpEOF
		}
		return d.str(2, int(p[1]))
	case c == 0xda:
		if !need(3) {
			return nil, mpEOF
		}
		return d.str(3, int(be16(p[1:])))
	case c == 0xdb:
		if !need(5) {
			return nil, mpEOF
		}
		return d.str(5, int(be32(p[1:])))
	case c == 0xdc:
		if !need(3) {
			return nil, mpEOF
		}
		d.pos += 3
		return d.array(int(be16(p[1:])))
	case c == 0xdd:
		if !need(5) {
			return nil, mpEOF
		}
		d.pos += 5
		return d.array(int(be32(p[1:])))
	case c == 0xde:
		if !need(3) {
			return nil, mpEOF
		}
		d.pos += 3
		return d.hash(int(be16(p[1:])))
	case c == 0xdf:
		if !need(5) {
			return nil, mpEOF
		}
		d.pos += 5
		return d.hash(int(be32(p[1:])))
	case c&0x80 == 0:
		v, size = lua.LNumber(c), 1
	case c&0xe0 == 0xe0:
		v, size = lua.LNumber(int8(c)), 1
	case c&0xe0 == 0xa0:
		return d.str(1, int(c&0x1f))
	case c&0xf0 == 0x90:
		d.pos++
		return d.array(int(c & 0xf))
	case c&0xf0 == 0x80:
		d.pos++
		return d.hash(int(c & 0xf))
	default:
		return nil, mpBadFormat
	}
	d.pos += size
	d.top++
	return v, mpOK
}

// str reads a string of n bytes after a header of hdr bytes.
func (d *msgpackDecoder) str(hdr, n int) (lua.LValue, int) {
	if d.left() < hdr || d.left()-hdr < n {
		return nil, mpEOF
	}
	start := d.pos + hdr
	d.pos = start + n
	d.top++
	return lua.LString(d.data[start:d.pos]), mpOK
}

func (d *msgpackDecoder) array(n int) (lua.LValue, int) {
	t := d.L.CreateTable(0, 0)
	d.top++
	if d.top+1 > maxCStack {
		stackOverflow(d.L, "in function mp_decode_to_lua_array")
	}
	for i := 1; i <= n; i++ {
		d.top++ // the index
		v, err := d.decode()
		if err != mpOK {
			return nil, err
		}
		t.RawSetInt(i, v)
		d.top -= 2
	}
	return t, mpOK
}

func (d *msgpackDecoder) hash(n int) (lua.LValue, int) {
	t := d.L.CreateTable(0, 0)
	d.top++
	for ; n > 0; n-- {
		k, err := d.decode()
		if err != mpOK {
			return nil, err
		}
		v, err := d.decode()
		if err != mpOK {
			return nil, err
		}
		switch x := k.(type) {
		case *lua.LNilType:
			runError(d.L, "table index is nil")
		case lua.LNumber:
			if x != x {
				runError(d.L, "table index is NaN")
			}
		}
		t.RawSet(k, v)
		d.top -= 2
	}
	return t, mpOK
}

func be16(b string) uint16 { return uint16(b[0])<<8 | uint16(b[1]) }

func be32(b string) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func be64(b string) uint64 { return uint64(be32(b))<<32 | uint64(be32(b[4:])) }

// msgpackUnpackFull is mp_unpack_full: decode up to limit values from
// offset (all of them when both are 0, and then no offset comes back);
// base is how many values the C function holds on its stack already.
func msgpackUnpackFull(L *lua.LState, limit, offset int64, base int) int {
	s := checkLString(L, 1)
	decodeAll := limit == 0 && offset == 0
	if offset < 0 || limit < 0 {
		// (Redis prints the input's length where the limit belongs.)
		raise(L, "Invalid request to unpack with offset of %d and limit of %d.", int32(offset), int32(len(s)))
	} else if uint64(offset) > uint64(len(s)) {
		raise(L, "Start offset %d greater than input length %d.", int32(offset), int32(len(s)))
	}
	if decodeAll {
		limit = math.MaxInt32
	}
	d := &msgpackDecoder{L: L, data: s, pos: int(offset), top: base}
	var out []lua.LValue
	for cnt := int64(0); d.left() > 0 && cnt < limit; cnt++ {
		v, err := d.decode()
		switch err {
		case mpEOF:
			raise(L, "Missing bytes in input.")
		case mpBadFormat:
			raise(L, "Bad data format in input.")
		}
		out = append(out, v)
	}
	if !decodeAll {
		if d.top+1 > maxCStack {
			stackOverflow(L, "in function mp_unpack_full")
		}
		next := lua.LNumber(-1)
		if d.left() > 0 {
			next = lua.LNumber(d.pos)
		}
		L.Push(next)
	}
	for _, v := range out {
		L.Push(v)
	}
	if !decodeAll {
		return len(out) + 1
	}
	return len(out)
}

func msgpackUnpack(L *lua.LState) int {
	return msgpackUnpackFull(L, 0, 0, L.GetTop())
}

func msgpackUnpackOne(L *lua.LState) int {
	offset := optInteger(L, 2, 0)
	return msgpackUnpackFull(L, 1, offset, min(L.GetTop(), 1))
}

func msgpackUnpackLimit(L *lua.LState) int {
	limit := checkInteger(L, 2)
	offset := optInteger(L, 3, 0)
	return msgpackUnpackFull(L, limit, offset, min(L.GetTop(), 1))
}
