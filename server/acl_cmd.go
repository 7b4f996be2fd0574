package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"
	"github.com/sluicehq/sluice/engine"
)

// ACL: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG, SAVE, LOAD,
// GENPASS, DRYRUN, with Redis's replies and errors.

var (
	errACLNoFile   = errors.New("This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")
	errACLSaveFail = errors.New("There was an error trying to save the ACLs. Please check the server logs for more information")
	errACLDefault  = errors.New("The 'default' user cannot be removed")
	errACLUserName = errors.New("Usernames can't contain spaces or null characters")
)

func cmdACL(s *Server, c *client, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "setuser" && len(args) >= 3:
		if hasSpaces(args[2]) {
			c.writeError(errACLUserName)
			return
		}
		if err := s.aclSetUser(string(args[2]), args[3:]); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
		s.closeDeniedSubscribers(c)
	case sub == "deluser" && len(args) >= 3:
		names := make([]string, len(args)-2)
		for i, a := range args[2:] {
			if string(a) == "default" {
				c.writeError(errACLDefault)
				return
			}
			names[i] = string(a)
		}
		n, err := s.aclDelUsers(names)
		if err != nil {
			c.writeError(err)
			return
		}
		c.writeInt(int64(n))
	case sub == "getuser" && len(args) == 3:
		ref := s.acl.get(string(args[2]))
		if ref == nil {
			c.writeNil()
			return
		}
		u := ref.rules.Load()
		c.writeMap(6)
		c.writeBulkString("flags")
		flags := u.flagNames()
		c.writeSet(len(flags))
		for _, f := range flags {
			c.writeBulkString(f)
		}
		c.writeBulkString("passwords")
		c.writeArray(len(u.passwords))
		for _, p := range u.passwords {
			c.writeBulkString(p)
		}
		c.writeBulkString("commands")
		c.writeBulkString(u.describeCommands())
		c.writeBulkString("keys")
		c.writeBulkString(u.describeKeys())
		c.writeBulkString("channels")
		c.writeBulkString(u.describeChannels())
		c.writeBulkString("selectors")
		c.writeArray(0)
	case (sub == "list" || sub == "users") && len(args) == 2:
		names := s.acl.names()
		c.writeArray(len(names))
		for _, n := range names {
			if sub == "users" {
				c.writeBulkString(n)
				continue
			}
			c.writeBulkString("user " + n + " " + s.acl.get(n).rules.Load().describe())
		}
	case sub == "whoami" && len(args) == 2:
		c.writeBulkString(c.userName())
	case (sub == "load" || sub == "save") && s.cfg.ACLFile == "":
		c.writeError(errACLNoFile)
	case sub == "load" && len(args) == 2:
		if err := s.aclLoad(); err != nil {
			c.writeError(err)
			return
		}
		c.writeOK()
		s.closeDeniedSubscribers(c)
	case sub == "save" && len(args) == 2:
		if err := s.aclSave(); err != nil {
			s.log.Error("ACL SAVE failed", "file", s.cfg.ACLFile, "err", err)
			c.writeError(errACLSaveFail)
			return
		}
		c.writeOK()
	case sub == "cat" && len(args) == 2:
		c.writeArray(len(aclCategories))
		for _, cat := range aclCategories {
			c.writeBulkString(cat.name)
		}
	case sub == "cat" && len(args) == 3:
		cat, ok := categoryByName(string(args[2]))
		if !ok {
			name := string(args[2])
			if len(name) > 128 {
				name = name[:128]
			}
			c.writeError(fmt.Errorf("Unknown category '%s'", name))
			return
		}
		var names []string
		for _, cmd := range aclCommands {
			if cmd.cats&cat != 0 {
				names = append(names, cmd.fullname)
			}
		}
		c.writeArray(len(names))
		for _, n := range names {
			c.writeBulkString(n)
		}
	case sub == "genpass" && (len(args) == 2 || len(args) == 3):
		bits := int64(256)
		if len(args) == 3 {
			var err error
			if bits, err = engine.ParseInt64(args[2]); err != nil {
				c.writeError(engine.ErrNotInteger)
				return
			}
		}
		if bits <= 0 || bits > 4096 {
			c.writeError(errors.New("ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"))
			return
		}
		raw := make([]byte, (bits+7)/8)
		rand.Read(raw)
		c.writeBulkString(hex.EncodeToString(raw)[:(bits+3)/4])
	case sub == "log" && (len(args) == 2 || len(args) == 3):
		count := int64(10)
		if len(args) == 3 {
			if isWord(args[2], "reset") {
				s.aclLog.reset()
				c.writeOK()
				return
			}
			var err error
			if count, err = engine.ParseInt64(args[2]); err != nil {
				c.writeError(engine.ErrNotInteger)
				return
			}
			count = max(count, 0)
		}
		s.aclLog.write(c, int(count))
	case sub == "dryrun" && len(args) >= 4:
		ref := s.acl.get(string(args[2]))
		if ref == nil {
			c.writeError(fmt.Errorf("User '%s' not found", args[2]))
			return
		}
		cmd := commands[strings.ToLower(string(args[3]))]
		if cmd == nil {
			c.writeError(fmt.Errorf("Command '%s' not found", args[3]))
			return
		}
		rest := args[3:]
		if (cmd.arity > 0 && len(rest) != cmd.arity) || (cmd.arity < 0 && len(rest) < -cmd.arity) {
			c.writeError(fmt.Errorf("wrong number of arguments for '%s' command", cmd.subcommand(rest).fullname))
			return
		}
		switch d, at := ref.rules.Load().check(cmd, rest, nil); d {
		case aclDeniedCmd:
			c.writeBulkString("This user has no permissions to run the '" + cmd.subcommand(rest).fullname + "' command")
		case aclDeniedKey:
			c.writeBulkString("This user has no permissions to access the '" + string(rest[at]) + "' key")
		case aclDeniedChannel:
			c.writeBulkString("This user has no permissions to access the '" + string(rest[at]) + "' channel")
		default:
			c.writeOK()
		}
	case sub == "help" && len(args) == 2:
		help := []string{
			"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CAT [<category>]", "    List all commands that belong to <category>, or all command categories",
			"    when no category is specified.",
			"DELUSER <username> [<username> ...]", "    Delete a list of users.",
			"DRYRUN <username> <command> [<arg> ...]", "    Returns whether the user can execute the given command without executing the command.",
			"GETUSER <username>", "    Get the user's details.",
			"GENPASS [<bits>]", "    Generate a secure 256-bit user password. The optional `bits` argument can",
			"    be used to specify a different size.",
			"LIST", "    Show users details in config file format.",
			"LOAD", "    Reload users from the ACL file.",
			"LOG [<count> | RESET]", "    Show the ACL log entries.",
			"SAVE", "    Save the current config to the ACL file.",
			"SETUSER <username> <attribute> [<attribute> ...]", "    Create or modify a user with the specified attributes.",
			"USERS", "    List all the registered usernames.",
			"WHOAMI", "    Return the current connection username.",
			"HELP", "    Print this help.",
		}
		c.writeArray(len(help))
		for _, h := range help {
			c.writeStatus(h)
		}
	default:
		c.writeError(fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try ACL HELP.", args[1]))
	}
}

// replicator is the backend's, in cluster mode.
func (s *Server) replicator() (Replicator, bool) {
	r, ok := s.backend.(Replicator)
	return r, ok
}

// aclSetUser changes a user; in cluster mode, on every node, through the
// log (checked here first, so that the log carries only changes that
// apply, and with passwords as hashes).
func (s *Server) aclSetUser(name string, ops [][]byte) error {
	r, ok := s.replicator()
	if !ok {
		return s.acl.setUser(name, ops)
	}
	hashed, err := s.acl.hashedModifiers(name, ops)
	if err != nil {
		return err
	}
	return r.Replicate(encodeACLChange(aclChangeSet, append([][]byte{[]byte(name)}, hashed...)))
}

// aclDelUsers deletes users and closes their connections (in cluster mode,
// on every node).
func (s *Server) aclDelUsers(names []string) (int, error) {
	r, ok := s.replicator()
	if !ok {
		gone := s.acl.delUsers(names)
		s.disconnectUsers(gone)
		return len(gone), nil
	}
	n := 0
	fields := make([][]byte, 0, len(names))
	for _, name := range names {
		if s.acl.get(name) != nil {
			n++
		}
		fields = append(fields, []byte(name))
	}
	return n, r.Replicate(encodeACLChange(aclChangeDel, fields))
}

// disconnectUsers closes the connections authenticated as deleted users,
// as Redis does.
func (s *Server) disconnectUsers(gone []*userRef) {
	if len(gone) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cl := range s.clients {
		cl.mu.Lock()
		ref := cl.user
		cl.mu.Unlock()
		for _, g := range gone {
			if ref == g {
				cl.nc.Close()
			}
		}
	}
}

// aclFileText renders every user as the ACL file holds them.
func (s *Server) aclFileText() []byte {
	var b bytes.Buffer
	for _, n := range s.acl.names() {
		b.WriteString("user " + n + " " + s.acl.get(n).rules.Load().describe() + "\n")
	}
	return b.Bytes()
}

// aclSave replaces the ACL file atomically (a new file, fsynced, renamed
// over the old one), keeping its permissions.
func (s *Server) aclSave() error {
	return renameio.WriteFile(s.cfg.ACLFile, s.aclFileText(), 0o600, renameio.WithExistingPermissions())
}

// parseACLFile reads users from the ACL file's text: one "user <name>
// <rules...>" per line. Any error loads nothing; the message names every
// bad line, as Redis's does.
func parseACLFile(path string, text []byte) (map[string]*aclUser, error) {
	users := map[string]*aclUser{}
	var errs strings.Builder
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.Trim(line, " \t\r\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		lineNo := i + 1
		if fields[0] != "user" || len(fields) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", path, lineNo)
			continue
		}
		name := fields[1]
		if _, dup := users[name]; dup {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", name, lineNo)
			continue
		}
		u := newACLUser(name)
		reported := false
		for _, op := range fields[2:] {
			err := u.apply([]byte(op))
			switch {
			case err == nil:
			case errors.Is(err, errACLUnknown):
				// As Redis: a missing command is named (it is not secret);
				// other errors only once per line, without the text.
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", path, lineNo, op, err)
			case !reported:
				fmt.Fprintf(&errs, "%s:%d: %s. ", path, lineNo, err)
				reported = true
			}
		}
		users[name] = u
	}
	if errs.Len() > 0 {
		return nil, errors.New(errs.String())
	}
	if users["default"] == nil {
		// As Redis: a file without the default user gets the stock one.
		def := newACLUser("default")
		for _, op := range []string{"+@all", "~*", "&*", "on", "nopass"} {
			def.apply([]byte(op))
		}
		users["default"] = def
	}
	return users, nil
}

// aclLoad replaces every user with the ACL file's; users no longer there
// are disconnected.
func (s *Server) aclLoad() error {
	text, err := os.ReadFile(s.cfg.ACLFile)
	if err != nil {
		return fmt.Errorf("Error loading ACLs, opening file '%s': %w", s.cfg.ACLFile, err)
	}
	users, err := parseACLFile(s.cfg.ACLFile, text)
	if err != nil {
		return err
	}
	if r, ok := s.replicator(); ok {
		// Every node takes this node's file.
		return r.Replicate(encodeACLChange(aclChangeReplace, [][]byte{text}))
	}
	s.disconnectUsers(s.acl.replace(users))
	return nil
}

// aclLogEntry is one ACL LOG entry: Redis groups repeated denials of the
// same kind, object and user within a minute into one, counting them.
type aclLogEntry struct {
	count    int64
	reason   string // command, key, channel, auth
	context  string // toplevel, or multi for a command refused as it was queued
	object   string
	username string
	at       time.Time
	client   string
}

// aclLogMax is Redis's acllog-max-len default.
const aclLogMax = 128

type aclLog struct {
	mu      sync.Mutex
	entries []aclLogEntry // newest first
}

func (l *aclLog) add(e aclLogEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.entries) && i < 10; i++ {
		old := &l.entries[i]
		if old.reason == e.reason && old.context == e.context && old.object == e.object && old.username == e.username && e.at.Sub(old.at) <= time.Minute {
			old.count++
			old.at, old.client = e.at, e.client
			moved := *old
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = moved
			return
		}
	}
	e.count = 1
	l.entries = append([]aclLogEntry{e}, l.entries...)
	if len(l.entries) > aclLogMax {
		l.entries = l.entries[:aclLogMax]
	}
}

func (l *aclLog) reset() {
	l.mu.Lock()
	l.entries = nil
	l.mu.Unlock()
}

func (l *aclLog) write(c *client, count int) {
	l.mu.Lock()
	entries := append([]aclLogEntry(nil), l.entries[:min(count, len(l.entries))]...)
	l.mu.Unlock()
	now := time.Now()
	c.writeArray(len(entries))
	for _, e := range entries {
		c.writeMap(7)
		c.writeBulkString("count")
		c.writeInt(e.count)
		c.writeBulkString("reason")
		c.writeBulkString(e.reason)
		c.writeBulkString("context")
		if e.context == "" {
			c.writeBulkString("toplevel")
		} else {
			c.writeBulkString(e.context)
		}
		c.writeBulkString("object")
		c.writeBulkString(e.object)
		c.writeBulkString("username")
		c.writeBulkString(e.username)
		c.writeBulkString("age-seconds")
		c.writeDouble(now.Sub(e.at).Seconds())
		c.writeBulkString("client-info")
		c.writeBulkString(e.client)
	}
}
