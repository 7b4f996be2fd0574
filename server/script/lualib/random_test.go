package lualib_test

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// Seeded random cases. LUALIB_SEED picks the seed (the default is fixed,
// so CI is reproducible) and LUALIB_SCALE multiplies the counts for a long
// run.

func TestDifferentialRandomCJSON(t *testing.T) {
	s := seed(1)
	o := newOracle(t)
	r := rand.New(rand.NewSource(s))
	// Tables with one key (or none) must encode exactly; with more, the
	// members' order may differ, and so may which of two errors comes
	// first, so those have no error but excessive sparseness.
	exact := &gen{r: r, maxKeys: 1, specials: true, keyKinds: true}
	loose := &gen{r: r, maxKeys: 4}
	jc := canon(canonJSON)
	for i := 0; i < count(1500); i++ {
		o.check("return cjson.encode("+exact.value(4)+")", nil)
		o.check("return cjson.encode("+loose.value(4)+")", jc)
	}
	for i := 0; i < count(1000); i++ {
		o.check("return dump(cjson.decode(cjson.encode("+loose.value(4)+")))", nil)
	}
	for i := 0; i < count(3000); i++ {
		o.check(decodeSnippet(exact.jsonText(4), r.Intn(4) == 0), nil)
	}
	for i := 0; i < count(500); i++ {
		settings := []string{
			fmt.Sprintf("cjson.encode_number_precision(%d)", 1+r.Intn(14)),
			fmt.Sprintf("cjson.encode_invalid_numbers(%s)", []string{"true", "false", "'null'", "'on'"}[r.Intn(4)]),
			fmt.Sprintf("cjson.encode_sparse_array(%s, %d, %d)", []string{"true", "false"}[r.Intn(2)], r.Intn(4), r.Intn(12)),
			fmt.Sprintf("cjson.encode_max_depth(%d)", 1+r.Intn(5)),
		}
		r.Shuffle(len(settings), func(i, j int) { settings[i], settings[j] = settings[j], settings[i] })
		o.check(strings.Join(settings[:1+r.Intn(4)], " ")+" return cjson.encode("+loose.value(3)+")", jc)
	}
	o.report("cjson random", s)
}

func TestDifferentialRandomCmsgpack(t *testing.T) {
	s := seed(2)
	o := newOracle(t)
	r := rand.New(rand.NewSource(s))
	exact := &gen{r: r, maxKeys: 1, specials: true}
	loose := &gen{r: r, maxKeys: 5, specials: true, keyKinds: true}
	mc := canon(canonHexMsgpack)
	for i := 0; i < count(1500); i++ {
		o.check("return hex(cmsgpack.pack("+exact.value(4)+"))", nil)
		args := []string{}
		for j := 1 + r.Intn(3); j > 0; j-- {
			args = append(args, loose.value(4))
		}
		o.check("return hex(cmsgpack.pack("+strings.Join(args, ",")+"))", mc)
	}
	for i := 0; i < count(1000); i++ {
		o.check("return dumpall(cmsgpack.unpack(cmsgpack.pack("+loose.value(5)+")))", nil)
	}
	for i := 0; i < count(2000); i++ {
		data := luaString(exact.msgpackStream())
		switch r.Intn(4) {
		case 0, 1:
			o.check("return dumpall(cmsgpack.unpack("+data+"))", nil)
		case 2:
			o.check("return dumpall(cmsgpack.unpack_one("+data+", "+strconv.Itoa(r.Intn(12)-1)+"))", nil)
		default:
			o.check("return dumpall(cmsgpack.unpack_limit("+data+", "+strconv.Itoa(r.Intn(5))+", "+strconv.Itoa(r.Intn(12)-1)+"))", nil)
		}
	}
	o.report("cmsgpack random", s)
}

func TestDifferentialRandomStruct(t *testing.T) {
	s := seed(3)
	o := newOracle(t)
	r := rand.New(rand.NewSource(s))
	g := &gen{r: r, specials: true}
	for i := 0; i < count(3000); i++ {
		items := g.structFormat()
		format, args := joinFormat(items)
		if r.Intn(10) == 0 && len(args) > 0 {
			args = args[:r.Intn(len(args))] // too few arguments
		}
		f := luaString(format)
		call := "struct.pack(" + strings.Join(append([]string{f}, args...), ",") + ")"
		o.check("return hex("+call+")", nil)
		pos := ""
		if r.Intn(3) == 0 {
			pos = ", " + strconv.Itoa(r.Intn(12)-1)
		}
		data := luaString(g.structData())
		if r.Intn(2) == 0 {
			// Unpack what was packed (when it packs), and a prefix of it.
			o.check("local ok, d = pcall(function() return "+call+" end) if not ok then d = "+data+" end "+
				"return dumpall(struct.unpack("+f+", d"+pos+")) .. '|' .. dumpall(struct.unpack("+f+", string.sub(d, 1, #d - 1)))", nil)
		} else {
			o.check("return dumpall(struct.unpack("+f+", "+data+pos+"))", nil)
		}
		o.check("return dumpall(struct.size("+f+"))", nil)
	}
	o.report("struct random", s)
}

func TestDifferentialRandomBit(t *testing.T) {
	s := seed(4)
	o := newOracle(t)
	r := rand.New(rand.NewSource(s))
	g := &gen{r: r, specials: true}
	ops := []struct {
		name       string
		minN, maxN int
	}{
		{"tobit", 1, 1}, {"bnot", 1, 1}, {"bswap", 1, 1}, {"band", 1, 5}, {"bor", 1, 5}, {"bxor", 1, 5},
		{"lshift", 2, 2}, {"rshift", 2, 2}, {"arshift", 2, 2}, {"rol", 2, 2}, {"ror", 2, 2}, {"tohex", 1, 2},
	}
	for i := 0; i < count(3000); i++ {
		op := ops[r.Intn(len(ops))]
		n := op.minN + r.Intn(op.maxN-op.minN+1)
		if r.Intn(40) == 0 {
			n = r.Intn(op.maxN + 2)
		}
		args := make([]string, n)
		for j := range args {
			args[j] = g.bitArg()
		}
		o.check("return dumpall(bit."+op.name+"("+strings.Join(args, ",")+"))", nil)
	}
	o.report("bit random", s)
}
