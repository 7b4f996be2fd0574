package replication

import (
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func setCmd(k, v string) engine.Command {
	return engine.Command{Op: engine.OpSet, Key: []byte(k), Value: []byte(v)}
}
func getCmd(k string) engine.Command { return engine.Command{Op: engine.OpGet, Key: []byte(k)} }

// A split pipeline's GET replies alias the pooled parts' buffers: the next
// split pipeline overwrites them while the first caller may still be
// writing its replies out.
func TestGroupsReviewSplitReplyAliasing(t *testing.T) {
	n := startGroupsCluster(t, 1, 2, false, nil)[0]
	k0, k1 := keyOfGroup("a", 0, 2), keyOfGroup("b", 1, 2)
	k0b, k1b := keyOfGroup("c", 0, 2), keyOfGroup("d", 1, 2)
	run(n, setCmd(k0, strings.Repeat("A", 16)), setCmd(k1, strings.Repeat("B", 16)),
		setCmd(k0b, strings.Repeat("C", 16)), setCmd(k1b, strings.Repeat("D", 16)))
	b1 := run(n, getCmd(k0), getCmd(k1))
	if string(b1.Replies[0].Bulk) != strings.Repeat("A", 16) {
		t.Fatalf("first: %q", b1.Replies[0].Bulk)
	}
	_, _ = k0b, k1b
	run(n, setCmd(k0, strings.Repeat("C", 16)), setCmd(k1, strings.Repeat("D", 16)))
	_ = run(n, getCmd(k0), getCmd(k1)) // another connection's pipeline
	if got := string(b1.Replies[0].Bulk) + "|" + string(b1.Replies[1].Bulk); got != strings.Repeat("A", 16)+"|"+strings.Repeat("B", 16) {
		t.Fatalf("first pipeline's replies changed under it: %q", got)
	}
}

// Concurrent version for -race.
func TestGroupsReviewSplitReplyAliasingConcurrent(t *testing.T) {
	n := startGroupsCluster(t, 1, 2, false, nil)[0]
	k0, k1 := keyOfGroup("a", 0, 2), keyOfGroup("b", 1, 2)
	run(n, setCmd(k0, strings.Repeat("A", 16)), setCmd(k1, strings.Repeat("B", 16)))
	var wg sync.WaitGroup
	var bad sync.Once
	for range 8 {
		wg.Go(func() {
			for range 2000 {
				b := run(n, getCmd(k0), getCmd(k1))
				v := string(b.Replies[0].Bulk)
				if v != strings.Repeat("A", 16) {
					bad.Do(func() { t.Errorf("got %q", v) })
				}
			}
		})
	}
	wg.Wait()
}

// FLUSHALL before a SET in one pipeline: Redis leaves the key set.
func TestGroupsReviewFlushAllOrder(t *testing.T) {
	n := startGroupsCluster(t, 1, 2, false, nil)[0]
	k0 := keyOfGroup("a", 0, 2)
	b := run(n, engine.Command{Op: engine.OpFlushAll}, setCmd(k0, "v"), getCmd(k0))
	t.Logf("replies: %+v", b.Replies)
	b = run(n, getCmd(k0))
	if b.Replies[0].Kind != engine.ReplyBulk {
		t.Fatalf("FLUSHALL; SET k v in one pipeline left k %+v: the FLUSHALL ran after the SET", b.Replies[0])
	}
}

// KEYS after DEL in one pipeline sees the deleted key (reordered before... after)
func TestGroupsReviewKeysOrder(t *testing.T) {
	n := startGroupsCluster(t, 1, 2, false, nil)[0]
	k0 := keyOfGroup("a", 0, 2)
	b := run(n, engine.Command{Op: engine.OpKeys, Pattern: []byte("*")}, setCmd(k0, "v"))
	if r := b.Replies[0]; len(r.Items) != 0 {
		t.Fatalf("KEYS before SET in a pipeline saw %d keys: %+v", len(r.Items), r.Items)
	}
}
