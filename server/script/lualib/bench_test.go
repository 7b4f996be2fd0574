package lualib_test

import (
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// Benchmarks of one call from Go into each module's function, on the kind
// of small values a rate limiter's script encodes (a token bucket's state).

func benchCall(b *testing.B, module, fn, setup string) {
	L := newState()
	defer L.Close()
	if err := L.DoString(setup); err != nil {
		b.Fatal(err)
	}
	f := L.GetField(L.GetGlobal(module), fn)
	args := L.GetGlobal("ARGS").(*lua.LTable)
	var in []lua.LValue
	for i := 1; i <= args.Len(); i++ {
		in = append(in, args.RawGetInt(i))
	}
	p := lua.P{Fn: f, NRet: 1, Protect: true}
	if err := L.CallByParam(p, in...); err != nil {
		b.Fatal(err)
	}
	L.Pop(1)
	b.ReportAllocs()
	for b.Loop() {
		L.CallByParam(p, in...)
		L.Pop(1)
	}
}

const smallTable = `{tokens = 9.5, last = 1718000000123, limit = 10, keys = {"a", "b", "c"}, ok = true}`

func BenchmarkCJSONEncodeSmall(b *testing.B) {
	benchCall(b, "cjson", "encode", "ARGS = {"+smallTable+"}")
}

func BenchmarkCJSONDecodeSmall(b *testing.B) {
	benchCall(b, "cjson", "decode", `ARGS = {'{"tokens":9.5,"last":1718000000123,"limit":10,"keys":["a","b","c"],"ok":true}'}`)
}

func BenchmarkCmsgpackPackSmall(b *testing.B) {
	benchCall(b, "cmsgpack", "pack", "ARGS = {"+smallTable+"}")
}

func BenchmarkCmsgpackUnpackSmall(b *testing.B) {
	benchCall(b, "cmsgpack", "unpack", "ARGS = {cmsgpack.pack("+smallTable+")}")
}

func BenchmarkStructPack(b *testing.B) {
	benchCall(b, "struct", "pack", `ARGS = {">I4 d c5 h", 123456, 9.5, "hello", -7}`)
}

func BenchmarkStructUnpack(b *testing.B) {
	benchCall(b, "struct", "unpack", `ARGS = {">I4 d c5 h", struct.pack(">I4 d c5 h", 123456, 9.5, "hello", -7)}`)
}

func BenchmarkBitBand(b *testing.B) {
	benchCall(b, "bit", "band", `ARGS = {0x12345678, 0xff00ff, 2^40 + 3}`)
}
