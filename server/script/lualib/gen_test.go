package lualib_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
)

// Generators of random inputs, as Lua source (values) or raw bytes (JSON
// texts, MessagePack streams, struct data). Everything is drawn from one
// *rand.Rand, so a seed reproduces a run.

type gen struct {
	r *rand.Rand
	// specials allows NaN and infinities among numbers.
	specials bool
	// keyKinds allows table keys other than strings and numbers.
	keyKinds bool
	// maxKeys bounds the non-array keys of a table (1 keeps the encodings
	// byte-exact, as member order cannot differ).
	maxKeys int
}

func (g *gen) pick(n int) int { return g.r.Intn(n) }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// number returns a random float64 from a mix of the interesting kinds.
func (g *gen) number() float64 {
	r := g.r
	switch g.pick(12) {
	case 0, 1:
		return float64(r.Intn(601) - 300)
	case 2:
		k := []int{5, 7, 8, 15, 16, 31, 32, 52, 53, 62, 63, 64}[r.Intn(12)]
		f := math.Ldexp(1, k) + float64(r.Intn(5)-2)
		if r.Intn(2) == 0 {
			f = -f
		}
		return f
	case 3:
		return float64(int64(r.Uint64()))
	case 4:
		return float64(r.Int63n(1<<53)) * float64(1-2*r.Intn(2))
	case 5:
		for {
			f := math.Float64frombits(r.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	case 6:
		return float64(float32(r.NormFloat64() * math.Pow(10, float64(r.Intn(20)-10))))
	case 7:
		return float64(r.Intn(4001)-2000) / 8
	case 8:
		return r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
	case 9:
		return math.Float64frombits(uint64(r.Intn(1 << 20))) // denormals
	case 10:
		return float64(r.Intn(100)) + 0.5
	}
	if g.specials {
		return []float64{math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1)}[r.Intn(4)]
	}
	return math.Copysign(0, -1)
}

// luaNumber writes f as a Lua expression that both interpreters evaluate
// to f (the prelude's INF, NINF, NAN and NZ for the values literals cannot
// spell).
func luaNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NAN"
	case math.IsInf(f, 1):
		return "INF"
	case math.IsInf(f, -1):
		return "NINF"
	case f == 0 && math.Signbit(f):
		return "NZ"
	case f < 0:
		return "(-" + strconv.FormatFloat(-f, 'g', -1, 64) + ")"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// bytes returns a random string of n bytes from a random alphabet.
func (g *gen) bytes(n int) string {
	alphabets := []string{
		"abcdefghijklmnopqrstuvwxyz",
		"\"\\/\b\f\n\r\t\x00\x01\x1f\x7f ab",
		"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xff\xfe\x80",
		"0123456789.-+eE",
	}
	b := make([]byte, n)
	full := g.chance(0.3)
	alpha := alphabets[g.pick(len(alphabets))]
	for i := range b {
		if full {
			b[i] = byte(g.r.Intn(256))
		} else {
			b[i] = alpha[g.r.Intn(len(alpha))]
		}
	}
	return string(b)
}

func (g *gen) strLen() int {
	switch g.pick(10) {
	case 0:
		if g.chance(0.03) {
			return []int{65535, 65536}[g.pick(2)]
		}
		return []int{31, 32, 33, 255, 256}[g.pick(5)]
	case 1, 2:
		return g.pick(40)
	}
	return g.pick(8)
}

// luaStr writes s as a Lua expression (string.rep for long runs, in
// parentheses: gopher-lua expands a call that ends a table constructor
// into the array part even when it is a keyed field's value).
func luaStr(s string) string {
	if len(s) > 1000 && strings.Count(s, s[:1]) == len(s) {
		return fmt.Sprintf("(string.rep(%s, %d))", luaString(s[:1]), len(s))
	}
	return luaString(s)
}

// value returns a random Lua value as source.
func (g *gen) value(depth int) string {
	switch n := g.pick(20); {
	case n == 0:
		return "nil"
	case n == 1:
		return []string{"true", "false"}[g.pick(2)]
	case n < 8:
		return luaNumber(g.number())
	case n < 13:
		return g.stringValue()
	case n == 13:
		return "cjson.null"
	}
	if depth <= 0 {
		return luaNumber(g.number())
	}
	return g.table(depth - 1)
}

func (g *gen) stringValue() string {
	n := g.strLen()
	if n > 1000 {
		return luaStr(strings.Repeat(g.bytes(1), n))
	}
	return luaStr(g.bytes(n))
}

func (g *gen) key() string {
	if g.keyKinds && g.chance(0.2) {
		switch g.pick(3) {
		case 0:
			return []string{"true", "false"}[g.pick(2)]
		case 1:
			return "{}"
		}
		return "{" + luaNumber(float64(g.pick(5))) + "}"
	}
	if g.chance(0.3) {
		f := g.number()
		if f != f {
			f = 1.5
		}
		if f == math.Trunc(f) && f > 1<<16 && f < 1<<27 {
			// gopher-lua keeps such keys in a table's array part, which
			// it grows to that size: slow, and not what is under test.
			f += 0.5
		}
		if g.maxKeys > 1 && f == math.Trunc(f) && f >= 1<<31 {
			// Beside other keys, an integer key past 2^31 makes
			// cjson's array test depend on the order of keys.
			f = 0.25 + float64(g.pick(1000))
		}
		return luaNumber(f)
	}
	return luaStr(g.bytes(g.pick(6)))
}

// table returns a random table constructor.
func (g *gen) table(depth int) string {
	var items []string
	used := map[string]bool{}
	switch g.pick(6) {
	case 0, 1: // an array, perhaps with holes
		n := g.pick(20)
		if g.chance(0.05) {
			n = []int{15, 16, 17}[g.pick(3)]
		}
		for i := 0; i < n; i++ {
			v := g.value(depth)
			if g.chance(0.1) {
				v = "nil"
			}
			items = append(items, v)
		}
	case 2: // integer keys, dense or sparse
		n := g.pick(8)
		for i := 0; i < n; i++ {
			k := strconv.Itoa(g.pick(30) - 2)
			if g.maxKeys == 1 && g.chance(0.1) {
				// (Keys past 2^31 make cjson's array test depend on
				// the order of keys: only alone.)
				k = luaNumber(math.Ldexp(1, 29+g.pick(5)))
			}
			if !used[k] {
				used[k] = true
				items = append(items, "["+k+"]="+g.value(depth))
			}
		}
	case 3: // an array and some keys
		for i := g.pick(5); i > 0; i-- {
			items = append(items, g.value(depth))
		}
		fallthrough
	default: // keys
		n := 1 + g.pick(g.maxKeys)
		for i := 0; i < n; i++ {
			k := g.key()
			if !used[k] && k != "NAN" {
				used[k] = true
				items = append(items, "["+k+"]="+g.value(depth))
			}
		}
	}
	if g.maxKeys == 1 {
		items = g.oneKey(items)
	}
	return "{" + strings.Join(items, ",") + "}"
}

// oneKey keeps a table's encoding independent of key order: either all
// positional items, or a single keyed one.
func (g *gen) oneKey(items []string) []string {
	var keyed, plain []string
	for _, it := range items {
		if strings.HasPrefix(it, "[") && strings.Contains(it, "]=") {
			keyed = append(keyed, it)
		} else {
			plain = append(plain, it)
		}
	}
	if len(keyed) == 0 {
		return plain
	}
	if len(plain) > 0 && g.chance(0.5) {
		return plain
	}
	return keyed[:1]
}

// jsonText returns a random JSON text (valid unless mutated), with
// strtod's number forms and cjson's escapes.
func (g *gen) jsonText(depth int) string {
	var b strings.Builder
	g.jsonValue(&b, depth)
	s := b.String()
	if g.chance(0.3) {
		s = g.mutate(s, "[]{},:\"\\0-+.eExnu \x00")
	}
	return s
}

func (g *gen) ws(b *strings.Builder) {
	if g.chance(0.7) {
		return
	}
	for i := g.pick(3); i >= 0; i-- {
		b.WriteByte(" \t\n\r"[g.pick(4)])
	}
	if g.chance(0.02) {
		b.WriteByte('\v')
	}
}

func (g *gen) jsonValue(b *strings.Builder, depth int) {
	g.ws(b)
	n := g.pick(10)
	if depth <= 0 && n >= 7 {
		n = g.pick(7)
	}
	switch n {
	case 0:
		b.WriteString([]string{"true", "false", "null"}[g.pick(3)])
	case 1, 2:
		b.WriteString(g.jsonNumber())
	case 3, 4, 5, 6:
		g.jsonString(b)
	case 7, 8:
		b.WriteByte('[')
		for i := g.pick(6) - 1; i >= 0; i-- {
			g.jsonValue(b, depth-1)
			if i > 0 {
				b.WriteByte(',')
			}
		}
		g.ws(b)
		b.WriteByte(']')
	default:
		b.WriteByte('{')
		for i := g.pick(5) - 1; i >= 0; i-- {
			g.ws(b)
			g.jsonString(b)
			g.ws(b)
			b.WriteByte(':')
			g.jsonValue(b, depth-1)
			if i > 0 {
				b.WriteByte(',')
			}
		}
		g.ws(b)
		b.WriteByte('}')
	}
	g.ws(b)
}

func (g *gen) jsonNumber() string {
	r := g.r
	switch g.pick(8) {
	case 0:
		return strconv.Itoa(r.Intn(2001) - 1000)
	case 1:
		return strconv.FormatFloat(g.number(), 'g', -1, 64)
	case 2:
		return strconv.FormatFloat(g.number(), 'e', r.Intn(20), 64)
	case 3:
		return strconv.FormatFloat(g.number(), 'f', r.Intn(8), 64)
	case 4:
		return []string{"0x1F", "0X10", "-0x8", "007", "-0", "0.0", "+3", "1E5", "1e+05", "1.e3", "2.5E-3", "0x1p-3", "0x.8p1"}[r.Intn(13)]
	case 5:
		return []string{"inf", "-inf", "Infinity", "-Infinity", "nan", "-nan", "NaN", "nan(12)", "InFiNiTy"}[r.Intn(9)]
	case 6:
		var b strings.Builder
		for i := 1 + r.Intn(40); i > 0; i-- {
			b.WriteByte(byte('0' + r.Intn(10)))
		}
		return b.String()
	}
	return strconv.FormatInt(r.Int63(), 10) + "e" + strconv.Itoa(r.Intn(700)-350)
}

func (g *gen) jsonString(b *strings.Builder) {
	b.WriteByte('"')
	for i := g.pick(12); i > 0; i-- {
		switch g.pick(6) {
		case 0:
			b.WriteString([]string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`}[g.pick(8)])
		case 1:
			cp := g.r.Intn(0x10000)
			if g.chance(0.3) {
				cp = 0xD800 + g.r.Intn(0x800)
			}
			fmt.Fprintf(b, `\u%04x`, cp)
			if cp >= 0xD800 && cp < 0xDC00 && g.chance(0.7) {
				fmt.Fprintf(b, `\u%04X`, 0xDC00+g.r.Intn(0x400))
			}
		case 2:
			s := g.bytes(1 + g.pick(3))
			s = strings.NewReplacer(`"`, "", `\`, "").Replace(s)
			b.WriteString(s)
		default:
			b.WriteByte(byte('a' + g.pick(26)))
		}
	}
	b.WriteByte('"')
}

// mutate damages s once: a byte deleted, replaced or inserted (from
// alphabet), or the text cut short.
func (g *gen) mutate(s string, alphabet string) string {
	if s == "" {
		i := g.pick(len(alphabet))
		return alphabet[i : i+1]
	}
	i := g.pick(len(s))
	c := string(alphabet[g.pick(len(alphabet))])
	if g.chance(0.2) {
		c = string([]byte{byte(g.r.Intn(256))})
	}
	switch g.pick(4) {
	case 0:
		return s[:i] + s[i+1:]
	case 1:
		return s[:i] + c + s[i+1:]
	case 2:
		return s[:i] + c + s[i:]
	}
	return s[:i]
}

// msgpack returns a random MessagePack stream item in any of the forms
// cmsgpack reads (and some it does not), wide forms for small values too.
func (g *gen) msgpack(depth int) []byte {
	r := g.r
	be := func(code byte, v uint64, n int) []byte {
		b := []byte{code}
		for i := n - 1; i >= 0; i-- {
			b = append(b, byte(v>>(8*i)))
		}
		return b
	}
	small := func() uint64 {
		if g.chance(0.5) {
			return uint64(r.Intn(300))
		}
		return r.Uint64()
	}
	switch n := g.pick(24); {
	case n == 0:
		return []byte{byte(r.Intn(128))}
	case n == 1:
		return []byte{byte(0xe0 + r.Intn(32))}
	case n == 2:
		return []byte{[]byte{0xc0, 0xc2, 0xc3}[r.Intn(3)]}
	case n == 3:
		return be(0xcc, small(), 1)
	case n == 4:
		return be(0xcd, small(), 2)
	case n == 5:
		return be(0xce, small(), 4)
	case n == 6:
		return be(0xcf, small(), 8)
	case n == 7:
		return be(0xd0, small(), 1)
	case n == 8:
		return be(0xd1, small(), 2)
	case n == 9:
		return be(0xd2, small(), 4)
	case n == 10:
		return be(0xd3, small(), 8)
	case n == 11:
		return be(0xca, uint64(math.Float32bits(float32(g.number()))), 4)
	case n == 12:
		if g.chance(0.3) {
			return be(0xca, uint64(r.Uint32()), 4)
		}
		return be(0xcb, r.Uint64(), 8)
	case n == 13:
		return be(0xcb, math.Float64bits(g.number()), 8)
	case n == 14, n == 15:
		s := g.bytes(g.pick(40))
		switch {
		case len(s) < 32 && g.chance(0.6):
			return append([]byte{0xa0 | byte(len(s))}, s...)
		case g.chance(0.4):
			return append(be(0xd9, uint64(len(s)), 1), s...)
		case g.chance(0.5):
			return append(be(0xda, uint64(len(s)), 2), s...)
		}
		return append(be(0xdb, uint64(len(s)), 4), s...)
	case n == 16:
		// Forms cmsgpack does not read: bin, ext, fixext, 0xc1.
		return []byte{[]byte{0xc1, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8}[r.Intn(12)], 1, 1}
	}
	if depth <= 0 {
		return []byte{byte(r.Intn(128))}
	}
	count := g.pick(6)
	isMap := g.chance(0.4)
	var b []byte
	switch g.pick(3) {
	case 0:
		if isMap {
			b = []byte{0x80 | byte(count)}
		} else {
			b = []byte{0x90 | byte(count)}
		}
	case 1:
		b = be(map[bool]byte{false: 0xdc, true: 0xde}[isMap], uint64(count), 2)
	default:
		b = be(map[bool]byte{false: 0xdd, true: 0xdf}[isMap], uint64(count), 4)
	}
	for i := 0; i < count; i++ {
		if isMap {
			if g.chance(0.85) {
				b = append(b, g.msgpackKey()...)
			} else {
				b = append(b, g.msgpack(depth-1)...)
			}
		}
		b = append(b, g.msgpack(depth-1)...)
	}
	return b
}

func (g *gen) msgpackKey() []byte {
	if g.chance(0.5) {
		return []byte{byte(g.r.Intn(128))}
	}
	s := fmt.Sprintf("k%d", g.r.Intn(1000))
	return append([]byte{0xa0 | byte(len(s))}, s...)
}

func (g *gen) msgpackStream() string {
	var b []byte
	for i := 1 + g.pick(4); i > 0; i-- {
		b = append(b, g.msgpack(3)...)
	}
	s := string(b)
	if g.chance(0.25) {
		s = g.mutate(s, "\x00\x01\x80\x90\xa0\xc0\xcc\xcf\xd9\xdc\xde\xff")
	}
	return s
}

// structItem is one option of a struct format and a Lua argument for it
// (empty when the option takes none).
type structItem struct{ opt, arg string }

func (g *gen) structFormat() []structItem {
	var items []structItem
	num := func() string {
		switch g.pick(6) {
		case 0:
			return luaNumber(float64(g.r.Intn(256)))
		case 1:
			return luaNumber(float64(g.r.Intn(65536) - 32768))
		case 2:
			return luaString(strconv.Itoa(g.r.Intn(100)))
		}
		return luaNumber(g.number())
	}
	for i := 1 + g.pick(6); i > 0; i-- {
		switch n := g.pick(22); {
		case n < 2:
			items = append(items, structItem{opt: []string{"<", ">", " "}[g.pick(3)]})
		case n == 2:
			a := []string{"!", "!1", "!2", "!4", "!8", "!16"}[g.pick(6)]
			if g.chance(0.1) {
				a = []string{"!3", "!0", "!6"}[g.pick(3)]
			}
			items = append(items, structItem{opt: a})
		case n == 3:
			items = append(items, structItem{opt: "x"})
		case n < 12:
			o := string("bBhHlLTfd"[n-4])
			if n == 11 {
				o = string("fd"[g.pick(2)])
			}
			items = append(items, structItem{opt: o, arg: num()})
		case n < 15:
			sz := strconv.Itoa(g.pick(17))
			if g.chance(0.2) {
				sz = ""
			} else if g.chance(0.05) {
				sz = strconv.Itoa(17 + g.pick(20))
			}
			items = append(items, structItem{opt: string("iI"[g.pick(2)]) + sz, arg: num()})
		case n < 18:
			sz := g.pick(6)
			s := g.bytes(g.pick(8))
			opt := "c" + strconv.Itoa(sz)
			if g.chance(0.2) {
				opt = "c"
			}
			items = append(items, structItem{opt: opt, arg: luaString(s)})
		case n < 20:
			items = append(items, structItem{opt: "s", arg: luaString(strings.ReplaceAll(g.bytes(g.pick(6)), "\x00", "z"))})
		case n == 20:
			items = append(items, structItem{opt: []string{"j", "z", "q", "#", "%", "9"}[g.pick(6)], arg: num()})
		default:
			items = append(items, structItem{opt: "c0", arg: luaString(g.bytes(g.pick(5)))})
		}
	}
	return items
}

func joinFormat(items []structItem) (format string, args []string) {
	var f strings.Builder
	for _, it := range items {
		f.WriteString(it.opt)
		if it.arg != "" {
			args = append(args, it.arg)
		}
	}
	return f.String(), args
}

// bitArg returns a random argument for a bit operation, as Lua source.
func (g *gen) bitArg() string {
	r := g.r
	switch g.pick(12) {
	case 0:
		return luaNumber(float64(int32(r.Uint32())))
	case 1:
		return luaNumber(float64(r.Uint32()))
	case 2:
		return luaNumber(float64(r.Int63n(1<<53)) * float64(1-2*r.Intn(2)))
	case 3:
		return luaNumber(float64(int32(r.Uint32())) + 0.5)
	case 4:
		return luaNumber(float64(r.Int63n(1<<40)) + r.Float64())
	case 5:
		return luaNumber(math.Ldexp(float64(r.Int63()), r.Intn(40)))
	case 6:
		return strconv.Itoa(r.Intn(70) - 35)
	case 7:
		return luaString([]string{"0x10", " 12 ", "1e3", "-7", "0xffffffff", "abc", "", "1.5"}[r.Intn(8)])
	case 8:
		if g.chance(0.3) {
			return []string{"nil", "true", "{}"}[r.Intn(3)]
		}
		return luaNumber(g.number())
	}
	return luaNumber(g.number())
}

// structData returns random bytes to unpack.
func (g *gen) structData() string {
	b := make([]byte, g.pick(40))
	for i := range b {
		switch g.pick(4) {
		case 0:
			b[i] = 0
		case 1:
			b[i] = 0xff
		default:
			b[i] = byte(g.r.Intn(256))
		}
	}
	if len(b) >= 8 && g.chance(0.3) {
		binary.LittleEndian.PutUint64(b, math.Float64bits(g.number()))
	}
	return string(b)
}
