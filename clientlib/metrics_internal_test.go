package clientlib

import "testing"

// BenchmarkAnswerCount is what the metrics add to each decision: one
// atomic add on the answering source's own cache line. parallel has every
// core count server answers at once, the worst case for contention.
func BenchmarkAnswerCount(b *testing.B) {
	var c answerCounts
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			c.answered(FromServer)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				c.answered(FromServer)
			}
		})
	})
	if c[FromServer].Load() == 0 {
		b.Fatal("nothing counted")
	}
}
