package lualib

import (
	"encoding/binary"
	"math"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// struct is Roberto Ierusalimschy's struct library as Redis 7.0 ships it
// (struct.c 1.7): pack, unpack and size over a format of
//
//	> < ![n]   big endian, little endian (the default), max alignment
//	x          a zero byte of padding
//	b B h H    signed/unsigned char and short (1, 2 bytes)
//	l L T      signed/unsigned long and size_t (8 bytes)
//	i[n] I[n]  signed/unsigned integer of n bytes (4 by default, at most 32)
//	f d        float and double
//	c[n]       n chars (pack: 0 means the whole string; unpack: 0 means
//	           the previous result is the length)
//	s          a zero-terminated string
//	' '        ignored
//
// with the sizes and alignment of x86-64 (align defaults to 1; '!' alone
// sets 8). The format is read as a C string (up to a NUL).

const (
	structMaxIntSize = 32
	structMaxAlign   = 8
)

type structHeader struct {
	big   bool
	align uint64
}

func newStruct(L *lua.LState) *lua.LTable {
	return register(L, map[string]lua.LGFunction{
		"pack":   structPack,
		"unpack": structUnpack,
		"size":   structSize,
	})
}

// structFormat walks a format string.
type structFormat struct {
	L   *lua.LState
	fmt string
	i   int
	h   structHeader
}

func newStructFormat(L *lua.LState) *structFormat {
	return &structFormat{L: L, fmt: checkCString(L, 1), h: structHeader{align: 1}}
}

func (f *structFormat) more() bool { return f.i < len(f.fmt) }

func (f *structFormat) next() byte {
	c := f.fmt[f.i]
	f.i++
	return c
}

// num reads an optional decimal count (def when there is none).
func (f *structFormat) num(def int) int {
	if !f.more() || !isDigit(f.fmt[f.i]) {
		return def
	}
	a := 0
	for f.more() && isDigit(f.fmt[f.i]) {
		d := int(f.fmt[f.i] - '0')
		if a > math.MaxInt32/10 || a*10 > math.MaxInt32-d {
			raise(f.L, "integral size overflow")
		}
		a = a*10 + d
		f.i++
	}
	return a
}

// size is optsize: the size of option opt, reading its count.
func (f *structFormat) size(opt byte) uint64 {
	switch opt {
	case 'B', 'b', 'x':
		return 1
	case 'H', 'h':
		return 2
	case 'L', 'l', 'T', 'd':
		return 8
	case 'f':
		return 4
	case 'c':
		return uint64(f.num(1))
	case 'i', 'I':
		sz := f.num(4)
		if sz > structMaxIntSize {
			raise(f.L, "integral size %d is larger than limit of %d", sz, structMaxIntSize)
		}
		return uint64(sz)
	}
	return 0
}

// toAlign is gettoalign: the padding before an item of size at pos. (The
// arithmetic is C's, also for sizes that are not powers of two.)
func (f *structFormat) toAlign(pos uint64, opt byte, size uint64) uint64 {
	if size == 0 || opt == 'c' {
		return 0
	}
	if size > f.h.align {
		size = f.h.align
	}
	return (size - (pos & (size - 1))) & (size - 1)
}

// control is controloptions: endianness, alignment, white space, and the
// error for anything else.
func (f *structFormat) control(opt byte) {
	switch opt {
	case ' ':
	case '>':
		f.h.big = true
	case '<':
		f.h.big = false
	case '!':
		a := f.num(structMaxAlign)
		if a <= 0 || a&(a-1) != 0 {
			raise(f.L, "alignment %d is not a power of 2", a)
		}
		f.h.align = uint64(a)
	default:
		argError(f.L, 1, "invalid format option '"+string([]byte{opt})+"'")
	}
}

// packBuffer is struct.pack's output and its view of the arguments:
// struct.c pushes a nil after them as a mark, so reading one argument
// too many says "got nil" (and the next is never reached).
type packBuffer struct {
	L     *lua.LState
	nargs int
	b     []byte
}

func (p *packBuffer) add(s string) { p.b = append(p.b, s...) }

// arg is stack slot k as struct.pack sees it, and whether it exists.
func (p *packBuffer) arg(k int) (lua.LValue, bool) {
	switch {
	case k <= p.nargs:
		return p.L.Get(k), true
	case k == p.nargs+1:
		return lua.LNil, true
	}
	return lua.LNil, false
}

func (p *packBuffer) typeError(k int, v lua.LValue, exists bool, expected string) {
	got := "no value"
	if exists {
		got = v.Type().String()
	}
	argError(p.L, k, expected+" expected, got "+got)
}

func (p *packBuffer) number(k int) float64 {
	v, exists := p.arg(k)
	f, ok := toNumber(v)
	if !ok {
		p.typeError(k, v, exists, "number")
	}
	return f
}

func (p *packBuffer) string(k int) string {
	v, exists := p.arg(k)
	switch x := v.(type) {
	case lua.LString:
		return string(x)
	case lua.LNumber:
		return formatNumber(float64(x))
	}
	p.typeError(k, v, exists, "string")
	return ""
}

func structPack(L *lua.LState) int {
	f := newStructFormat(L)
	p := &packBuffer{L: L, nargs: L.GetTop()}
	arg := 2
	var total uint64
	for f.more() {
		opt := f.next()
		size := f.size(opt)
		pad := f.toAlign(total, opt, size)
		total += pad
		for ; pad > 0; pad-- {
			p.add("\x00")
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			p.b = putInteger(p.b, p.number(arg), f.h.big, int(size))
			arg++
		case 'x':
			p.add("\x00")
		case 'f':
			v := math.Float32bits(float32(p.number(arg)))
			arg++
			p.b = appendUint(p.b, uint64(v), 4, f.h.big)
		case 'd':
			v := math.Float64bits(p.number(arg))
			arg++
			p.b = appendUint(p.b, v, 8, f.h.big)
		case 'c', 's':
			s := p.string(arg)
			arg++
			if size == 0 {
				size = uint64(len(s))
			}
			if uint64(len(s)) < size {
				// struct.c checks after moving past the argument,
				// so it names the next one.
				argError(L, arg, "string too short")
			}
			p.add(s[:size])
			if opt == 's' {
				p.add("\x00")
				size++
			}
		default:
			f.control(opt)
		}
		total += size
	}
	L.Push(lua.LString(p.b))
	return 1
}

// putInteger writes n in size bytes: negative numbers through long,
// others through unsigned long, as C converts them; bytes past the
// eighth are zero.
func putInteger(b []byte, n float64, big bool, size int) []byte {
	var v uint64
	if n < 0 {
		v = uint64(cInt64(n))
	} else {
		v = cUint64(n)
	}
	return appendUint(b, v, size, big)
}

// appendUint appends the low size bytes of v (zeros past 8 bytes).
func appendUint(b []byte, v uint64, size int, big bool) []byte {
	start := len(b)
	for i := 0; i < size; i++ {
		b = append(b, byte(v))
		v >>= 8
	}
	if big {
		out := b[start:]
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return b
}

// getInteger reads size bytes as struct.c does: into an unsigned long
// (only the least significant eight bytes survive), then sign-extended
// with C's shift, whose count x86 takes modulo 64.
func getInteger(data string, big, signed bool, size int) float64 {
	var l uint64
	if big {
		for i := 0; i < size; i++ {
			l = l<<8 | uint64(data[i])
		}
	} else {
		for i := size - 1; i >= 0; i-- {
			l = l<<8 | uint64(data[i])
		}
	}
	if !signed {
		return float64(l)
	}
	mask := ^uint64(0) << (uint(size*8-1) & 63)
	if l&mask != 0 {
		l |= mask
	}
	return float64(int64(l))
}

func structUnpack(L *lua.LState) int {
	f := newStructFormat(L)
	data := checkLString(L, 2)
	ld := uint64(len(data))
	pos := uint64(optInteger(L, 3, 1))
	if pos == 0 {
		argError(L, 3, "offset must be 1 or greater")
	}
	pos--
	nargs := L.GetTop()
	var out []lua.LValue
	tooShort := func(size uint64) {
		if size > ld || pos > ld-size {
			argError(L, 2, "data string too short")
		}
	}
	for f.more() {
		opt := f.next()
		size := f.size(opt)
		pos += f.toAlign(pos, opt, size)
		tooShort(size)
		if nargs+len(out)+2 > maxCStack {
			stackOverflow(L, "too many results")
		}
		switch opt {
		case 'b', 'B', 'h', 'H', 'l', 'L', 'T', 'i', 'I':
			signed := opt >= 'a'
			out = append(out, lua.LNumber(getInteger(data[pos:], f.h.big, signed, int(size))))
		case 'x':
		case 'f':
			var v uint32
			if f.h.big {
				v = binary.BigEndian.Uint32([]byte(data[pos : pos+4]))
			} else {
				v = binary.LittleEndian.Uint32([]byte(data[pos : pos+4]))
			}
			out = append(out, lua.LNumber(float64(math.Float32frombits(v))))
		case 'd':
			var v uint64
			if f.h.big {
				v = binary.BigEndian.Uint64([]byte(data[pos : pos+8]))
			} else {
				v = binary.LittleEndian.Uint64([]byte(data[pos : pos+8]))
			}
			out = append(out, lua.LNumber(math.Float64frombits(v)))
		case 'c':
			if size == 0 {
				var prev float64
				ok := false
				if len(out) > 0 {
					prev, ok = toNumber(out[len(out)-1])
				}
				if !ok {
					raise(L, "format 'c0' needs a previous size")
				}
				size = cUint64(prev)
				out = out[:len(out)-1]
				tooShort(size)
			}
			out = append(out, lua.LString(data[pos:pos+size]))
		case 's':
			e := strings.IndexByte(data[pos:], 0)
			if e < 0 {
				raise(L, "unfinished string in data")
			}
			size = uint64(e) + 1
			out = append(out, lua.LString(data[pos:pos+uint64(e)]))
		default:
			f.control(opt)
		}
		pos += size
	}
	for _, v := range out {
		L.Push(v)
	}
	L.Push(lua.LNumber(float64(int64(pos + 1))))
	return len(out) + 1
}

func structSize(L *lua.LState) int {
	f := newStructFormat(L)
	var pos uint64
	for f.more() {
		opt := f.next()
		size := f.size(opt)
		pos += f.toAlign(pos, opt, size)
		if opt == 's' {
			argError(L, 1, "option 's' has no fixed size")
		} else if opt == 'c' && size == 0 {
			argError(L, 1, "option 'c0' has no fixed size")
		}
		if !isDigit(opt) && !isAlpha(opt) {
			f.control(opt)
		}
		pos += size
	}
	L.Push(lua.LNumber(float64(int64(pos))))
	return 1
}
