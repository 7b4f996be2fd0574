package server

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// BenchmarkNativeScripts is the engine-side cost of the accelerated
// scripts, without the network: batches of 16 EVALs of each known script
// on 10,000 keys, run natively, beside CL.THROTTLE's batches in the same
// engine (the yardstick: a native script call within 1.3x of a
// CL.THROTTLE decision). Allocations are per call.
func BenchmarkNativeScripts(b *testing.B) {
	type bench struct {
		name string
		args []string // after EVAL body 1 key; nil for CL.THROTTLE
		file string
	}
	for _, bc := range []bench{
		{"cl.throttle", nil, ""},
		{"redis_rate_allown", []string{"100", "100", "1", "1"}, "redis_rate_allown.lua"},
		{"redis_rate_allowatmost", []string{"100", "100", "1", "1"}, "redis_rate_allowatmost.lua"},
		{"rlflex_incrttl", []string{"1", "1", "100", "1"}, "rlflex_incr_ttl.lua"},
		{"rate_limit_redis_increment", []string{"1000"}, "rate_limit_redis_increment.lua"},
		{"ulule_incr", []string{"1", "60000"}, "ulule_incr.lua"},
		{"fastify_incr", []string{"60000", "1000000", "false", "false"}, "fastify_incr.lua"},
		{"limits_incr_expire", []string{"60", "1"}, "limits_incr_expire.lua"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			scripts := NewScripts(nil)
			e := engine.New(engine.Config{Shards: 8, Scripts: scripts})
			defer e.Close()
			var body string
			if bc.file != "" {
				text, err := os.ReadFile("../bench/scripts/" + bc.file)
				if err != nil {
					b.Fatal(err)
				}
				_, body, _ = strings.Cut(string(text), "-- sluice-bench: end of header\n")
				if scripts.accel.lookup([]byte(body)) == nil {
					b.Fatalf("%s is not a known script", bc.file)
				}
			}
			keys := make([][]byte, 10_000)
			for i := range keys {
				keys[i] = binary.BigEndian.AppendUint64([]byte("bench:"), uint64(i))
			}
			var batch engine.Batch
			fill := func(c *engine.Command, key []byte) {
				if bc.args == nil {
					c.Op, c.N, c.Key = engine.OpThrottle, [4]int64{99, 100, 1e9, 1}, key
					return
				}
				args := [][]byte{[]byte("EVAL"), []byte(body), []byte("1"), key}
				for _, a := range bc.args {
					args = append(args, []byte(a))
				}
				if err := commands["eval"].parseInto(c, args); err != nil {
					b.Fatal(err)
				}
				c.N[0] |= engine.ScriptOwnKeys
				c.N[engine.NativeAt] = scripts.accel.lookup([]byte(body)).id // as prepareEval marks it
			}
			// The commands are made once: what is measured is the engine
			// and the native code, as a connection's parse is the same
			// for every command.
			var cmds [][]engine.Command
			for p := range 1024 / 16 {
				cs := make([]engine.Command, 16)
				for i := range cs {
					fill(&cs[i], keys[(p*16*7+i*131)%len(keys)])
				}
				cmds = append(cmds, cs)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += 16 {
				batch.Reset()
				for _, c := range cmds[(i/16)%len(cmds)] {
					*batch.Add() = c
				}
				e.Execute(&batch, time.Now().UnixNano())
				if r := batch.Replies[0]; r.Kind == engine.ReplyError {
					b.Fatal(r.Err)
				}
			}
		})
	}
}
