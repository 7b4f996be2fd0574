package engine

import (
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"testing"
	"time"
)

// BenchmarkExecute measures the engine's hot path: a pipeline of 16
// decisions on random keys, routed to shards and decided by their owners.
// Allocations are per batch of 16; the target is 0.
func BenchmarkExecute(b *testing.B) {
	idBuf := make([]byte, 16*32)
	var nextID uint64
	for _, c := range []struct {
		name string
		fill func(c *Command)
	}{
		{"cl.throttle", func(c *Command) {
			c.Op, c.N = OpThrottle, [4]int64{99, 100, 1e9, 1}
		}},
		{"sw.check", func(c *Command) {
			c.Op, c.N = OpSWCheck, [4]int64{100, 1e9, 1}
		}},
		{"fw.check", func(c *Command) {
			c.Op, c.N = OpFWCheck, [4]int64{100, 1e9, 1}
		}},
		{"sl.check", func(c *Command) {
			c.Op, c.N = OpSLCheck, [4]int64{100, 1e9, 1}
		}},
		// clientlib's decisions: each with a fresh 32-byte request id,
		// so each leaves a receipt (kept 10 s, as by default).
		{"cl.throttle+reqid", func(c *Command) {
			c.Op, c.N = OpThrottle, [4]int64{99, 100, 1e9, 1}
			nextID++
			id := idBuf[32*(nextID%16) : 32*(nextID%16)+32]
			copy(id, "0123456789abcdef")
			hex.Encode(id[16:], binary.BigEndian.AppendUint64(nil, nextID))
			c.ReqID, c.ReqTTL = id, DefaultReqIDWindow
		}},
	} {
		for _, keys := range []int{10_000, 1_000_000} {
			b.Run(c.name+"/keys="+strconv.Itoa(keys), func(b *testing.B) {
				e := New(Config{Shards: 8})
				defer e.Close()
				var batch Batch
				keyBuf := make([]byte, 16*16)
				x := uint64(1)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += 16 {
					batch.Reset()
					for k := 0; k < 16; k++ {
						x ^= x << 13
						x ^= x >> 7
						x ^= x << 17
						key := keyBuf[16*k : 16*k+16]
						copy(key, "user:id:")
						binary.BigEndian.PutUint64(key[8:], x%uint64(keys))
						cmd := batch.Add()
						c.fill(cmd)
						cmd.Key = key
					}
					e.Execute(&batch, time.Now().UnixNano())
				}
			})
		}
	}
}
