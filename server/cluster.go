package server

import (
	"errors"
	"fmt"
	"net"
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
	v := cl.ClusterView()
	nodes, hasMaster, failedMaster := ordered(v)
	leaderKnown := hasMaster && !failedMaster
	switch {
	case sub == "myid" && len(args) == 2:
		c.writeBulkString(v.Self.ID)
	case sub == "slots" && len(args) == 2:
		if !hasMaster {
			c.writeArray(0)
			return
		}
		c.writeArray(1)
		c.writeArray(2 + len(nodes))
		c.writeInt(0)
		c.writeInt(engine.Slots - 1)
		for _, n := range nodes {
			host, port := splitHostPort(n.ClientAddr)
			c.writeArray(3)
			c.writeBulkString(host)
			c.writeInt(port)
			c.writeBulkString(n.ID)
		}
	case sub == "shards" && len(args) == 2:
		c.writeArray(1)
		c.writeMap(2)
		c.writeBulkString("slots")
		if hasMaster {
			c.writeArray(2)
			c.writeInt(0)
			c.writeInt(engine.Slots - 1)
		} else {
			c.writeArray(0)
		}
		c.writeBulkString("nodes")
		c.writeArray(len(nodes))
		for i, n := range nodes {
			host, port := splitHostPort(n.ClientAddr)
			role, health := "replica", "online"
			if i == 0 && hasMaster {
				role = "master"
			}
			if i == 0 && failedMaster {
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
	case sub == "nodes" && len(args) == 2:
		var b strings.Builder
		leaderID := ""
		if hasMaster {
			leaderID = nodes[0].ID
		}
		for i, n := range nodes {
			host, port := splitHostPort(n.ClientAddr)
			flags, master, slots := "slave", leaderID, ""
			if i == 0 && hasMaster {
				flags, master, slots = "master", "-", " 0-16383"
			}
			if i == 0 && failedMaster {
				flags += ",fail?"
			}
			if n.ID == v.Self.ID {
				flags = "myself," + flags
			}
			if master == "" {
				master = "-"
			}
			fmt.Fprintf(&b, "%s %s:%d@%d %s %s 0 0 %d connected%s\n", n.ID, host, port, port+10000, flags, master, v.Term, slots)
		}
		c.writeVerbatim(b.String())
	case sub == "info" && len(args) == 2:
		state := "ok"
		if !leaderKnown {
			state = "fail"
		}
		c.writeVerbatim(strings.Join([]string{
			"cluster_enabled:1",
			"cluster_state:" + state,
			"cluster_slots_assigned:16384",
			"cluster_slots_ok:" + map[bool]string{true: "16384", false: "0"}[leaderKnown],
			"cluster_slots_pfail:" + map[bool]string{true: "16384", false: "0"}[failedMaster],
			"cluster_slots_fail:0",
			"cluster_known_nodes:" + strconv.Itoa(len(nodes)),
			"cluster_size:1",
			"cluster_current_epoch:" + strconv.FormatUint(v.Term, 10),
			"cluster_my_epoch:" + strconv.FormatUint(v.Term, 10),
			"raft_state:" + v.State,
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
