package server

import (
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/engine/glob"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Introspection: COMMAND (from the command table), INFO, DBSIZE, TIME.

// cmdCommand: COMMAND, COMMAND COUNT, COMMAND INFO name..., COMMAND DOCS
// [name...], COMMAND LIST. Everything comes from the command table.
func cmdCommand(s *Server, c *client, args [][]byte) {
	if len(args) == 1 {
		list := sortedCommands()
		c.writeArray(len(list))
		for _, cmd := range list {
			c.writeCommandInfo(cmd)
		}
		return
	}
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "count":
		c.writeInt(int64(len(commands)))
	case "list":
		commandListReply(c, args[2:])
	case "getkeys":
		commandGetKeys(c, args[2:])
	case "info":
		names := args[2:]
		if len(names) == 0 {
			list := sortedCommands()
			c.writeArray(len(list))
			for _, cmd := range list {
				c.writeCommandInfo(cmd)
			}
			return
		}
		c.writeArray(len(names))
		for _, n := range names {
			if cmd := commands[strings.ToLower(string(n))]; cmd != nil {
				c.writeCommandInfo(cmd)
			} else {
				c.writeNilArray()
			}
		}
	case "docs":
		var list []*command
		if len(args) == 2 {
			list = sortedCommands()
		} else {
			for _, n := range args[2:] {
				if cmd := commands[strings.ToLower(string(n))]; cmd != nil {
					list = append(list, cmd)
				}
			}
		}
		c.writeMap(len(list))
		for _, cmd := range list {
			c.writeBulkString(cmd.name)
			c.writeCommandDocs(cmd)
		}
	default:
		c.writeError(fmt.Errorf("unknown subcommand '%s'. Try COMMAND HELP.", args[1]))
	}
}

// commandListReply: COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN
// pattern], as Redis 7: every command and subcommand (parent|sub); a
// pattern matches the full name, ignoring case; an unknown category and
// any module match nothing.
func commandListReply(c *client, opts [][]byte) {
	keep := func(*command) bool { return true }
	switch {
	case len(opts) == 0:
	case len(opts) == 3 && isWord(opts[0], "filterby"):
		arg := string(opts[2])
		switch {
		case isWord(opts[1], "module"):
			keep = func(*command) bool { return false }
		case isWord(opts[1], "aclcat"):
			cat, ok := categoryByName(arg)
			keep = func(cmd *command) bool { return ok && cmd.categories()&cat != 0 }
		case isWord(opts[1], "pattern"):
			keep = func(cmd *command) bool { return glob.MatchFold(arg, cmd.fullname) }
		default:
			c.writeError(errSyntax)
			return
		}
	default:
		c.writeError(errSyntax)
		return
	}
	var names []string
	for _, cmd := range sortedCommands() {
		for _, row := range append([]*command{cmd}, cmd.subs...) {
			if keep(row) {
				names = append(names, row.fullname)
			}
		}
	}
	c.writeArray(len(names))
	for _, n := range names {
		c.writeBulkString(n)
	}
}

var (
	errGetKeysCommand = errors.New("Invalid command specified")
	errGetKeysArity   = errors.New("Invalid number of arguments specified for command")
	errGetKeysNone    = errors.New("The command has no key arguments")
	errGetKeysArgs    = errors.New("Invalid arguments specified for command")
)

// commandGetKeys: COMMAND GETKEYS command [arg ...], the keys the command
// would name, from the same positions ACL and cluster routing use.
func commandGetKeys(c *client, args [][]byte) {
	cmd := lookupCommand(args[0])
	if cmd == nil {
		c.writeError(errGetKeysCommand)
		return
	}
	row := cmd
	if len(cmd.subs) > 0 && len(args) > 1 {
		if row = cmd.subcommand(args); row == cmd {
			c.writeError(errGetKeysCommand)
			return
		}
	}
	if row.findKeys == nil && row.firstKey <= 0 {
		c.writeError(errGetKeysNone)
		return
	}
	if (row.arity > 0 && len(args) != row.arity) || (row.arity < 0 && len(args) < -row.arity) {
		c.writeError(errGetKeysArity)
		return
	}
	keys := row.keys(args, nil)
	if len(keys) == 0 && row.group != "scripting" {
		// Only a script may name no keys (Redis's no-mandatory-keys).
		c.writeError(errGetKeysArgs)
		return
	}
	c.writeArray(len(keys))
	for _, k := range keys {
		c.writeBulk(args[k.at])
	}
}

// writeCommandInfo writes the 10-element reply Redis 7 gives per command:
// flags and ACL categories as sets (arrays in RESP2), then tips, key specs
// (Sluice has none) and subcommands, each the same 10 elements.
func (c *client) writeCommandInfo(cmd *command) {
	c.writeArray(10)
	c.writeBulkString(cmd.fullname)
	c.writeInt(int64(cmd.arity))
	var flags []string
	for _, f := range flagNames {
		if cmd.flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	c.writeSet(len(flags))
	for _, f := range flags {
		c.writeStatus(f)
	}
	c.writeInt(int64(cmd.firstKey))
	c.writeInt(int64(cmd.lastKey))
	c.writeInt(int64(cmd.step))
	var cats []string
	for _, cat := range aclCategories {
		if cmd.cats&cat.cat != 0 {
			cats = append(cats, "@"+cat.name)
		}
	}
	c.writeSet(len(cats))
	for _, cat := range cats {
		c.writeStatus(cat)
	}
	c.writeSet(0) // tips
	c.writeSet(0) // key specs
	c.writeArray(len(cmd.subs))
	for _, sub := range cmd.subs {
		c.writeCommandInfo(sub)
	}
}

// writeCommandDocs writes one command's docs: a map (a flat array in
// RESP2) of summary, since, group, complexity and the arguments, each a
// map too.
func (c *client) writeCommandDocs(cmd *command) {
	c.writeMap(5)
	c.writeBulkString("summary")
	c.writeBulkString(cmd.summary)
	c.writeBulkString("since")
	c.writeBulkString(cmd.since)
	c.writeBulkString("group")
	c.writeBulkString(cmd.group)
	c.writeBulkString("complexity")
	c.writeBulkString("O(1)")
	c.writeBulkString("arguments")
	c.writeArgDocs(cmd.args)
}

// writeArgDocs writes COMMAND DOCS's arguments, a oneof's choices nested.
func (c *client) writeArgDocs(args []argSpec) {
	c.writeArray(len(args))
	for _, a := range args {
		var flags []string
		if a.optional {
			flags = append(flags, "optional")
		}
		if a.multiple {
			flags = append(flags, "multiple")
		}
		n := 2
		if a.typ == "pure-token" {
			n++
		}
		if len(flags) > 0 {
			n++
		}
		if len(a.sub) > 0 {
			n++
		}
		c.writeMap(n)
		c.writeBulkString("name")
		c.writeBulkString(strings.ToLower(strings.Fields(a.name)[0]))
		c.writeBulkString("type")
		typ := a.typ
		if strings.Contains(a.name, " ") && typ != "pure-token" {
			typ = "string"
		}
		c.writeBulkString(typ)
		if a.typ == "pure-token" {
			c.writeBulkString("token")
			c.writeBulkString(a.name)
		}
		if len(flags) > 0 {
			c.writeBulkString("flags")
			c.writeSet(len(flags))
			for _, f := range flags {
				c.writeStatus(f)
			}
		}
		if len(a.sub) > 0 {
			c.writeBulkString("arguments")
			c.writeArgDocs(a.sub)
		}
	}
}

// cmdInfo: INFO [section ...] with server, clients, memory, stats, keyspace.
func cmdInfo(s *Server, c *client, args [][]byte) {
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	// As Redis, commandstats and latencystats are in all, not default.
	everything := want["all"] || want["everything"]
	st := s.backend.Stats()
	var b strings.Builder
	section := func(name string, lines ...string) {
		if !all && !want[name] || (name == "commandstats" || name == "latencystats") && !everything && !want[name] {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + strings.ToUpper(name[:1]) + name[1:] + "\r\n")
		for _, l := range lines {
			b.WriteString(l + "\r\n")
		}
	}
	uptime := time.Since(s.started)
	section("server",
		"sluice_version:"+s.cfg.Version,
		"redis_version:"+redisVersion,
		"redis_mode:"+s.mode(),
		"os:"+runtime.GOOS+" "+runtime.GOARCH,
		"go_version:"+runtime.Version(),
		"process_id:"+strconv.Itoa(os.Getpid()),
		"shards:"+strconv.Itoa(s.backend.Shards()),
		"uptime_in_seconds:"+strconv.Itoa(int(uptime.Seconds())),
		"uptime_in_days:"+strconv.Itoa(int(uptime.Hours()/24)),
		"clock_manual:"+strconv.FormatBool(s.clock.Manual()),
	)
	section("clients",
		"connected_clients:"+strconv.Itoa(s.ConnectedClients()),
		"maxclients:"+strconv.FormatInt(s.maxClients.Load(), 10),
		"blocked_clients:"+strconv.Itoa(s.blockedClients()),
	)
	perKey := "0"
	if st.Keys > 0 {
		perKey = strconv.FormatFloat(float64(st.Memory)/float64(st.Keys), 'f', 1, 64)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	section("memory",
		"used_memory:"+strconv.FormatInt(st.Memory, 10),
		"used_memory_human:"+humanBytes(st.Memory),
		"used_memory_per_key:"+perKey,
		"used_memory_heap:"+strconv.FormatUint(ms.HeapAlloc, 10),
		"used_memory_rss_estimate:"+strconv.FormatUint(ms.Sys, 10),
		"maxmemory:"+strconv.FormatInt(s.backend.MaxMemory(), 10),
		"maxmemory_human:"+humanBytes(s.backend.MaxMemory()),
		"maxmemory_policy:noeviction",
		"gc_cycles:"+strconv.FormatUint(uint64(ms.NumGC), 10),
	)
	section("stats", append([]string{
		"total_connections_received:" + strconv.FormatInt(s.connections.Load(), 10),
		"rejected_connections:" + strconv.FormatInt(s.rejected.Load(), 10),
		"total_commands_processed:" + strconv.FormatInt(s.commandsN.Load(), 10),
		"total_error_replies:" + strconv.FormatInt(s.stats.errReplies.Load(), 10),
		"decisions_allowed:" + strconv.FormatInt(st.Allowed, 10),
		"decisions_limited:" + strconv.FormatInt(st.Limited, 10),
		"reqid_retries_answered:" + strconv.FormatInt(st.ReceiptHits, 10),
		"leases_acquired:" + strconv.FormatInt(st.LeasesAcquired, 10),
		"leases_refused:" + strconv.FormatInt(st.LeasesRefused, 10),
		"hotkeys_tracking:" + s.hotKeysTracking(),
		"expired_keys:" + strconv.FormatInt(st.Swept, 10),
		"keys_swept:" + strconv.FormatInt(st.Swept, 10),
		"evicted_keys:0",
		"client_query_buffer_limit_disconnections:" + strconv.FormatInt(s.qbufClosed.Load(), 10),
		"client_output_buffer_limit_disconnections:" + strconv.FormatInt(s.obufClosed.Load(), 10),
		"acl_access_denied_auth:" + strconv.FormatInt(s.authDenied.Load(), 10),
		"acl_access_denied_cmd:" + strconv.FormatInt(s.cmdDenied.Load(), 10),
		"acl_access_denied_key:" + strconv.FormatInt(s.keyDenied.Load(), 10),
		"acl_access_denied_channel:" + strconv.FormatInt(s.channelDenied.Load(), 10),
	}, s.pubsub.infoLines()...)...)
	section("scripting", s.scripts.infoLines()...)
	section("replication", s.replicationLines()...)
	section("commandstats", s.stats.commandstatsLines()...)
	section("errorstats", s.stats.errorstatsLines()...)
	section("latencystats", s.stats.latencystatsLines()...)
	clusterEnabled := "0"
	if _, ok := s.clustered(); ok {
		clusterEnabled = "1"
	}
	section("cluster", "cluster_enabled:"+clusterEnabled)
	persistence := []string{s.health.loadingLine(), "async_loading:0"}
	if s.cfg.Persistence != nil {
		persistence = append(persistence, s.cfg.Persistence.InfoLines()...)
	} else {
		persistence = append(persistence, "aof_enabled:0")
	}
	section("persistence", persistence...)
	section("health", s.health.infoLines()...)
	keyspace := []string{}
	if st.Keys > 0 {
		keyspace = append(keyspace, "db0:keys="+strconv.FormatInt(st.Keys, 10)+",expires=0,avg_ttl=0")
	}
	section("keyspace", keyspace...)
	c.writeVerbatim(b.String())
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + "G"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) + "M"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 2, 64) + "K"
	}
	return strconv.FormatInt(n, 10) + "B"
}

func cmdDBSize(s *Server, c *client, args [][]byte) { c.writeInt(s.backend.Stats().Keys) }

func cmdTime(s *Server, c *client, args [][]byte) {
	now := s.clock.Now()
	c.writeArray(2)
	c.writeBulkString(strconv.FormatInt(now/1e9, 10))
	c.writeBulkString(strconv.FormatInt(now%1e9/1e3, 10))
}
