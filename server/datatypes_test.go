package server_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Past maxmemory, every data type refuses to be created or to grow with
// OOM, and removing from it, reading it and deleting it keep working: live
// state is never evicted, and a refused command changes nothing. A
// transaction cannot grow its queue either.
func TestMaxMemoryRefusesGrowthOfEveryType(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{Engine: engine.Config{Shards: 4}})
	for _, c := range [][]any{
		{"HSET", "h", "a", "1", "b", "2"},
		{"RPUSH", "l", "a", "b", "c"},
		{"SADD", "s", "a", "b"},
		{"ZADD", "z", "1", "a", "2", "b"},
		{"SET", "str", "abc"},
	} {
		ts.Do(t, c...)
	}
	ts.Expect(t, "OK", "CONFIG", "SET", "maxmemory", "1")
	oom := errors.New("OOM command not allowed when used memory > 'maxmemory'.")
	for _, c := range [][]any{
		{"HSET", "h", "c", "3"}, {"HSET", "new", "a", "1"}, {"HINCRBYFLOAT", "h", "x", "1.5"},
		{"RPUSH", "l", "d"}, {"LPUSH", "new", "a"},
		{"SADD", "s", "c"}, {"SADD", "new", "a"},
		{"ZADD", "z", "3", "c"}, {"ZADD", "new", "1", "a"}, {"ZINCRBY", "new", "1", "a"},
		{"APPEND", "str", "def"}, {"MSET", "new", "1", "new2", "2"},
	} {
		ts.Expect(t, oom, c...)
	}
	ts.Expect(t, "OK", "MULTI")
	ts.Expect(t, oom, "GET", "str")
	ts.Expect(t, errors.New("EXECABORT Transaction discarded because of previous errors."), "EXEC")

	// Nothing changed, and removal, reads and deletion still work.
	ts.Expect(t, int64(0), "EXISTS", "new", "new2")
	ts.Expect(t, int64(2), "HLEN", "h")
	ts.Expect(t, int64(1), "HDEL", "h", "a")
	ts.Expect(t, "c", "RPOP", "l")
	ts.Expect(t, int64(1), "SREM", "s", "a")
	ts.Expect(t, int64(1), "ZREM", "z", "a")
	ts.Expect(t, "abc", "GET", "str")
	ts.Expect(t, int64(4), "DEL", "h", "l", "s", "z")
	ts.Expect(t, "OK", "CONFIG", "SET", "maxmemory", "0")
	ts.Expect(t, int64(1), "SADD", "new", "a")
}
