package server

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Cluster commands describe the replication group in the forms Redis
// Cluster clients read (go-redis ClusterClient, redis-cli -c, ioredis
// Cluster): one group holds every slot, its leader is the only master, and
// the followers are its replicas.

var errClusterDisabled = errors.New("This instance has cluster support disabled")

func (s *Server) clustered() (Cluster, bool) {
	cl, ok := s.backend.(Cluster)
	return cl, ok
}

func splitHostPort(addr string) (string, int64) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	p, _ := strconv.ParseInt(port, 10, 64)
	return host, p
}

func cmdReadonly(s *Server, c *client, args [][]byte) {
	if _, ok := s.clustered(); !ok {
		c.writeError(errClusterDisabled)
		return
	}
	c.readonly = true
	c.writeOK()
}

func cmdReadwrite(s *Server, c *client, args [][]byte) {
	if _, ok := s.clustered(); !ok {
		c.writeError(errClusterDisabled)
		return
	}
	c.readonly = false
	c.writeOK()
}

func cmdAsking(s *Server, c *client, args [][]byte) {
	if _, ok := s.clustered(); !ok {
		c.writeError(errClusterDisabled)
		return
	}
	c.writeOK()
}

// cmdRole: ROLE, as Redis replies it for a master and for a replica.
func cmdRole(s *Server, c *client, args [][]byte) {
	cl, ok := s.clustered()
	if !ok {
		c.writeArray(3)
		c.writeBulkString("master")
		c.writeInt(0)
		c.writeArray(0)
		return
	}
	v := cl.ClusterView()
	if v.Self.Leader {
		var replicas []engine.NodeInfo
		for _, n := range v.Nodes {
			if n.ID != v.Self.ID {
				replicas = append(replicas, n)
			}
		}
		c.writeArray(3)
		c.writeBulkString("master")
		c.writeInt(int64(v.Applied))
		c.writeArray(len(replicas))
		for _, r := range replicas {
			host, port := splitHostPort(r.ClientAddr)
			c.writeArray(3)
			c.writeBulkString(host)
			c.writeBulkString(strconv.FormatInt(port, 10))
			c.writeBulkString(strconv.FormatUint(r.Applied, 10))
		}
		return
	}
	host, port := splitHostPort(v.Leader.ClientAddr)
	state := "connected"
	if v.Leader.ID == "" {
		state = "connect"
	}
	c.writeArray(5)
	c.writeBulkString("slave")
	c.writeBulkString(host)
	c.writeInt(port)
	c.writeBulkString(state)
	c.writeInt(int64(v.Applied))
}

// replicationLines is INFO replication.
func (s *Server) replicationLines() []string {
	cl, ok := s.clustered()
	if !ok {
		return []string{"role:master", "connected_slaves:0"}
	}
	v := cl.ClusterView()
	lines := []string{
		"raft_state:" + v.State,
		"raft_term:" + strconv.FormatUint(v.Term, 10),
		"raft_commit_index:" + strconv.FormatUint(v.CommitIndex, 10),
		"raft_applied_index:" + strconv.FormatUint(v.Applied, 10),
		"node_id:" + v.Self.ID,
	}
	if v.Self.Leader {
		lines = append([]string{"role:master", "connected_slaves:" + strconv.Itoa(len(v.Nodes)-1)}, lines...)
		i := 0
		for _, n := range v.Nodes {
			if n.ID == v.Self.ID {
				continue
			}
			host, port := splitHostPort(n.ClientAddr)
			lines = append(lines, fmt.Sprintf("slave%d:ip=%s,port=%d,state=online,offset=%d,lag=0,id=%s", i, host, port, n.Applied, n.ID))
			i++
		}
		return lines
	}
	host, port := splitHostPort(v.Leader.ClientAddr)
	status := "up"
	if v.Leader.ID == "" {
		status = "down"
	}
	link := []string{"master_link_status:" + status}
	if rh, ok := s.backend.(RaftHealth); ok {
		// As Redis: seconds since the leader was last heard from, or,
		// while none is known, how long the link has been down.
		ago := strconv.Itoa(int(rh.LastLeaderContact().Seconds()))
		if status == "up" {
			link = append(link, "master_last_io_seconds_ago:"+ago)
		} else {
			link = append(link, "master_last_io_seconds_ago:-1", "master_link_down_since_seconds:"+ago)
		}
	}
	return append(append([]string{"role:slave", "master_host:" + host, "master_port:" + strconv.FormatInt(port, 10)}, link...),
		append([]string{"slave_repl_offset:" + strconv.FormatUint(v.Applied, 10)}, lines...)...)
}

// ordered lists the members CLUSTER replies name: the slots' master first,
// then the others. The master is the leader or, during an election, the
// last leader (failed): Redis Cluster keeps a failing master until a
// replica replaces it, and a client that reloads its slot map meanwhile
// keeps its routes (node-redis, finding no slots, drops every node for
// good). A member whose client address this node has not learned yet (the
// log entry naming it not applied yet, just after it joined) is left out:
// listed, it would send clients to ":0".
func ordered(v engine.ClusterView) (nodes []engine.NodeInfo, hasMaster, failed bool) {
	master := v.LastLeaderID
	for _, n := range v.Nodes {
		if n.Leader {
			master = n.ID
		}
	}
	for _, n := range v.Nodes {
		switch {
		case n.ID == master:
			nodes = append([]engine.NodeInfo{n}, nodes...)
			hasMaster, failed = true, !n.Leader
		case n.ClientAddr != "":
			nodes = append(nodes, n)
		}
	}
	return nodes, hasMaster, failed
}

// ClusterGroups is a Cluster whose slots are split over several Raft
// groups (replication.Groups): CLUSTER SLOTS, SHARDS, NODES and INFO
// describe each group's range with its own master.
type ClusterGroups interface {
	ClusterViews() []engine.ClusterView
}

// clusterViews is one view per group, in slot order.
func clusterViews(cl Cluster) []engine.ClusterView {
	if g, ok := cl.(ClusterGroups); ok {
		return g.ClusterViews()
	}
	v := cl.ClusterView()
	if v.Slots == (engine.SlotRange{}) {
		v.Slots = engine.AllSlots
	}
	return []engine.ClusterView{v}
}

// groupMembers is a group's view with its members as CLUSTER replies
// list them (see ordered).
type groupMembers struct {
	v                 engine.ClusterView
	nodes             []engine.NodeInfo
	hasMaster, failed bool
}

func (g groupMembers) slots() int { return g.v.Slots.Last - g.v.Slots.First + 1 }

func cmdCluster(s *Server, c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	if sub == "keyslot" && len(args) == 3 {
		c.writeInt(int64(engine.KeySlot(args[2])))
		return
	}
	cl, ok := s.clustered()
	if !ok {
		c.writeError(errClusterDisabled)
		return
	}
	var groups []groupMembers
	var term uint64
	for _, v := range clusterViews(cl) {
		nodes, hasMaster, failed := ordered(v)
		groups = append(groups, groupMembers{v: v, nodes: nodes, hasMaster: hasMaster, failed: failed})
		term = max(term, v.Term)
	}
	self := cl.ClusterView().Self
	switch {
	case sub == "myid" && len(args) == 2:
		c.writeBulkString(self.ID)
	case sub == "slots" && len(args) == 2:
		n := 0
		for _, g := range groups {
			if g.hasMaster {
				n++
			}
		}
		c.writeArray(n)
		for _, g := range groups {
			if !g.hasMaster {
				continue
			}
			c.writeArray(2 + len(g.nodes))
			c.writeInt(int64(g.v.Slots.First))
			c.writeInt(int64(g.v.Slots.Last))
			for _, n := range g.nodes {
				host, port := splitHostPort(n.ClientAddr)
				c.writeArray(3)
				c.writeBulkString(host)
				c.writeInt(port)
				c.writeBulkString(n.ID)
			}
		}
	case sub == "shards" && len(args) == 2:
		c.writeArray(len(groups))
		for _, g := range groups {
			writeShard(c, g)
		}
	case sub == "groups" && len(args) == 2:
		// Sluice's own: the Raft groups behind the slot map.
		c.writeArray(len(groups))
		for g, m := range groups {
			var voters, others []string
			for _, n := range m.v.Nodes {
				if n.Voter {
					voters = append(voters, n.ID)
				} else {
					others = append(others, n.ID)
				}
			}
			c.writeMap(6)
			c.writeBulkString("group")
			c.writeInt(int64(g))
			c.writeBulkString("slots")
			c.writeArray(2)
			c.writeInt(int64(m.v.Slots.First))
			c.writeInt(int64(m.v.Slots.Last))
			c.writeBulkString("leader")
			c.writeBulkString(m.v.Leader.ID)
			c.writeBulkString("term")
			c.writeInt(int64(m.v.Term))
			c.writeBulkString("voters")
			writeStrings(c, voters)
			c.writeBulkString("nonvoters")
			writeStrings(c, others)
		}
	case sub == "nodes" && len(args) == 2:
		c.writeVerbatim(clusterNodes(groups, self.ID, term))
	case sub == "info" && len(args) == 2:
		ok, pfail := 0, 0
		masters, known := map[string]bool{}, map[string]bool{}
		for _, g := range groups {
			if g.hasMaster && !g.failed {
				ok += g.slots()
			}
			if g.failed {
				pfail += g.slots()
			}
			if g.hasMaster {
				masters[g.nodes[0].ID] = true
			}
			for _, n := range g.nodes {
				known[n.ID] = true
			}
		}
		state := "ok"
		if ok != engine.Slots {
			state = "fail"
		}
		c.writeVerbatim(strings.Join([]string{
			"cluster_enabled:1",
			"cluster_state:" + state,
			"cluster_slots_assigned:16384",
			"cluster_slots_ok:" + strconv.Itoa(ok),
			"cluster_slots_pfail:" + strconv.Itoa(pfail),
			"cluster_slots_fail:0",
			"cluster_known_nodes:" + strconv.Itoa(len(known)),
			"cluster_size:" + strconv.Itoa(len(masters)),
			"cluster_current_epoch:" + strconv.FormatUint(term, 10),
			"cluster_my_epoch:" + strconv.FormatUint(term, 10),
			"cluster_raft_groups:" + strconv.Itoa(len(groups)),
			"raft_state:" + groups[0].v.State,
		}, "\r\n") + "\r\n")
	case sub == "join" && len(args) == 5:
		if err := cl.Join(string(args[2]), string(args[3]), string(args[4])); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
	case sub == "forget" && len(args) == 3:
		if err := cl.Forget(string(args[2])); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
	default:
		c.writeError(fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try CLUSTER HELP.", args[1]))
	}
}

// writeShard is one group's CLUSTER SHARDS entry.
func writeShard(c *client, g groupMembers) {
	c.writeMap(2)
	c.writeBulkString("slots")
	if g.hasMaster {
		c.writeArray(2)
		c.writeInt(int64(g.v.Slots.First))
		c.writeInt(int64(g.v.Slots.Last))
	} else {
		c.writeArray(0)
	}
	c.writeBulkString("nodes")
	c.writeArray(len(g.nodes))
	for i, n := range g.nodes {
		host, port := splitHostPort(n.ClientAddr)
		role, health := "replica", "online"
		if i == 0 && g.hasMaster {
			role = "master"
		}
		if i == 0 && g.failed {
			health = "failed"
		}
		c.writeMap(7)
		c.writeBulkString("id")
		c.writeBulkString(n.ID)
		c.writeBulkString("port")
		c.writeInt(port)
		c.writeBulkString("ip")
		c.writeBulkString(host)
		c.writeBulkString("endpoint")
		c.writeBulkString(host)
		c.writeBulkString("role")
		c.writeBulkString(role)
		c.writeBulkString("replication-offset")
		c.writeInt(int64(n.Applied))
		c.writeBulkString("health")
		c.writeBulkString(health)
	}
}

// clusterNodes is CLUSTER NODES: one line per node, a master for the
// ranges it leads (fail? while its group elects a replacement), else a
// replica of the first group's master. A node leading some groups and
// following others shows as a master: Redis Cluster has no word for both.
func clusterNodes(groups []groupMembers, selfID string, term uint64) string {
	type line struct {
		n      engine.NodeInfo
		slots  []string
		failed bool
	}
	var order []string
	lines := map[string]*line{}
	firstMaster := ""
	for _, g := range groups {
		for i, n := range g.nodes {
			l := lines[n.ID]
			if l == nil {
				l = &line{n: n}
				lines[n.ID] = l
				order = append(order, n.ID)
			}
			if i == 0 && g.hasMaster {
				l.slots = append(l.slots, strconv.Itoa(g.v.Slots.First)+"-"+strconv.Itoa(g.v.Slots.Last))
				l.failed = l.failed || g.failed
				if firstMaster == "" {
					firstMaster = n.ID
				}
			}
		}
	}
	// Masters first, in slot order, as the groups named them.
	slices.SortStableFunc(order, func(a, b string) int {
		return cmpBool(len(lines[b].slots) > 0, len(lines[a].slots) > 0)
	})
	var b strings.Builder
	for _, id := range order {
		l := lines[id]
		host, port := splitHostPort(l.n.ClientAddr)
		flags, master, slots := "slave", firstMaster, ""
		if len(l.slots) > 0 {
			flags, master, slots = "master", "-", " "+strings.Join(l.slots, " ")
		}
		if l.failed {
			flags += ",fail?"
		}
		if id == selfID {
			flags = "myself," + flags
		}
		if master == "" {
			master = "-"
		}
		fmt.Fprintf(&b, "%s %s:%d@%d %s %s 0 0 %d connected%s\n", id, host, port, port+10000, flags, master, term, slots)
	}
	return b.String()
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func writeStrings(c *client, ss []string) {
	c.writeArray(len(ss))
	for _, s := range ss {
		c.writeBulkString(s)
	}
}
