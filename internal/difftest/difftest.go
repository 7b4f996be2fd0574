// Package difftest drives Sluice and a real redis-server with the same
// seeded random command sequences and compares every reply byte for byte,
// then the final state of both. Each data-type family registers its
// command generators (see Register); a test mixes them all over one key
// pool, so type clashes (WRONGTYPE) come up as often as in real use.
//
// Redis is the oracle. Where Redis's reply order comes from its hash
// tables rather than from the data (HGETALL of a big hash, SMEMBERS, SCAN),
// both replies are put in order before they are compared; everything else
// must match exactly.
package difftest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Family is one data-type family's generators. Each generator returns a
// script: one or more commands sent in order. A command whose first
// argument is Other goes over the second connection (another client, for
// WATCH); one that is just Sleep and a number of milliseconds waits, so
// that short expiries pass on both servers before the next command; one
// whose first argument is Unanswered is sent to both and no reply is read
// (CLIENT REPLY OFF or SKIP): a reply either server sends anyway is read
// as the next command's, so the mismatch shows there.
type Family struct {
	Name string
	Gens func(g *Gen) []func() [][]string
}

// Script markers.
const (
	Other      = "@other"
	Sleep      = "@sleep"
	Unanswered = "@unanswered"
)

var families []Family

// Register adds a family; call it from an init function.
func Register(f Family) { families = append(families, f) }

// Families lists the registered family names.
func Families() []string {
	var names []string
	for _, f := range families {
		names = append(names, f.Name)
	}
	return names
}

// Settings reads a differential run's size, seed and families from the
// environment: SLUICE_DIFF_STEPS (default steps), SLUICE_DIFF_SEED
// (default 20261201), SLUICE_DIFF_FAMILIES (comma-separated; default every
// registered family).
func Settings(steps int) (int, uint64, []string) {
	seed := uint64(20261201)
	if n, err := strconv.Atoi(os.Getenv("SLUICE_DIFF_STEPS")); err == nil && n > 0 {
		steps = n
	}
	if n, err := strconv.ParseUint(os.Getenv("SLUICE_DIFF_SEED"), 10, 64); err == nil {
		seed = n
	}
	var only []string
	if f := os.Getenv("SLUICE_DIFF_FAMILIES"); f != "" {
		only = strings.Split(f, ",")
	}
	return steps, seed, only
}

// Gen supplies random arguments from small pools, so that commands keep
// meeting each other's keys, fields and members.
type Gen struct {
	R    *rand.Rand
	keys []string
	// bodies are the single-command generators transactions draw from.
	bodies []func() [][]string
	// FingerprintWatch: the server under test checks WATCH by the key's
	// contents (a cluster), so another client's change to a watched key
	// always writes a new value: a change back to identical bytes is the
	// one case where that check and Redis's differ (docs/transactions.md).
	FingerprintWatch bool
	// Replicated: the server under test runs scripts from a replicated
	// log, where math.random restarts from the seed every run (Redis 7
	// goes on with one sequence), so generated scripts draw no random
	// numbers.
	Replicated bool
	unique     int
}

// NewGen returns a generator seeded with seed.
func NewGen(seed uint64) *Gen {
	return &Gen{
		R: rand.New(rand.NewPCG(seed, 0x5eed)),
		keys: []string{"a", "b", "c", "d", "h", "l", "s", "z", "{t}1", "{t}2",
			"bin\x00\xff", "sp ace", "k\r\nv", strings.Repeat("long", 40)},
	}
}

// Key is a key from the shared pool.
func (g *Gen) Key() string { return g.keys[g.R.IntN(len(g.keys))] }

// Pick is one of xs.
func (g *Gen) Pick(xs ...string) string { return xs[g.R.IntN(len(xs))] }

// Chance is true with probability 1/n.
func (g *Gen) Chance(n int) bool { return g.R.IntN(n) == 0 }

// Int is a decimal integer in [lo, hi].
func (g *Gen) Int(lo, hi int) string { return strconv.Itoa(lo + g.R.IntN(hi-lo+1)) }

// Member is a field, member or element: mostly from a small pool
// (including binary ones and integers), sometimes long.
func (g *Gen) Member() string {
	switch g.R.IntN(10) {
	case 0:
		return g.Int(-20, 20)
	case 1:
		return g.Pick("", "\x00", "a\r\nb", "\xff\xfe", "é")
	case 2:
		return strings.Repeat("m", 60+g.R.IntN(20))
	}
	return "m" + strconv.Itoa(g.R.IntN(12))
}

// Value is a string value: numbers, empty, binary, text.
func (g *Gen) Value() string {
	switch g.R.IntN(8) {
	case 0:
		return g.Int(-1000, 1000)
	case 1:
		return g.Pick("9223372036854775807", "-9223372036854775808", "1.5", "1e3", "0x10", " 1", "")
	case 2:
		return "x y\r\nz\x00"
	case 3:
		return strings.Repeat("v", 70)
	}
	return "v" + strconv.Itoa(g.R.IntN(50))
}

// Float is a score or increment, now and then malformed.
func (g *Gen) Float() string {
	switch g.R.IntN(12) {
	case 0:
		return g.Pick("inf", "-inf", "+inf")
	case 1:
		return g.Pick("x", "nan", "1.5.5", "", " 1")
	case 2:
		return g.Pick("1.5", "-0.25", "1e3", "3.0000000000000001", "0.1")
	}
	return g.Int(-10, 10)
}

// Many repeats f n times into one argument list.
func (g *Gen) Many(n int, f func() []string) []string {
	var out []string
	for range n {
		out = append(out, f()...)
	}
	return out
}

// Pair is one connection to Sluice and one to Redis receiving the same
// commands, plus a second pair for scripts that need another client.
type Pair struct {
	TB          testing.TB
	Sluice      *sluicetest.RawConn
	Redis       *sluicetest.RawConn
	otherSluice *sluicetest.RawConn
	otherRedis  *sluicetest.RawConn
	redisNet    string
	redisAddr   string
	sluiceAddr  string
	resp3       bool
	inMulti     bool
	queued      []string          // the names of the commands queued in the open MULTI
	history     []string          // the last commands sent, for failure reports
	bodies      map[string]string // the script bodies sent, by SHA1
	// ReplyLagMS is how many milliseconds after Sluice stamps a command
	// Redis may get it: a cluster answers a write once Raft commits it, so
	// a relative expiry Sluice set reads that much earlier than Redis's.
	ReplyLagMS int64
	// Counts is how many commands each name was sent (both servers).
	Counts map[string]int
}

// NewPair connects to a Sluice at sluiceAddr (TCP) and a Redis.
func NewPair(tb testing.TB, sluiceAddr string, r *sluicetest.Redis) *Pair {
	p := &Pair{TB: tb, sluiceAddr: sluiceAddr, redisNet: r.Network, redisAddr: r.Addr, Counts: map[string]int{}}
	p.Sluice = sluicetest.DialRaw(tb, "tcp", sluiceAddr)
	p.Redis = sluicetest.DialRaw(tb, r.Network, r.Addr)
	p.otherSluice = sluicetest.DialRaw(tb, "tcp", sluiceAddr)
	p.otherRedis = sluicetest.DialRaw(tb, r.Network, r.Addr)
	return p
}

// Hello switches the main connections to RESP3.
func (p *Pair) Hello3() {
	p.TB.Helper()
	p.resp3 = true
	for _, c := range []*sluicetest.RawConn{p.Sluice, p.Redis} {
		if got := c.Do(p.TB, "HELLO", "3"); !strings.HasPrefix(got, "%7\r\n") {
			p.TB.Fatalf("HELLO 3: %q", got)
		}
	}
}

// Run sends steps scripts drawn at random from every registered family
// (or only those named) and fails at the first reply that differs.
func (p *Pair) Run(g *Gen, steps int, only ...string) {
	p.TB.Helper()
	var gens []func() [][]string
	for _, f := range families {
		fg := f.Gens(g)
		if len(only) == 0 || slices.Contains(only, f.Name) {
			gens = append(gens, fg...)
		}
		// Transactions and scripts draw their commands from every other
		// family, whichever families the run sends on their own (a run
		// of "tx" alone once had nothing to draw from).
		if f.Name != "tx" {
			g.bodies = append(g.bodies, fg...)
		}
	}
	if len(gens) == 0 {
		p.TB.Fatalf("no generators for %v (have %v)", only, Families())
	}
	for step := range steps {
		for _, args := range gens[g.R.IntN(len(gens))]() {
			p.Step(step, args...)
		}
	}
	if p.inMulti {
		p.Step(steps, "DISCARD")
	}
}

// Step sends one command (or marker) to both servers and compares.
func (p *Pair) Step(step int, args ...string) {
	p.TB.Helper()
	if len(args) == 2 && args[0] == Sleep {
		ms, _ := strconv.Atoi(args[1])
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return
	}
	sl, rd := p.Sluice, p.Redis
	if args[0] == Unanswered {
		args = args[1:]
		p.Counts[strings.ToLower(args[0])]++
		p.remember(fmt.Sprintf("%d (unanswered) %q", step, args))
		sl.Send(p.TB, args...)
		rd.Send(p.TB, args...)
		return
	}
	if args[0] == Other {
		args = args[1:]
		sl, rd = p.otherSluice, p.otherRedis
	}
	name := strings.ToLower(args[0])
	p.Counts[name]++
	who := ""
	if sl != p.Sluice {
		who = "(other) "
	}
	p.remember(fmt.Sprintf("%d %s%q", step, who, args))
	if !p.inMulti && sl == p.Sluice && isScan(name) {
		p.sameScan(step, args)
		return
	}
	if (name == "eval" || name == "eval_ro" || (name == "script" && len(args) == 3 && strings.EqualFold(args[1], "load"))) && len(args) > 2 {
		body := args[1]
		if name == "script" {
			body = args[2]
		}
		if p.bodies == nil {
			p.bodies = map[string]string{}
		}
		p.bodies[shaHex(body)] = body
	}
	got, want := sl.Do(p.TB, args...), rd.Do(p.TB, args...)
	if sl == p.Sluice {
		switch {
		case name == "multi" && want == "+OK\r\n":
			p.inMulti, p.queued = true, p.queued[:0]
		case (name == "exec" || name == "discard" || name == "reset") && p.inMulti:
			p.inMulti = false
		case p.inMulti && want == "+QUEUED\r\n":
			p.queued = append(p.queued, name)
		}
	}
	if got != want && !p.inMulti && sl == p.Sluice {
		got, want = p.normalize(args, got), p.normalize(args, want)
		switch {
		case isClockRead(name):
			got = p.nearClock(name, got, want)
		case name == "exec":
			got = p.nearClockInItems(got, want, p.queued)
		case strings.HasPrefix(name, "eval"):
			got = p.nearClockInItems(got, want, scriptCalls(p.bodyOf(name, args)))
		}
	}
	if name == "reset" && p.resp3 && sl == p.Sluice && got == want {
		p.Hello3() // RESET went back to RESP2
	}
	if got != want {
		p.TB.Fatalf("step %d %q:\n sluice %q\n redis  %q\nlast commands:\n%s", step, args, got, want, strings.Join(p.history, "\n"))
	}
}

// remember keeps the last commands sent, for a failure's report.
func (p *Pair) remember(line string) {
	p.history = append(p.history, line)
	if len(p.history) > 20 {
		p.history = p.history[1:]
	}
}

// clockReads are the commands whose reply is read off the server's
// clock, in seconds or milliseconds, and how far Sluice's reply may be
// from Redis's because Sluice is asked a moment first. A relative expiry
// set on Sluice first can fall a millisecond earlier than Redis's, so an
// EXPIRETIME or PEXPIRETIME may read one lower (never higher: a Sluice
// that counts from a later instant than Redis reads one higher, and that
// is the bug this must catch). A TTL may also read one higher, for Sluice
// reads the remaining time first.
var clockReads = map[string]struct{ below, above int64 }{
	"ttl":         {1, 1},
	"expiretime":  {1, 0},
	"pexpiretime": {1, 0},
}

// nearClock returns want when got and want are both non-negative
// integers within name's allowance of each other, else got. The
// sentinels -1 and -2 must match exactly.
func (p *Pair) nearClock(name, got, want string) string {
	g, gerr := Parse([]byte(got))
	w, werr := Parse([]byte(want))
	if gerr != nil || werr != nil || g.Kind != ':' || w.Kind != ':' {
		return got
	}
	a, aerr := strconv.ParseInt(g.Str, 10, 64)
	b, berr := strconv.ParseInt(w.Str, 10, 64)
	allow := clockReads[name]
	if name == "pexpiretime" {
		allow.below += p.ReplyLagMS
	}
	if aerr != nil || berr != nil || a < 0 || b < 0 || a < b-allow.below || a > b+allow.above {
		return got
	}
	return want
}

// nearClockInItems applies nearClock to the items of an array reply that
// answer clock reads (names[i] is what item i answers: the commands an
// EXEC ran, the calls a generated script made), and returns got rendered
// again with those replaced.
func (p *Pair) nearClockInItems(got, want string, names []string) string {
	g, gerr := Parse([]byte(got))
	w, werr := Parse([]byte(want))
	if gerr != nil || werr != nil || g.Kind != '*' || w.Kind != '*' || len(g.Items) != len(w.Items) || len(g.Items) != len(names) {
		return got
	}
	for i, name := range names {
		if isClockRead(name) {
			g.Items[i], _ = Parse([]byte(p.nearClock(name, g.Items[i].Render(), w.Items[i].Render())))
		}
	}
	if r := g.Render(); r == w.Render() {
		return want
	}
	return got
}

// scriptCall is one call a generated script body makes, in its reply
// table's order (genScript writes "r[i] = redis.call("name", ...)").
var scriptCall = regexp.MustCompile(`(?m)^r\[\d+\] = redis\.p?call\("([a-z_.]+)"`)

// scriptCalls names the calls of a generated body, item by item.
func scriptCalls(body string) []string {
	var names []string
	for _, m := range scriptCall.FindAllStringSubmatch(body, -1) {
		names = append(names, m[1])
	}
	return names
}

// bodyOf is the body an EVAL sends, or the one an EVALSHA names (from
// the bodies this pair has sent).
func (p *Pair) bodyOf(name string, args []string) string {
	if len(args) < 2 {
		return ""
	}
	if strings.HasPrefix(name, "evalsha") {
		return p.bodies[strings.ToLower(args[1])]
	}
	return args[1]
}

// unordered lists the replies whose order is Redis's hash table order
// (for hashes, only once Redis has converted the hash to a hash table),
// and how many items go together.
var unordered = map[string]int{
	"hgetall": 2, "hkeys": 1, "hvals": 1, "smembers": 1, "keys": 1,
	"sinter": 1, "sunion": 1, "sdiff": 1,
}

func (p *Pair) normalize(args []string, reply string) string {
	name := strings.ToLower(args[0])
	group, ok := unordered[name]
	if !ok {
		return reply
	}
	if name[0] == 'h' && p.redisEncoding(args[1]) != "hashtable" {
		return reply
	}
	v, err := Parse([]byte(reply))
	if err != nil || v.Kind == '-' {
		return reply
	}
	v.SortItems(group)
	return v.Render()
}

func (p *Pair) redisEncoding(key string) string {
	v, err := Parse([]byte(p.Redis.Do(p.TB, "OBJECT", "ENCODING", key)))
	if err != nil {
		return ""
	}
	return v.Str
}

func isScan(name string) bool {
	return name == "scan" || name == "hscan" || name == "sscan" || name == "zscan"
}

// sameScan runs a SCAN-family command as a whole iteration from its
// cursor on both servers, and compares the sorted union of what each
// returned: the cursors themselves are each server's own. A small
// collection comes back in one reply with cursor 0 from both, and is
// compared exactly.
func (p *Pair) sameScan(step int, args []string) {
	p.TB.Helper()
	got, want := p.Sluice.Do(p.TB, args...), p.Redis.Do(p.TB, args...)
	if got == want {
		return
	}
	gv, gerr := Parse([]byte(got))
	wv, werr := Parse([]byte(want))
	if gerr != nil || werr != nil || gv.Kind == '-' || wv.Kind == '-' || len(gv.Items) != 2 || len(wv.Items) != 2 {
		p.TB.Fatalf("step %d %q:\n sluice %q\n redis  %q", step, args, got, want)
	}
	name := strings.ToLower(args[0])
	group := 1
	if name == "hscan" || name == "zscan" {
		group = 2
	}
	curAt := 1
	if name != "scan" {
		curAt = 2
	}
	all := func(c *sluicetest.RawConn, first Value) []string {
		seen := map[string]bool{}
		var out []string
		add := func(v Value) {
			for i := 0; i+group <= len(v.Items[1].Items); i += group {
				var parts []string
				for k := range group {
					parts = append(parts, v.Items[1].Items[i+k].Render())
				}
				s := strings.Join(parts, "")
				if !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
		add(first)
		for cur := first.Items[0].Str; cur != "0"; {
			next := slices.Clone(args)
			next[curAt] = cur
			v, err := Parse([]byte(c.Do(p.TB, next...)))
			if err != nil || len(v.Items) != 2 {
				p.TB.Fatalf("step %d %q: bad reply while iterating", step, next)
			}
			add(v)
			cur = v.Items[0].Str
		}
		slices.Sort(out)
		return out
	}
	gs, ws := all(p.Sluice, gv), all(p.Redis, wv)
	if !slices.Equal(gs, ws) {
		p.TB.Fatalf("step %d %q (whole iteration):\n sluice %q\n redis  %q", step, args, gs, ws)
	}
}

// KeyState is one key as Dump reads it back.
type KeyState struct {
	Key, Type, Value string
	// TTL is the time to live in whole seconds, -1 for none.
	TTL int64
}

// Dump reads every key of the server at network/addr with SCAN and each
// type's read commands, over a fresh RESP2 connection.
func Dump(tb testing.TB, network, addr string) []KeyState {
	tb.Helper()
	return dump(tb, sluicetest.DialRaw(tb, network, addr))
}

// DumpReplica is Dump for a cluster follower: it reads its applied state
// after READONLY.
func DumpReplica(tb testing.TB, addr string) []KeyState {
	tb.Helper()
	c := sluicetest.DialRaw(tb, "tcp", addr)
	if got := c.Do(tb, "READONLY"); got != "+OK\r\n" {
		tb.Fatalf("READONLY: %q", got)
	}
	return dump(tb, c)
}

func dump(tb testing.TB, c *sluicetest.RawConn) []KeyState {
	do := func(args ...string) Value {
		v, err := Parse([]byte(c.Do(tb, args...)))
		if err != nil {
			tb.Fatalf("%q: %v", args, err)
		}
		return v
	}
	var keys []string
	for cur := "0"; ; {
		v := do("SCAN", cur, "COUNT", "100")
		for _, k := range v.Items[1].Items {
			keys = append(keys, k.Str)
		}
		if cur = v.Items[0].Str; cur == "0" {
			break
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var out []KeyState
	for _, k := range keys {
		ks := KeyState{Key: k, Type: do("TYPE", k).Str}
		var v Value
		switch ks.Type {
		case "none":
			continue // expired between SCAN and TYPE
		case "string":
			v = do("GET", k)
		case "hash":
			v = do("HGETALL", k)
			v.SortItems(2)
		case "list":
			v = do("LRANGE", k, "0", "-1")
		case "set":
			v = do("SMEMBERS", k)
			v.SortItems(1)
		case "zset":
			v = do("ZRANGE", k, "0", "-1", "WITHSCORES")
		default:
			v = Value{Kind: '+', Str: "(" + ks.Type + ")"}
		}
		ks.Value = v.Render()
		pttl, _ := strconv.ParseInt(do("PTTL", k).Str, 10, 64)
		ks.TTL = pttl
		if pttl > 0 {
			ks.TTL = (pttl + 500) / 1000
		}
		out = append(out, ks)
	}
	return out
}

// Compare fails unless two dumps hold the same keys, types and values,
// with times to live within slack seconds of each other.
func Compare(tb testing.TB, what string, got, want []KeyState, slack int64) {
	tb.Helper()
	diffs := 0
	report := func(format string, a ...any) {
		diffs++
		if diffs <= 10 {
			tb.Errorf("%s: "+format, append([]any{what}, a...)...)
		}
	}
	i, j := 0, 0
	for i < len(got) || j < len(want) {
		switch {
		case j == len(want) || (i < len(got) && got[i].Key < want[j].Key):
			report("key %q only in the first (%s)", got[i].Key, got[i].Type)
			i++
		case i == len(got) || got[i].Key > want[j].Key:
			report("key %q only in the second (%s)", want[j].Key, want[j].Type)
			j++
		default:
			a, b := got[i], want[j]
			if a.Type != b.Type || a.Value != b.Value {
				report("key %q: %s %q vs %s %q", a.Key, a.Type, a.Value, b.Type, b.Value)
			}
			if (a.TTL < 0) != (b.TTL < 0) || abs(a.TTL-b.TTL) > slack {
				report("key %q: ttl %d vs %d", a.Key, a.TTL, b.TTL)
			}
			i++
			j++
		}
	}
	if diffs > 10 {
		tb.Errorf("%s: %d differences in all", what, diffs)
	}
	if diffs == 0 {
		tb.Logf("%s: %d keys identical", what, len(got))
	}
}

// Same reports whether two dumps agree as Compare would accept.
func Same(got, want []KeyState, slack int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		a, b := got[i], want[i]
		if a.Key != b.Key || a.Type != b.Type || a.Value != b.Value || (a.TTL < 0) != (b.TTL < 0) || abs(a.TTL-b.TTL) > slack {
			return false
		}
	}
	return true
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// CountsLine summarizes how many commands a run sent, by name.
func (p *Pair) CountsLine() string {
	total := 0
	names := make([]string, 0, len(p.Counts))
	for n, c := range p.Counts {
		total += c
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%d commands, %d distinct:", total, len(names))
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%d", n, p.Counts[n])
	}
	return b.String()
}

func isClockRead(name string) bool {
	_, ok := clockReads[name]
	return ok
}
