package server_test

import (
	"net"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/internal/sluicetest"
	"github.com/sluicehq/sluice/server"
)

// viewBackend is an engine whose cluster view the test sets.
type viewBackend struct {
	*engine.Engine
	view engine.ClusterView
}

func (b *viewBackend) ClusterView() engine.ClusterView            { return b.view }
func (b *viewBackend) Join(id, raftAddr, clientAddr string) error { return nil }
func (b *viewBackend) Forget(id string) error                     { return nil }

// TestClusterReplies: CLUSTER SLOTS, SHARDS and NODES leave out a member
// whose client address is not known yet, and during an election name the
// last leader as the slots' master, flagged as failing.
func TestClusterReplies(t *testing.T) {
	self := engine.NodeInfo{ID: strings.Repeat("b", 40), ClientAddr: "127.0.0.1:7002", Voter: true}
	old := engine.NodeInfo{ID: strings.Repeat("a", 40), ClientAddr: "127.0.0.1:7001", Voter: true}
	unnamed := engine.NodeInfo{ID: strings.Repeat("c", 40), Voter: true}
	b := &viewBackend{Engine: engine.New(engine.Config{Shards: 1})}
	defer b.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{}, b)
	defer srv.Close()
	go srv.Serve(ln)
	c := sluicetest.DialRaw(t, "tcp", ln.Addr().String())

	leading := old
	leading.Leader = true
	b.view = engine.ClusterView{Self: self, Leader: leading, Nodes: []engine.NodeInfo{self, leading, unnamed}, State: "Follower", Term: 2}
	want := "*1\r\n*4\r\n:0\r\n:16383\r\n" +
		"*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n" + old.ID + "\r\n" +
		"*3\r\n$9\r\n127.0.0.1\r\n:7002\r\n$40\r\n" + self.ID + "\r\n"
	if got := c.Do(t, "CLUSTER", "SLOTS"); got != want {
		t.Fatalf("CLUSTER SLOTS with a member not yet named:\n%q\nwant\n%q", got, want)
	}
	if got := c.Do(t, "CLUSTER", "NODES"); strings.Contains(got, unnamed.ID) || strings.Contains(got, ":0@") {
		t.Fatalf("CLUSTER NODES lists the member without an address: %q", got)
	}
	if got := c.Do(t, "CLUSTER", "INFO"); !strings.Contains(got, "cluster_known_nodes:2\r\n") {
		t.Fatalf("CLUSTER INFO: %q", got)
	}

	// The election: no leader known, the last one named, flagged.
	b.view = engine.ClusterView{Self: self, Nodes: []engine.NodeInfo{self, old}, State: "Candidate", Term: 3, LastLeaderID: old.ID}
	if got := c.Do(t, "CLUSTER", "SLOTS"); got != want {
		t.Fatalf("CLUSTER SLOTS during an election:\n%q\nwant the last leader as master:\n%q", got, want)
	}
	nodes := c.Do(t, "CLUSTER", "NODES")
	if !strings.Contains(nodes, old.ID+" 127.0.0.1:7001@17001 master,fail? - ") || !strings.Contains(nodes, "myself,slave "+old.ID) {
		t.Fatalf("CLUSTER NODES during an election: %q", nodes)
	}
	info := c.Do(t, "CLUSTER", "INFO")
	if !strings.Contains(info, "cluster_state:fail\r\n") || !strings.Contains(info, "cluster_slots_pfail:16384\r\n") {
		t.Fatalf("CLUSTER INFO during an election: %q", info)
	}
	if shards := c.Do(t, "CLUSTER", "SHARDS"); !strings.Contains(shards, "$6\r\nmaster\r\n") || !strings.Contains(shards, "$6\r\nfailed\r\n") {
		t.Fatalf("CLUSTER SHARDS during an election: %q", shards)
	}
}
