package persistence

// chunkSize is the unit of a Log's buffer. Fixed-size chunks mean an append
// never copies what is already buffered (a growing slice would, again and
// again, while the disk lags), and the writer can write out a chunk while
// appends fill the rest of it.
const chunkSize = 256 << 10

// maxFreeChunks bounds the chunks kept for reuse (16 MiB); a burst's extra
// chunks go back to the garbage collector.
const maxFreeChunks = 64

// byteQueue holds the tail of the log file in memory: the bytes at file
// offsets [start, end). Every chunk but the last is full, so the chunk
// holding an offset is found by arithmetic. Not safe for concurrent use;
// the Log guards it with its mutex. The writer may read a range outside the
// mutex while appends fill later bytes of the same chunk: the ranges are
// disjoint, and chunks are released only below what has been written.
type byteQueue struct {
	chunks [][]byte
	start  int64
	end    int64
	free   [][]byte
}

func (q *byteQueue) reset(offset int64) {
	q.start, q.end = offset, offset
}

// append copies p in, spilling into new chunks as needed.
func (q *byteQueue) append(p []byte) {
	q.end += int64(len(p))
	for len(p) > 0 {
		n := len(q.chunks)
		if n == 0 || len(q.chunks[n-1]) == chunkSize {
			q.chunks = append(q.chunks, q.newChunk())
			n++
		}
		c := q.chunks[n-1]
		k := copy(c[len(c):chunkSize], p)
		q.chunks[n-1] = c[:len(c)+k]
		p = p[k:]
	}
}

func (q *byteQueue) newChunk() []byte {
	if n := len(q.free); n > 0 {
		c := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		return c
	}
	return make([]byte, 0, chunkSize)
}

// slices appends to dst the pieces of the queue covering [from, to), which
// must lie within [start, end).
func (q *byteQueue) slices(dst [][]byte, from, to int64) [][]byte {
	for from < to {
		i := (from - q.start) / chunkSize
		c := q.chunks[i]
		lo := (from - q.start) % chunkSize
		hi := min(int64(len(c)), lo+(to-from))
		dst = append(dst, c[lo:hi])
		from += hi - lo
	}
	return dst
}

// release drops the full chunks that lie entirely below offset.
func (q *byteQueue) release(offset int64) {
	i := 0
	for i < len(q.chunks) && len(q.chunks[i]) == chunkSize && q.start+chunkSize <= offset {
		if len(q.free) < maxFreeChunks {
			q.free = append(q.free, q.chunks[i][:0])
		}
		q.chunks[i] = nil
		q.start += chunkSize
		i++
	}
	if i > 0 {
		n := copy(q.chunks, q.chunks[i:])
		clear(q.chunks[n:])
		q.chunks = q.chunks[:n]
	}
}
