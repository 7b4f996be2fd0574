package server_test

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/sluicetest"
)

// COMMAND LIST, with each filter, against a real redis-server: among the
// names both servers have (subcommands included, as parent|sub), each
// filter keeps the same ones. COMMAND GETKEYS and its errors, byte for
// byte.
func TestCommandListAndGetKeysMatchRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	w := newTwin(t, ts, sluicetest.StartRedis(t, "--databases", "1"))
	sluiceAll := parseBulks(w.sluice.Do(t, "COMMAND", "LIST"))
	redisAll := parseBulks(w.redis.Do(t, "COMMAND", "LIST"))
	if !slices.Contains(sluiceAll, "client|list") || !slices.Contains(sluiceAll, "memory|usage") {
		t.Fatalf("COMMAND LIST lacks subcommands: %v", sluiceAll)
	}
	shared := func(names, other []string) []string {
		var out []string
		for _, n := range names {
			if slices.Contains(other, n) {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return out
	}
	filters := [][]string{{"PATTERN", "*"}, {"PATTERN", "client*"}, {"pattern", "*|*"}, {"PATTERN", "Z*"}, {"PATTERN", "get?"},
		{"PATTERN", "[hz]set"}, {"PATTERN", "nothing*"}, {"MODULE", "any"}, {"ACLCAT", "nosuch"}}
	for _, cat := range parseBulks(w.redis.Do(t, "ACL", "CAT")) {
		filters = append(filters, []string{"ACLCAT", cat})
	}
	for _, f := range filters {
		args := append([]string{"COMMAND", "LIST", "FILTERBY"}, f...)
		got, want := w.both(args...)
		gotShared, wantShared := shared(parseBulks(got), redisAll), shared(parseBulks(want), sluiceAll)
		if !slices.Equal(gotShared, wantShared) {
			t.Errorf("%q, among the commands both have:\n sluice %v\n redis  %v", args, gotShared, wantShared)
		}
	}
	for _, args := range [][]string{
		{"LIST", "FILTERBY"}, {"LIST", "FILTERBY", "x", "y"}, {"LIST", "x"},
		{"GETKEYS"}, {"GETKEYS", "get"}, {"GETKEYS", "nosuch", "a"}, {"GETKEYS", "GET", "a"}, {"GETKEYS", "get", "a", "b"},
		{"GETKEYS", "mset", "a", "1", "b", "2"}, {"GETKEYS", "mset", "a"}, {"GETKEYS", "set", "a", "b", "get"},
		{"GETKEYS", "del", "a", "b", "c"}, {"GETKEYS", "rename", "a", "b"}, {"GETKEYS", "zadd", "k", "1", "m"},
		{"GETKEYS", "eval", "x", "2", "a", "b", "c"}, {"GETKEYS", "eval", "x", "5", "a"}, {"GETKEYS", "evalsha", "x", "-1"},
		{"GETKEYS", "object", "encoding", "k"}, {"GETKEYS", "object", "encoding"}, {"GETKEYS", "object", "nosuch", "k"},
		{"GETKEYS", "object", "help"}, {"GETKEYS", "memory", "usage", "k"}, {"GETKEYS", "client", "list"}, {"GETKEYS", "ping", "x"},
	} {
		w.same(append([]string{"COMMAND"}, args...)...)
	}
}
