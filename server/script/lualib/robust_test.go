package lualib_test

import (
	"errors"
	"math/rand"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// Bad input never panics: whatever bytes reach the decoders, and whatever
// format and arguments reach struct and bit, the result is a value or a
// Lua error, never a Go panic (which gopher-lua's PCall would report as
// ApiErrorPanic).

// robustCalls are the entry points, each given the input as ARG (a
// string) and, for struct, FMT.
var robustCalls = []string{
	`return cjson.decode(ARG)`,
	`cjson.decode_invalid_numbers(false) return cjson.decode(ARG)`,
	`cjson.decode_max_depth(3) return cjson.decode(ARG)`,
	`return cmsgpack.unpack(ARG)`,
	`return cmsgpack.unpack_one(ARG, #ARG % 7)`,
	`return cmsgpack.unpack_limit(ARG, #ARG % 3, #ARG % 5)`,
	`return cmsgpack.pack(cmsgpack.unpack(ARG))`,
	`return cjson.encode(cmsgpack.unpack(ARG))`,
	`return struct.unpack(FMT, ARG)`,
	`return struct.unpack(FMT, ARG, #ARG % 4 + 1)`,
	`return struct.pack(FMT, ARG, #ARG, -#ARG, ARG, 1.5, ARG)`,
	`return struct.size(FMT)`,
	`return bit.tohex(ARG, ARG), bit.band(ARG, ARG), bit.lshift(ARG, ARG)`,
	`return cjson.encode(ARG), cjson.encode({ARG, [ARG] = ARG})`,
}

func runRobust(t *testing.T, L *lua.LState, call int, fmt, arg string) {
	t.Helper()
	L.SetGlobal("ARG", lua.LString(arg))
	L.SetGlobal("FMT", lua.LString(fmt))
	fn, err := L.LoadString(robustCalls[call%len(robustCalls)])
	if err != nil {
		t.Fatal(err)
	}
	L.Push(fn)
	err = L.PCall(0, lua.MultRet, nil)
	L.SetTop(0)
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorPanic {
		t.Fatalf("Go panic for call %q fmt %q arg %q: %v\n%s", robustCalls[call%len(robustCalls)], fmt, arg, apiErr.Object, apiErr.StackTrace)
	}
}

func FuzzModules(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}]}`, `[1e999, -0, "\ud83d\ude00"]`, "\x93\x01\xa1a\x81\xc0\x01", "\xdd\xff\xff\xff\xff",
		"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", `"\u`, "[[[[[[[[[[", "\x00\x00", "nan(0x123)", "0x1p99999",
	} {
		for call := range robustCalls {
			f.Add(uint8(call), "<i9 c0 s !4 d", s)
		}
	}
	f.Fuzz(func(t *testing.T, call uint8, format, arg string) {
		L := newState()
		defer L.Close()
		runRobust(t, L, int(call), format, arg)
	})
}

// TestRobustRandom feeds random and mutated inputs to every entry point
// (the fuzz target's corpus only runs its seeds under plain go test).
func TestRobustRandom(t *testing.T) {
	r := rand.New(rand.NewSource(seed(5)))
	g := &gen{r: r, maxKeys: 3}
	L := newState()
	defer func() { L.Close() }()
	formats := "<>!0123456789xbBhHlLTiIfdcsjz #"
	n := count(20000)
	for i := 0; i < n; i++ {
		var arg string
		switch r.Intn(4) {
		case 0:
			arg = g.jsonText(5)
		case 1:
			arg = g.msgpackStream()
		case 2:
			b := make([]byte, r.Intn(64))
			r.Read(b)
			arg = string(b)
		default:
			arg = g.mutate(g.mutate(g.jsonText(3), "\x00\"\\[{"), "\x91\xdc\xc0")
		}
		var f strings.Builder
		for j := r.Intn(10); j > 0; j-- {
			f.WriteByte(formats[r.Intn(len(formats))])
		}
		runRobust(t, L, r.Intn(len(robustCalls)), f.String(), arg)
		if i%500 == 0 {
			L.Close()
			L = newState()
		}
	}
	t.Logf("%d random inputs (seed %d), no panic", n, seed(5))
}
