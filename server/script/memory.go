package script

import (
	"runtime"
	"runtime/metrics"
)

// The memory bound. gopher-lua allocates from Go's heap and has no
// allocator hook, so a run is bounded by what the process's heap grows
// while it runs: every memEvery instructions, and before a library
// function makes a large string, the run compares the heap's objects with
// what they were at its first check; past the bound it forces a
// collection (so that garbage, its own or anyone's, does not count) and
// stops with Lua's "not enough memory" if the growth is still there. One
// allocation larger than the bound (string.rep("x", 1e10)) is refused
// before it is made. Short runs never read the heap: the first reading
// comes after memEvery instructions or a large allocation, which can
// have grown the heap by a few megabytes at most.

const (
	// defaultMemoryLimit is Config.MemoryLimit's default.
	defaultMemoryLimit = 256 << 20
	// chargeCheck is how many bytes library functions may allocate
	// between two readings of the heap.
	chargeCheck = 4 << 20
)

type memWatch struct {
	limit   int64 // <= 0: no bound
	base    int64 // heap objects at the first reading; -1 before it
	charged int64 // bytes charged since the last reading
}

func (m *memWatch) reset(limit int64) {
	m.limit = limit
	m.base = -1
	m.charged = 0
}

func heapObjects() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// ok accounts for n more bytes about to be allocated (0 for a periodic
// check) and says whether the run stays within its bound.
func (m *memWatch) ok(n int64) bool {
	if m.limit <= 0 {
		return true
	}
	if n > m.limit {
		return false
	}
	m.charged += n
	if n > 0 && m.charged < chargeCheck {
		return true
	}
	m.charged = 0
	cur := heapObjects()
	if m.base < 0 {
		m.base = cur
		return true
	}
	if cur+n-m.base <= m.limit {
		return true
	}
	runtime.GC()
	cur = heapObjects()
	if cur+n-m.base <= m.limit {
		return true
	}
	return false
}
