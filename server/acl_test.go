package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// twin is one raw connection to Sluice and one to Redis, sent the same
// commands.
type twin struct {
	t             *testing.T
	sluice, redis *sluicetest.RawConn
}

func newTwin(t *testing.T, ts *sluicetest.Server, r *sluicetest.Redis) *twin {
	return &twin{t: t, sluice: sluicetest.DialRaw(t, "tcp", ts.Addr), redis: sluicetest.DialRaw(t, r.Network, r.Addr)}
}

// protocols runs f once over RESP2 and once over RESP3 (after HELLO 3 on
// both connections; the HELLO replies name different servers).
func protocols(t *testing.T, f func(t *testing.T, resp3 bool)) {
	for _, resp3 := range []bool{false, true} {
		name := "resp2"
		if resp3 {
			name = "resp3"
		}
		t.Run(name, func(t *testing.T) { f(t, resp3) })
	}
}

// hello switches both connections to RESP3 when asked.
func (w *twin) hello(resp3 bool) {
	w.t.Helper()
	if !resp3 {
		return
	}
	got, want := w.both("HELLO", "3")
	if !strings.HasPrefix(got, "%7\r\n") || !strings.HasPrefix(want, "%7\r\n") {
		w.t.Fatalf("HELLO 3:\n sluice %q\n redis  %q", got, want)
	}
}

// same sends args to both and fails unless the replies are the same
// bytes, once single-command ACL rules are put in order: Redis lists them
// in its command dictionary's order, which changes from process to
// process.
func (w *twin) same(args ...string) string {
	w.t.Helper()
	got, want := w.sluice.Do(w.t, args...), w.redis.Do(w.t, args...)
	if len(args) > 1 && strings.EqualFold(args[0], "acl") {
		got, want = sortSingleRules(got), sortSingleRules(want)
	}
	if got != want {
		w.t.Fatalf("%q:\n sluice %q\n redis  %q", args, got, want)
	}
	return got
}

// sortSingleRules sorts, in every line of a reply, the trailing run of
// single-command rules (+get -set), which is where ACL descriptions put
// them. Lengths are unchanged, so the RESP framing stays valid.
func sortSingleRules(reply string) string {
	lines := strings.Split(reply, "\r\n")
	for i, l := range lines {
		f := strings.Split(l, " ")
		j := len(f)
		for j > 0 && len(f[j-1]) > 1 && (f[j-1][0] == '+' || f[j-1][0] == '-') && f[j-1][1] != '@' {
			j--
		}
		if len(f)-j > 1 {
			slices.Sort(f[j:])
			lines[i] = strings.Join(f, " ")
		}
	}
	return strings.Join(lines, "\r\n")
}

// both sends args to both and returns both replies.
func (w *twin) both(args ...string) (string, string) {
	w.t.Helper()
	return w.sluice.Do(w.t, args...), w.redis.Do(w.t, args...)
}

// sluiceNames are the commands and subcommands Sluice has that Redis has
// too: the ones whose ACL categories must be Redis's.
func redisAlso(t *testing.T, w *twin) map[string]bool {
	names := map[string]bool{}
	redisAll := map[string]bool{}
	for _, cat := range parseBulks(w.redis.Do(t, "ACL", "CAT")) {
		for _, n := range parseBulks(w.redis.Do(t, "ACL", "CAT", cat)) {
			redisAll[n] = true
		}
	}
	for _, cat := range parseBulks(w.sluice.Do(t, "ACL", "CAT")) {
		for _, n := range parseBulks(w.sluice.Do(t, "ACL", "CAT", cat)) {
			if redisAll[n] {
				names[n] = true
			}
		}
	}
	return names
}

// parseBulks reads a flat RESP2 array of bulk strings.
func parseBulks(reply string) []string {
	lines := strings.Split(reply, "\r\n")
	var out []string
	for i := 1; i+1 < len(lines); i += 2 {
		if strings.HasPrefix(lines[i], "$") {
			out = append(out, lines[i+1])
		}
	}
	return out
}

// Every Redis category holds, among the commands both servers have,
// exactly the ones Redis puts in it: ACL rules by category mean the same
// on both. Sluice lists Redis's categories in Redis's order, then its own.
func TestACLCategoriesMatchRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t))
	redisCats := parseBulks(w.redis.Do(t, "ACL", "CAT"))
	sluiceCats := parseBulks(w.sluice.Do(t, "ACL", "CAT"))
	if want := append(slices.Clone(redisCats), "limiter", "cluster"); !slices.Equal(sluiceCats, want) {
		t.Fatalf("ACL CAT:\n sluice %v\n want   %v", sluiceCats, want)
	}
	shared := redisAlso(t, w)
	if len(shared) < 50 {
		t.Fatalf("only %d commands in common: the test proves little", len(shared))
	}
	for _, cat := range redisCats {
		filter := func(names []string) []string {
			var out []string
			for _, n := range names {
				if shared[n] {
					out = append(out, n)
				}
			}
			slices.Sort(out)
			return out
		}
		got := filter(parseBulks(w.sluice.Do(t, "ACL", "CAT", cat)))
		want := filter(parseBulks(w.redis.Do(t, "ACL", "CAT", cat)))
		if !slices.Equal(got, want) {
			t.Errorf("@%s:\n sluice %v\n redis  %v", cat, got, want)
		}
	}
	w.same("ACL", "CAT", "nosuch")
}

// Scripted ACL sessions, replies compared byte for byte with Redis's:
// users, flags, passwords, key patterns, rule errors, descriptions, and
// what a user may run.
func TestACLTranscriptMatchesRedis(t *testing.T) { protocols(t, testACLTranscript) }

func testACLTranscript(t *testing.T, resp3 bool) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	r := sluicetest.StartRedis(t)
	w := newTwin(t, ts, r)
	w.hello(resp3)
	steps := [][]string{
		{"ACL", "LIST"},
		{"ACL", "USERS"},
		{"ACL", "WHOAMI"},
		{"ACL", "SETUSER", "alice"},
		{"ACL", "LIST"},
		{"ACL", "GETUSER", "alice"},
		{"ACL", "SETUSER", "alice", "on", ">pw", "~app:*", "%R~ro:*", "-@all", "+@read", "+set", "-get"},
		{"ACL", "GETUSER", "alice"},
		{"ACL", "LIST"},
		{"ACL", "SETUSER", "bob", "on", "nopass", "allkeys", "+@all", "-flushall"},
		{"ACL", "SETUSER", "bob", "+cluster|info"},
		{"ACL", "GETUSER", "bob"},
		{"ACL", "SETUSER", "carl", "on", ">x", "-@all", "+cluster|info", "+cluster|slots", "~*"},
		{"ACL", "GETUSER", "carl"},
		{"ACL", "SETUSER", "dan", "on", ">p", "~app:*", "-@all", "+get", "+set", "+incr", "+del"},
		{"ACL", "SETUSER", "eve", "on", ">p", "%RW~k", "%R~r", "%W~w", "%W~r"},
		{"ACL", "GETUSER", "eve"},
		{"ACL", "SETUSER", "eve", "+select|0"},
		{"ACL", "GETUSER", "eve"},
		{"ACL", "SETUSER", "fay", "on", ">a", ">b", ">a", "<a", "#" + sha("c"), "!" + sha("b")},
		{"ACL", "GETUSER", "fay"},
		{"ACL", "SETUSER", "gus", "on", "nopass", "-@all", "+@connection", "+@string"},
		{"ACL", "GETUSER", "gus"},
		{"ACL", "SETUSER", "gus", "reset"},
		{"ACL", "GETUSER", "gus"},
		{"ACL", "SETUSER", "hal", "on", "nopass", "+@all", "-@dangerous", "~*", "&*"},
		{"ACL", "GETUSER", "hal"},
		{"ACL", "SETUSER", "ida", "on", "nopass", "+@all", "-@keyspace", "+del"},
		{"ACL", "GETUSER", "ida"},
		{"ACL", "SETUSER", "jon", "allchannels", "&x", "resetchannels", "&x", "&y"},
		{"ACL", "GETUSER", "jon"},
		// Errors, each leaving the user as it was.
		{"ACL", "SETUSER", "dan", "~x", "allkeys", "~y"},
		{"ACL", "SETUSER", "dan", "bogus"},
		{"ACL", "SETUSER", "dan", "+nosuch"},
		{"ACL", "SETUSER", "dan", "+@nosuch"},
		{"ACL", "SETUSER", "dan", "%X~a"},
		{"ACL", "SETUSER", "dan", "<nope"},
		{"ACL", "SETUSER", "dan", "#abc"},
		{"ACL", "SETUSER", "dan", "+config|get|x"},
		{"ACL", "SETUSER", "dan", "-select|0"},
		{"ACL", "SETUSER", "dan", "+config|"},
		{"ACL", "SETUSER", "dan", "allchannels", "&z"},
		{"ACL", "SETUSER", "a b"},
		{"ACL", "GETUSER", "dan"},
		{"ACL", "DELUSER", "default"},
		{"ACL", "DELUSER", "nobody", "jon"},
		{"ACL", "GETUSER", "nobody"},
		{"ACL", "USERS"},
		{"ACL", "LIST"},
		{"ACL", "CAT", "nosuch"},
		{"ACL", "GENPASS", "0"},
		{"ACL", "GENPASS", "x"},
		{"ACL", "LOG", "x"},
		{"ACL", "SAVE"},
		{"ACL", "LOAD"},
		{"ACL", "NOSUCH"},
		{"ACL", "DRYRUN", "nobody", "get", "k"},
		{"ACL", "DRYRUN", "dan", "nosuch"},
		{"ACL", "DRYRUN", "dan", "get"},
		// Authentication.
		{"AUTH", "dan", "wrong"},
		{"AUTH", "nobody", "x"},
		{"AUTH", "x"},
		{"AUTH", "a", "b", "c"},
		{"AUTH", "alice", "pw"},
		{"ACL", "WHOAMI"},
		{"GET", "app:1"},
		{"GET", "ro:1"},
		{"SET", "app:1", "v"},
		{"SET", "ro:1", "v"},
		{"SET", "app:2", "v", "GET"},
		{"FLUSHALL"},
		{"CONFIG", "GET", "maxmemory"},
		{"DEL", "app:1"},
		{"EXISTS", "app:1"},
		{"AUTH", "dan", "p"},
		{"GET", "app:1"},
		{"GET", "other"},
		{"FLUSHALL"},
		{"ACL", "WHOAMI"},
		{"INCR", "app:n"},
		{"MGET", "app:1", "x"},
		{"AUTH", "carl", "x"},
		{"CLUSTER", "INFO"},
		{"CLUSTER", "NODES"},
		{"AUTH", "default", "anything"},
		{"ACL", "WHOAMI"},
	}
	for _, s := range steps {
		w.same(s...)
	}

	// ACL LOG: the same entries, counted alike; the age and the client
	// line are each server's own.
	got, want := w.both("ACL", "LOG")
	if g, wnt := stripLogNoise(got), stripLogNoise(want); g != wnt {
		t.Fatalf("ACL LOG:\n sluice %q\n redis  %q", g, wnt)
	}
	w.same("ACL", "LOG", "RESET")
	w.same("ACL", "LOG")
}

// stripLogNoise blanks each ACL LOG entry's age-seconds and client-info
// values (a bulk string, or a RESP3 double for the age).
func stripLogNoise(reply string) string {
	lines := strings.Split(reply, "\r\n")
	for i := 0; i+2 < len(lines); i++ {
		if lines[i] != "age-seconds" && lines[i] != "client-info" {
			continue
		}
		if strings.HasPrefix(lines[i+1], ",") {
			lines[i+1] = ","
		} else {
			lines[i+1], lines[i+2] = "$", "-"
		}
	}
	return strings.Join(lines, "\r\n")
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A seeded random sequence of ACL SETUSER modifiers, valid and not, on a
// few users, each step compared with Redis: the reply, the flags,
// passwords, keys and channels byte for byte, and what the user may run
// (ACL DRYRUN over a probe of commands and keys). The command rules'
// text is compared too where it is a single category or command away
// from +@all or -@all; beyond that Redis's best-fit description depends
// on its whole command table, and the permissions are what must agree.
func TestACLRandomRulesMatchRedis(t *testing.T) { protocols(t, testACLRandomRules) }

func testACLRandomRules(t *testing.T, resp3 bool) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t))
	w.hello(resp3)
	mods := []string{
		"on", "off", "nopass", "resetpass", ">pw1", ">pw2", "<pw1", "#" + sha("pw3"), "!" + sha("pw3"), "#bad", "reset",
		"allkeys", "resetkeys", "~app:*", "~k*", "%R~ro:*", "%W~wo:*", "%RW~rw:*", "~*",
		"allchannels", "resetchannels", "&ch*",
		"allcommands", "nocommands", "+@all", "-@all", "+@read", "-@write", "+@string", "-@keyspace", "+@fast",
		"-@slow", "+@connection", "-@dangerous", "+@admin", "-@admin", "+@write",
		"+get", "-get", "+set", "-set", "+del", "+incr", "-incr", "+config|get", "-config|set", "+config", "-config",
		"+client|id", "-client", "+select|0", "+cluster|info", "-cluster",
		"bogus", "+nosuch", "+@nosuch", "%Q~x",
	}
	probes := [][]string{
		{"get", "app:1"}, {"get", "ro:1"}, {"get", "wo:1"}, {"get", "rw:1"}, {"get", "k1"}, {"get", "other"},
		{"set", "app:1", "v"}, {"set", "wo:1", "v"}, {"set", "ro:1", "v"}, {"set", "rw:1", "v", "GET"},
		{"mget", "app:1", "k1"}, {"incr", "rw:1"}, {"incr", "wo:1"}, {"del", "wo:1"}, {"exists", "ro:1"},
		{"type", "wo:1"}, {"ttl", "app:1"}, {"expire", "app:1", "5"}, {"persist", "k1"},
		{"scan", "0"}, {"keys", "*"}, {"flushall"}, {"dbsize"}, {"ping"}, {"echo", "x"}, {"info"},
		{"config", "get", "maxmemory"}, {"config", "set", "maxmemory", "1"}, {"client", "id"}, {"client", "list"},
		{"command", "count"}, {"select", "0"}, {"select", "1"}, {"time"}, {"save"}, {"lastsave"},
		{"cluster", "info"}, {"cluster", "forget", "x"}, {"auth", "x"}, {"acl", "whoami"}, {"acl", "setuser", "z"},
	}
	users := []string{"u1", "u2", "u3"}
	rng := rand.New(rand.NewPCG(20261201, 11))
	simple := func(rules string) bool {
		f := strings.Fields(rules)
		return len(f) <= 2 && (f[0] == "+@all" || f[0] == "-@all")
	}
	for step := range 400 {
		user := users[rng.IntN(len(users))]
		args := []string{"ACL", "SETUSER", user}
		for range 1 + rng.IntN(4) {
			args = append(args, mods[rng.IntN(len(mods))])
		}
		w.same(args...)
		got, want := w.both("ACL", "GETUSER", user)
		gotF, wantF := parseGetUser(got), parseGetUser(want)
		for _, field := range []string{"flags", "passwords", "keys", "channels"} {
			if gotF[field] != wantF[field] {
				t.Fatalf("step %d %q: %s:\n sluice %q\n redis  %q", step, args, field, gotF[field], wantF[field])
			}
		}
		if simple(wantF["commands"]) && gotF["commands"] != wantF["commands"] {
			t.Fatalf("step %d %q: commands:\n sluice %q\n redis  %q", step, args, gotF["commands"], wantF["commands"])
		}
		for _, p := range probes {
			w.same(append([]string{"ACL", "DRYRUN", user}, p...)...)
		}
	}
}

// parseGetUser splits an ACL GETUSER reply into its fields' raw bytes.
func parseGetUser(reply string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(reply, "\r\n")
	names := map[string]bool{"flags": true, "passwords": true, "commands": true, "keys": true, "channels": true, "selectors": true}
	cur := ""
	for i := 1; i < len(lines); i++ {
		if names[lines[i]] && strings.HasPrefix(lines[i-1], "$") {
			cur = lines[i]
			continue
		}
		if cur != "" {
			out[cur] += lines[i] + "\n"
		}
	}
	return out
}

// The ACL file: ACL SAVE writes every user as ACL LIST shows them, a new
// server loads them at start, and ACL LOAD replaces the users, refusing a
// bad file whole with the line at fault.
func TestACLFileSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ts := sluicetest.Start(t, sluicetest.Options{Server: server.Config{ACLFile: path}})
	ts.Expect(t, "OK", "ACL", "SETUSER", "app", "on", ">s3cret", "~app:*", "-@all", "+@limiter")
	ts.Expect(t, "OK", "ACL", "SAVE")
	list := ts.Do(t, "ACL", "LIST")
	text, _ := os.ReadFile(path)
	if !strings.Contains(string(text), "user app on #"+sha("s3cret")+" ~app:* resetchannels -@all +@limiter\n") {
		t.Fatalf("ACL file:\n%s", text)
	}

	again := sluicetest.Start(t, sluicetest.Options{Server: server.Config{ACLFile: path}})
	if err := again.Server.LoadACL(); err != nil {
		t.Fatal(err)
	}
	if got := again.Do(t, "ACL", "LIST"); fmt.Sprint(got) != fmt.Sprint(list) {
		t.Fatalf("after restart ACL LIST %v, want %v", got, list)
	}

	os.WriteFile(path, []byte("user app on >x +nosuch\nuser ok on nopass\nnonsense\n"), 0o600)
	err := again.Client.Do(ctx, "ACL", "LOAD").Err()
	if err == nil || !strings.Contains(err.Error(), path+":1: Error in applying operation '+nosuch'") || !strings.Contains(err.Error(), path+":3") {
		t.Fatalf("a bad ACL file: %v", err)
	}
	if got := again.Do(t, "ACL", "LIST"); fmt.Sprint(got) != fmt.Sprint(list) {
		t.Fatalf("a refused ACL LOAD changed the users: %v", got)
	}
}
