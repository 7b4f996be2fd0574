package replication

import (
	"maps"
	"testing"

	"github.com/sluicehq/sluice/engine"
)

func TestBatchEntryRoundTrip(t *testing.T) {
	cmds := []engine.Command{
		slCheck("a", 10, 1),
		fwCheck("b{tag}", 5, 2),
		{Op: engine.OpLimitAll, Sub: []engine.Command{slCheck("x", 1, 1), fwCheck("y", 2, 1)}},
		{Op: engine.OpFlushAll},
	}
	h := batchHeader{now: -5, origin: 1<<63 + 7, seq: 300, flags: flagOverMemory}
	b := engine.EncodeCommands(appendBatchHeader(nil, h), cmds)
	got, out, err := decodeBatch(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != h {
		t.Errorf("header = %+v, want %+v", got, h)
	}
	if len(out) != len(cmds) || string(out[1].Key) != "b{tag}" || len(out[2].Sub) != 2 || out[3].Op != engine.OpFlushAll {
		t.Errorf("commands = %+v", out)
	}
	// Every truncation is an error, never a panic.
	for i := range b {
		if _, _, err := decodeBatch(b[:i], nil); err == nil {
			t.Errorf("decodeBatch of %d of %d bytes: no error", i, len(b))
		}
	}
	if _, _, err := decodeBatch(append(b, 0), nil); err == nil {
		t.Error("trailing byte accepted")
	}
}

func TestMemberEntryRoundTrip(t *testing.T) {
	m := memberChange{op: memberSet, id: "n1", raftAddr: "127.0.0.1:1", clientAddr: "127.0.0.1:6379"}
	b := encodeMember(m)
	got, err := decodeMember(b)
	if err != nil || got != m {
		t.Fatalf("decodeMember = %+v, %v; want %+v", got, err, m)
	}
	for i := range b {
		if _, err := decodeMember(b[:i]); err == nil {
			t.Errorf("decodeMember of %d of %d bytes: no error", i, len(b))
		}
	}

	ms := map[string]member{"b": {"r2", "c2"}, "a": {"r1", "c1"}}
	enc := encodeMembers(ms)
	back, err := decodeMembers(enc)
	if err != nil || !maps.Equal(back, ms) {
		t.Fatalf("decodeMembers = %v, %v", back, err)
	}
	for i := 1; i < len(enc); i++ {
		if _, err := decodeMembers(enc[:i]); err == nil {
			t.Errorf("decodeMembers of %d of %d bytes: no error", i, len(enc))
		}
	}
}
