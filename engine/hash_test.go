package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// hsModel is what a hash or a set should hold: its elements in insertion
// order (a hash's values alongside).
type hsModel struct {
	keys []string
	vals []string
}

func (m *hsModel) find(k string) int { return slices.Index(m.keys, k) }

func (m *hsModel) put(k, v string) bool {
	if i := m.find(k); i >= 0 {
		m.vals[i] = v
		return false
	}
	m.keys, m.vals = append(m.keys, k), append(m.vals, v)
	return true
}

func (m *hsModel) del(k string) bool {
	i := m.find(k)
	if i < 0 {
		return false
	}
	m.keys, m.vals = slices.Delete(m.keys, i, i+1), slices.Delete(m.vals, i, i+1)
	return true
}

func bulkText(r Reply) string {
	if r.Bulk != nil {
		return string(r.Bulk)
	}
	return r.Str
}

// Random hash and set commands through Execute against a model of what
// each key holds (insertion order included), then the journal replayed
// into fresh engines: the same state.
func TestHashAndSetOpsMatchModelAndReplay(t *testing.T) {
	live, j, clk := journaledEngine(t)
	rng := rand.New(rand.NewPCG(50, 90))
	models := map[string]*hsModel{}
	model := func(k string) *hsModel {
		if models[k] == nil {
			models[k] = &hsModel{}
		}
		return models[k]
	}
	elem := func() string {
		if rng.IntN(20) == 0 {
			return fmt.Sprintf("long-%0200d", rng.IntN(5))
		}
		return "e" + strconv.Itoa(rng.IntN(30))
	}
	var b Batch
	for step := range 20000 {
		b.Reset()
		c := b.Add()
		n := rng.IntN(6)
		hash := rng.IntN(2) == 0
		key := fmt.Sprintf("s%d", n)
		if hash {
			key = fmt.Sprintf("h%d", n)
		}
		c.Key = []byte(key)
		m := model(key)
		var want string
		op := rng.IntN(5)
		var args []string
		switch {
		case hash && op <= 1:
			c.Op = OpHSet
			created := 0
			for range 1 + rng.IntN(4) {
				f, v := elem(), elem()
				args = append(args, f, v)
				if m.put(f, v) {
					created++
				}
			}
			want = strconv.Itoa(created)
		case hash && op == 2:
			c.Op = OpHDel
			deleted := 0
			for range 1 + rng.IntN(3) {
				f := elem()
				args = append(args, f)
				if m.del(f) {
					deleted++
				}
			}
			want = strconv.Itoa(deleted)
		case hash && op == 3:
			c.Op = OpHIncrBy
			f, d := "n"+strconv.Itoa(rng.IntN(3)), rng.IntN(2000)-1000
			args = []string{f, strconv.Itoa(d)}
			cur := 0
			if i := m.find(f); i >= 0 {
				cur, _ = strconv.Atoi(m.vals[i])
			}
			m.put(f, strconv.Itoa(cur+d))
			want = strconv.Itoa(cur + d)
		case hash:
			c.Op = OpHGetAll
			for i := range m.keys {
				want += m.keys[i] + "=" + m.vals[i] + " "
			}
		case op <= 1:
			c.Op = OpSAdd
			added := 0
			for range 1 + rng.IntN(4) {
				e := elem()
				args = append(args, e)
				if m.put(e, "") {
					added++
				}
			}
			want = strconv.Itoa(added)
		case op <= 3:
			c.Op = OpSRem
			deleted := 0
			for range 1 + rng.IntN(3) {
				e := elem()
				args = append(args, e)
				if m.del(e) {
					deleted++
				}
			}
			want = strconv.Itoa(deleted)
		default:
			c.Op = OpSMembers
			for _, k := range m.keys {
				want += k + " "
			}
		}
		for _, a := range args {
			c.Args = append(c.Args, []byte(a))
		}
		live.Execute(&b, clk.Now())
		r := b.Replies[0]
		var got string
		switch r.Kind {
		case ReplyInt:
			got = strconv.FormatInt(r.Int, 10)
		case ReplyMap:
			for i := 0; i+1 < len(r.Items); i += 2 {
				got += bulkText(r.Items[i]) + "=" + bulkText(r.Items[i+1]) + " "
			}
		case ReplySet:
			for _, it := range r.Items {
				got += bulkText(it) + " "
			}
		default:
			got = fmt.Sprintf("%+v", r)
		}
		if got != want {
			t.Fatalf("step %d %v %s %q: got %q, want %q", step, c.Op, key, args, got, want)
		}
	}
	for _, shards := range []int{4, 1} {
		rebuilt := New(Config{Shards: shards})
		for i, rec := range j.snapshot() {
			if _, err := rebuilt.Replay(rec, nil); err != nil {
				t.Fatalf("record %d: %v", i, err)
			}
		}
		if got, want := dump(t, rebuilt, clk.Now()), dump(t, live, clk.Now()); got != want {
			t.Fatalf("%d shards: replayed state differs\n got %.400s\nwant %.400s", shards, got, want)
		}
		rebuilt.Close()
	}
}

func TestScanCursorIsStrtoul(t *testing.T) {
	for _, s := range []string{"0", "", "00", "+0", "-0", "-1", "18446744073709551615", "-18446744073709551615", "5\x00junk", "\x00"} {
		if !hsValidCursor([]byte(s)) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{" 0", "0 ", "x", "-", "+", "+\x00", "1.5", "0x1", "18446744073709551616", "-18446744073709551616", "\t1"} {
		if hsValidCursor([]byte(s)) {
			t.Errorf("%q accepted", s)
		}
	}
}

// The hot paths allocate nothing beyond what any command costs (EXISTS):
// a field updated in place, a value read, a field tested.
func TestHashHotPathsDoNotAllocate(t *testing.T) {
	e := New(Config{Shards: 1})
	defer e.Close()
	var b Batch
	key := []byte("k")
	run := func(op Op, args ...[]byte) {
		b.Reset()
		c := b.Add()
		c.Op, c.Key = op, key
		c.Args = append(c.Args, args...)
		e.Execute(&b, 1)
	}
	bs := func(s ...string) [][]byte {
		var out [][]byte
		for _, a := range s {
			out = append(out, []byte(a))
		}
		return out
	}
	run(OpHSet, bs("f", "10", "g", "x")...)
	base := testing.AllocsPerRun(200, func() { run(OpExists) })
	for _, tc := range []struct {
		op   Op
		args []string
	}{
		{OpHIncrBy, []string{"f", "1"}},
		{OpHSet, []string{"g", "y"}},
		{OpHGet, []string{"g"}},
		{OpHExists, []string{"f"}},
	} {
		args := bs(tc.args...)
		if n := testing.AllocsPerRun(200, func() { run(tc.op, args...) }); n > base {
			t.Errorf("%v allocates %.1f times per command (EXISTS: %.1f)", tc.op, n, base)
		}
	}
}
