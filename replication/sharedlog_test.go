package replication

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// TestSharedLogStores: each group's view of the shared file is a
// raft.LogStore and raft.StableStore as Raft expects them (empty indexes
// 0, ErrLogNotFound, inclusive DeleteRange, "not found" for a missing
// stable key), its groups kept apart, and what was stored found again
// after the file is reopened.
func TestSharedLogStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log.db")
	s, err := openSharedLog(path, false)
	if err != nil {
		t.Fatal(err)
	}
	g0, _ := s.group(0)
	g1, _ := s.group(1)
	for _, l := range []*groupLog{g0, g1} {
		if first, _ := l.FirstIndex(); first != 0 {
			t.Fatalf("empty log's first index %d", first)
		}
		if last, _ := l.LastIndex(); last != 0 {
			t.Fatalf("empty log's last index %d", last)
		}
		if _, err := l.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
			t.Fatalf("missing stable key: %v, want Raft's \"not found\"", err)
		}
		if _, err := l.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
			t.Fatalf("missing stable uint64: %v", err)
		}
	}
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry %d", i))})
	}
	if err := g0.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := g1.StoreLog(&raft.Log{Index: 5, Term: 7, Data: []byte("other group")}); err != nil {
		t.Fatal(err)
	}
	if err := g0.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	if err := g1.Set([]byte("LastVoteCand"), []byte("node-b")); err != nil {
		t.Fatal(err)
	}
	if err := g0.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if first, _ := g0.FirstIndex(); first != 4 {
			t.Fatalf("%s: first index %d after deleting 1-3", when, first)
		}
		if last, _ := g0.LastIndex(); last != 10 {
			t.Fatalf("%s: last index %d", when, last)
		}
		var got raft.Log
		if err := g0.GetLog(3, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("%s: deleted entry: %v", when, err)
		}
		if err := g0.GetLog(7, &got); err != nil || got.Index != 7 || got.Term != 2 || string(got.Data) != "entry 7" {
			t.Fatalf("%s: entry 7 = %+v, %v", when, got, err)
		}
		if err := g1.GetLog(5, &got); err != nil || got.Term != 7 || string(got.Data) != "other group" {
			t.Fatalf("%s: group 1's entry = %+v, %v", when, got, err)
		}
		if first, _ := g1.FirstIndex(); first != 5 {
			t.Fatalf("%s: group 1 sees group 0's entries (first %d)", when, first)
		}
		if term, err := g0.GetUint64([]byte("CurrentTerm")); err != nil || term != 2 {
			t.Fatalf("%s: term %d, %v", when, term, err)
		}
		if _, err := g1.GetUint64([]byte("CurrentTerm")); err == nil {
			t.Fatalf("%s: group 1 sees group 0's term", when)
		}
		if v, err := g1.Get([]byte("LastVoteCand")); err != nil || !bytes.Equal(v, []byte("node-b")) {
			t.Fatalf("%s: vote %q, %v", when, v, err)
		}
	}
	check("open")
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if err := g0.StoreLog(&raft.Log{Index: 11}); err == nil {
		t.Fatal("a write after close succeeded")
	}
	if s, err = openSharedLog(path, false); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	g0, _ = s.group(0)
	g1, _ = s.group(1)
	check("reopened")
}

// TestSharedLogConcurrentGroups: groups writing at once each get their
// own entries back, whatever commits they shared.
func TestSharedLogConcurrentGroups(t *testing.T) {
	s, err := openSharedLog(filepath.Join(t.TempDir(), "log.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	const groups, entries = 4, 300
	var wg sync.WaitGroup
	for g := range groups {
		l, err := s.group(g)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for i := uint64(1); i <= entries; i++ {
				if err := l.StoreLogs([]*raft.Log{{Index: i, Term: uint64(g + 1), Data: []byte(fmt.Sprint(g, i))}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for g := range groups {
		l, _ := s.group(g)
		if last, _ := l.LastIndex(); last != entries {
			t.Fatalf("group %d: last index %d", g, last)
		}
		var got raft.Log
		for i := uint64(1); i <= entries; i++ {
			if err := l.GetLog(i, &got); err != nil || got.Term != uint64(g+1) || string(got.Data) != fmt.Sprint(g, i) {
				t.Fatalf("group %d entry %d: %+v %v", g, i, got, err)
			}
		}
	}
	t.Logf("%d writes in %d commits", s.written.Load(), s.commits.Load())
}
