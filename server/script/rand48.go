package script

import "sync/atomic"

// Redis 7 replaces math.random and math.randomseed with its own rand48
// (src/rand.c): a 48-bit linear congruential generator whose state lives
// in the process, not in the script. Redis 7.0 does not reseed it before a
// script runs (6.x did), so a script's numbers continue the sequence the
// scripts before it left, and math.randomseed moves it for every later
// script. The state here is the Engine's.

const (
	rand48Mul  = 0x5DEECE66D
	rand48Add  = 0xB
	rand48Mask = 1<<48 - 1
	// rand48Init is the state before any seeding: x = 0x1234ABCD330E.
	rand48Init = 0x1234ABCD330E
	// rand48Max is REDIS_LRAND48_MAX (INT32_MAX).
	rand48Max = 1<<31 - 1
)

type rand48 struct{ x atomic.Uint64 }

func newRand48() *rand48 {
	r := &rand48{}
	r.x.Store(rand48Init)
	return r
}

// next advances the state and returns redisLrand48(): the state's top 31
// bits.
func (r *rand48) next() int32 {
	for {
		old := r.x.Load()
		x := (old*rand48Mul + rand48Add) & rand48Mask
		if r.x.CompareAndSwap(old, x) {
			return int32(x >> 17)
		}
	}
}

// seed is redisSrand48: the low 16 bits of the state are 0x330E and the
// seed's 32 bits go above them.
func (r *rand48) seed(s int32) {
	r.x.Store(uint64(uint32(s))<<16 | 0x330E)
}
