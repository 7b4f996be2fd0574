package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sluicehq/sluice/engine/glob"
)

// ACL users, as Redis 7 has them (without selectors): each user has flags,
// password hashes, a set of commands it may run and key patterns it may
// touch. The semantics, the rule syntax, the replies and the error texts are
// Redis's; the command rules are described back (ACL LIST, GETUSER) with
// Redis's own best-fit-by-category method, over Sluice's command table.

// aclCategory is one bit per ACL category.
type aclCategory uint32

const (
	catKeyspace aclCategory = 1 << iota
	catRead
	catWrite
	catSet
	catSortedSet
	catList
	catHash
	catString
	catBitmap
	catHyperLogLog
	catGeo
	catStream
	catPubSub
	catAdmin
	catFast
	catSlow
	catBlocking
	catDangerous
	catConnection
	catTransaction
	catScripting
	// Sluice's own.
	catLimiter // rate-limit decisions and the LIMIT.* commands
	catCluster // cluster membership changes
)

// aclCategories in Redis's order (ACL CAT lists them so, and the rule
// describer tries them so), then Sluice's.
var aclCategories = []struct {
	name string
	cat  aclCategory
}{
	{"keyspace", catKeyspace}, {"read", catRead}, {"write", catWrite}, {"set", catSet},
	{"sortedset", catSortedSet}, {"list", catList}, {"hash", catHash}, {"string", catString},
	{"bitmap", catBitmap}, {"hyperloglog", catHyperLogLog}, {"geo", catGeo}, {"stream", catStream},
	{"pubsub", catPubSub}, {"admin", catAdmin}, {"fast", catFast}, {"slow", catSlow},
	{"blocking", catBlocking}, {"dangerous", catDangerous}, {"connection", catConnection},
	{"transaction", catTransaction}, {"scripting", catScripting},
	{"limiter", catLimiter}, {"cluster", catCluster},
}

func categoryByName(name string) (aclCategory, bool) {
	for _, c := range aclCategories {
		if strings.EqualFold(c.name, name) {
			return c.cat, true
		}
	}
	return 0, false
}

// keyPerm is what a command does with a key, and what a key pattern
// allows: read, write, or both. A command with neither (EXISTS, TYPE) only
// needs the key to match some pattern.
type keyPerm uint8

const (
	permRead keyPerm = 1 << iota
	permWrite
	permAll = permRead | permWrite
)

// keyPattern is one ~pattern, %R~pattern or %W~pattern. Most patterns are
// a prefix and a star (~app:*): those, and literal keys, are matched
// without the glob matcher, so a check allocates nothing.
type keyPattern struct {
	pattern string
	perm    keyPerm
	prefix  string // the pattern is prefix + "*", without other glob characters
	kind    uint8  // patAll, patLiteral, patPrefix, patGlob
}

const (
	patGlob uint8 = iota
	patAll
	patLiteral
	patPrefix
)

func newKeyPattern(pattern string, perm keyPerm) keyPattern {
	p := keyPattern{pattern: pattern, perm: perm}
	glob := strings.IndexAny(pattern, "*?[\\")
	switch {
	case pattern == "*":
		p.kind = patAll
	case glob < 0:
		p.kind = patLiteral
	case glob == len(pattern)-1 && pattern[glob] == '*':
		p.kind, p.prefix = patPrefix, pattern[:glob]
	}
	return p
}

func (p *keyPattern) matches(key []byte) bool {
	switch p.kind {
	case patAll:
		return true
	case patLiteral:
		return string(key) == p.pattern
	case patPrefix:
		return len(key) >= len(p.prefix) && string(key[:len(p.prefix)]) == p.prefix
	}
	return glob.Match(p.pattern, string(key))
}

func (p keyPattern) String() string {
	switch p.perm {
	case permRead:
		return "%R~" + p.pattern
	case permWrite:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

// aclUser is one user's rules. It is never changed once published: a
// change builds a new one, so permission checks read it without locks.
type aclUser struct {
	name      string
	enabled   bool
	nopass    bool
	sanitize  int8     // 0 unset, 1 skip-sanitize-payload, 2 sanitize-payload
	passwords []string // SHA-256 hex, in the order added

	// allCommands skips the command bitmap (Redis's ALLCOMMANDS flag):
	// set by +@all, cleared by removing any command.
	allCommands bool
	// future is Redis's reserved bit: +@all also allows commands that do
	// not exist yet. The describer starts from +@all or -@all by it.
	future    bool
	allowed   []uint64 // by command id
	firstArgs map[int][]string

	allKeys     bool
	patterns    []keyPattern
	allChannels bool
	channels    []string
}

func newACLUser(name string) *aclUser {
	return &aclUser{name: name, allowed: make([]uint64, (len(aclCommands)+63)/64)}
}

func (u *aclUser) clone() *aclUser {
	c := *u
	c.passwords = slices.Clone(u.passwords)
	c.allowed = slices.Clone(u.allowed)
	c.patterns = slices.Clone(u.patterns)
	c.channels = slices.Clone(u.channels)
	if u.firstArgs != nil {
		c.firstArgs = make(map[int][]string, len(u.firstArgs))
		for k, v := range u.firstArgs {
			c.firstArgs[k] = slices.Clone(v)
		}
	}
	return &c
}

func (u *aclUser) bit(id int) bool { return u.allowed[id/64]&(1<<(id%64)) != 0 }

func (u *aclUser) setBit(id int, on bool) {
	if on {
		u.allowed[id/64] |= 1 << (id % 64)
		return
	}
	u.allowed[id/64] &^= 1 << (id % 64)
	u.allCommands = false
}

// changePerm allows or blocks a command; for a container, its subcommands
// too.
func (u *aclUser) changePerm(cmd *command, allow bool) {
	u.setBit(cmd.id, allow)
	delete(u.firstArgs, cmd.id)
	for _, sub := range cmd.subs {
		u.setBit(sub.id, allow)
	}
}

// setCategory allows or blocks every command in cat, walking containers
// and their subcommands as Redis does.
func (u *aclUser) setCategory(cat aclCategory, allow bool) {
	for _, cmd := range aclTopCommands {
		if cmd.cats&cat != 0 {
			u.changePerm(cmd, allow)
		}
		for _, sub := range cmd.subs {
			if sub.cats&cat != 0 {
				u.changePerm(sub, allow)
			}
		}
	}
}

// countCategory counts the commands of cat the user may (on) and may not
// (off) run.
func (u *aclUser) countCategory(cat aclCategory) (on, off int) {
	for _, cmd := range aclCommands {
		if cmd.cats&cat == 0 {
			continue
		}
		if u.bit(cmd.id) {
			on++
		} else {
			off++
		}
	}
	return on, off
}

// Errors of ACL SETUSER modifiers, worded as Redis's.
var (
	errACLUnknown   = errors.New("Unknown command or category name in ACL")
	errACLSyntax    = errors.New("Syntax error")
	errACLKeysAll   = errors.New("Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")
	errACLChansAll  = errors.New("Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels")
	errACLNoPass    = errors.New("The password you are trying to remove from the user does not exist")
	errACLBadHash   = errors.New("The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
	errACLSubFirst  = errors.New("Allowing first-arg of a subcommand is not supported")
	errACLSelectors = errors.New("Selectors are not supported by Sluice")
)

func hashPassword(p []byte) string {
	sum := sha256.Sum256(p)
	return hex.EncodeToString(sum[:])
}

func validHash(h []byte) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func hasSpaces(b []byte) bool {
	for _, c := range b {
		if c == ' ' || c == 0 {
			return true
		}
	}
	return false
}

// apply applies one ACL SETUSER modifier, as Redis's ACLSetUser does.
func (u *aclUser) apply(op []byte) error {
	s := string(op)
	switch {
	case len(op) == 0:
		return nil
	case strings.EqualFold(s, "on"):
		u.enabled = true
	case strings.EqualFold(s, "off"):
		u.enabled = false
	case strings.EqualFold(s, "skip-sanitize-payload"):
		u.sanitize = 1
	case strings.EqualFold(s, "sanitize-payload"):
		u.sanitize = 2
	case strings.EqualFold(s, "nopass"):
		u.nopass, u.passwords = true, nil
	case strings.EqualFold(s, "resetpass"):
		u.nopass, u.passwords = false, nil
	case op[0] == '>' || op[0] == '#':
		var h string
		if op[0] == '>' {
			h = hashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return errACLBadHash
			}
			h = string(op[1:])
		}
		if !slices.Contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		var h string
		if op[0] == '<' {
			h = hashPassword(op[1:])
		} else {
			if !validHash(op[1:]) {
				return errACLBadHash
			}
			h = string(op[1:])
		}
		i := slices.Index(u.passwords, h)
		if i < 0 {
			return errACLNoPass
		}
		u.passwords = slices.Delete(u.passwords, i, i+1)
	case op[0] == '(' && op[len(op)-1] == ')':
		return errACLSelectors
	case strings.EqualFold(s, "clearselectors"):
	case strings.EqualFold(s, "reset"):
		*u = *newACLUser(u.name)
		u.sanitize = 2
	default:
		return u.applySelector(op)
	}
	return nil
}

// applySelector applies a command, key or channel rule.
func (u *aclUser) applySelector(op []byte) error {
	s := string(op)
	switch {
	case strings.EqualFold(s, "allkeys") || s == "~*":
		u.allKeys, u.patterns = true, nil
	case strings.EqualFold(s, "resetkeys"):
		u.allKeys, u.patterns = false, nil
	case strings.EqualFold(s, "allchannels") || s == "&*":
		u.allChannels, u.channels = true, nil
	case strings.EqualFold(s, "resetchannels"):
		u.allChannels, u.channels = false, nil
	case strings.EqualFold(s, "allcommands") || strings.EqualFold(s, "+@all"):
		for i := range u.allowed {
			u.allowed[i] = ^uint64(0)
		}
		u.allCommands, u.future, u.firstArgs = true, true, nil
	case strings.EqualFold(s, "nocommands") || strings.EqualFold(s, "-@all"):
		clear(u.allowed)
		u.allCommands, u.future, u.firstArgs = false, false, nil
	case op[0] == '~' || op[0] == '%':
		if u.allKeys {
			return errACLKeysAll
		}
		perm, offset := permAll, 1
		if op[0] == '%' {
			perm = 0
			for ; offset < len(op); offset++ {
				c := op[offset]
				if (c == 'R' || c == 'r') && perm&permRead == 0 {
					perm |= permRead
				} else if (c == 'W' || c == 'w') && perm&permWrite == 0 {
					perm |= permWrite
				} else if c == '~' {
					offset++
					break
				} else {
					return errACLSyntax
				}
			}
		}
		pat := op[offset:]
		if hasSpaces(pat) {
			return errACLSyntax
		}
		if i := slices.IndexFunc(u.patterns, func(p keyPattern) bool { return p.pattern == string(pat) }); i >= 0 {
			u.patterns[i].perm |= perm
		} else {
			u.patterns = append(u.patterns, newKeyPattern(string(pat), perm))
		}
		u.allKeys = false
	case op[0] == '&':
		if u.allChannels {
			return errACLChansAll
		}
		if hasSpaces(op[1:]) {
			return errACLSyntax
		}
		if !slices.Contains(u.channels, string(op[1:])) {
			u.channels = append(u.channels, string(op[1:]))
		}
		u.allChannels = false
	case op[0] == '+' && len(op) > 1 && op[1] != '@':
		name := strings.ToLower(s[1:])
		bar := strings.LastIndexByte(name, '|')
		if bar < 0 {
			cmd := lookupACLCommand(name)
			if cmd == nil {
				return errACLUnknown
			}
			u.changePerm(cmd, true)
			return nil
		}
		cmd := lookupACLCommand(name[:bar])
		switch {
		case cmd == nil:
			return errACLUnknown
		case cmd.parent != nil:
			return errACLSubFirst
		case bar == len(name)-1:
			return errACLSyntax
		case len(cmd.subs) > 0:
			sub := lookupACLCommand(name)
			if sub == nil {
				return errACLUnknown
			}
			u.changePerm(sub, true)
		default:
			// A first argument of a command without subcommands (SELECT 0):
			// Redis keeps it for compatibility, and so does Sluice.
			if u.firstArgs == nil {
				u.firstArgs = map[int][]string{}
			}
			arg := name[bar+1:]
			if !slices.ContainsFunc(u.firstArgs[cmd.id], func(a string) bool { return strings.EqualFold(a, arg) }) {
				u.firstArgs[cmd.id] = append(u.firstArgs[cmd.id], arg)
			}
		}
	case op[0] == '-' && len(op) > 1 && op[1] != '@':
		cmd := lookupACLCommand(strings.ToLower(s[1:]))
		if cmd == nil {
			return errACLUnknown
		}
		u.changePerm(cmd, false)
	case (op[0] == '+' || op[0] == '-') && len(op) > 1 && op[1] == '@':
		cat, ok := categoryByName(s[2:])
		if !ok {
			return errACLUnknown
		}
		u.setCategory(cat, op[0] == '+')
	default:
		return errACLSyntax
	}
	return nil
}

// describeCommands renders the command rules the way Redis does: +@all or
// -@all by whether future commands are allowed, then the categories that
// best fit the bitmap, then the single commands (in name order) that make
// it exact.
func (u *aclUser) describeCommands() string {
	var b strings.Builder
	fake := newACLUser("")
	additive := !u.future
	if additive {
		b.WriteString("-@all ")
	} else {
		b.WriteString("+@all ")
		fake.applySelector([]byte("+@all"))
	}
	temp := newACLUser("")
	copy(temp.allowed, u.allowed)
	applied := make([]bool, len(aclCategories))
	for {
		best, minDiff, maxSame := -1, int(^uint(0)>>1), 0
		for j, c := range aclCategories {
			if applied[j] {
				continue
			}
			on, off := temp.countCategory(c.cat)
			diff, same := off, on
			if !additive {
				diff, same = on, off
			}
			if same > diff && (diff < minDiff || (diff == minDiff && same > maxSame)) {
				best, minDiff, maxSame = j, diff, same
			}
		}
		if best < 0 {
			break
		}
		c := aclCategories[best]
		fake.setCategory(c.cat, additive)
		temp.setCategory(c.cat, !additive)
		if additive {
			b.WriteString("+@")
		} else {
			b.WriteString("-@")
		}
		b.WriteString(c.name)
		b.WriteByte(' ')
		applied[best] = true
	}
	for _, cmd := range aclTopCommands {
		describeSingle(&b, u, fake, cmd)
		for _, sub := range cmd.subs {
			describeSingle(&b, u, fake, sub)
		}
		if !u.bit(cmd.id) {
			for _, arg := range u.firstArgs[cmd.id] {
				b.WriteString("+" + cmd.fullname + "|" + arg + " ")
			}
		}
	}
	return strings.TrimSuffix(b.String(), " ")
}

func describeSingle(b *strings.Builder, u, fake *aclUser, cmd *command) {
	if on := u.bit(cmd.id); on != fake.bit(cmd.id) {
		if on {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		b.WriteString(cmd.fullname + " ")
		fake.changePerm(cmd, on)
	}
}

// describeKeys renders the key patterns (ACL GETUSER's "keys").
func (u *aclUser) describeKeys() string {
	if u.allKeys {
		return "~*"
	}
	parts := make([]string, len(u.patterns))
	for i, p := range u.patterns {
		parts[i] = p.String()
	}
	return strings.Join(parts, " ")
}

func (u *aclUser) describeChannels() string {
	if u.allChannels {
		return "&*"
	}
	parts := make([]string, len(u.channels))
	for i, c := range u.channels {
		parts[i] = "&" + c
	}
	return strings.Join(parts, " ")
}

// flagNames are the user's flags as ACL GETUSER lists them.
func (u *aclUser) flagNames() []string {
	var f []string
	if u.enabled {
		f = append(f, "on")
	} else {
		f = append(f, "off")
	}
	if u.nopass {
		f = append(f, "nopass")
	}
	switch u.sanitize {
	case 1:
		f = append(f, "skip-sanitize-payload")
	case 2:
		f = append(f, "sanitize-payload")
	}
	return f
}

// describe renders the whole user the way ACL LIST (and the ACL file)
// does, without the leading "user <name> ".
func (u *aclUser) describe() string {
	var b strings.Builder
	for _, f := range u.flagNames() {
		b.WriteString(f + " ")
	}
	for _, p := range u.passwords {
		b.WriteString("#" + p + " ")
	}
	if u.allKeys {
		b.WriteString("~* ")
	} else {
		for _, p := range u.patterns {
			b.WriteString(p.String() + " ")
		}
	}
	if u.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range u.channels {
			b.WriteString("&" + c + " ")
		}
	}
	b.WriteString(u.describeCommands())
	return b.String()
}

// checkPassword reports whether pass is one of the user's passwords, in
// time independent of where the hashes differ.
func (u *aclUser) checkPassword(pass []byte) bool {
	if u.nopass {
		return true
	}
	h := []byte(hashPassword(pass))
	ok := 0
	for _, p := range u.passwords {
		ok |= subtle.ConstantTimeCompare(h, []byte(p))
	}
	return ok == 1
}

// aclDenial says why a command was refused.
type aclDenial int

const (
	aclOK aclDenial = iota
	aclDeniedCmd
	aclDeniedKey
	aclDeniedChannel
	aclDeniedAuth
)

// check reports whether the user may run cmd with args, and for a key
// denial the index of the offending argument. cmd is the top-level row;
// for a container, the subcommand named by args[1] is what is checked.
//
// buf is scratch space for the keys, which the caller keeps (a
// connection's), so that a check allocates nothing.
func (u *aclUser) check(cmd *command, args [][]byte, buf []keyRef) (aclDenial, int) {
	if cmd.flags&flagNoAuth != 0 {
		return aclOK, 0
	}
	checked := cmd.subcommand(args)
	if !u.allCommands && !u.bit(checked.id) {
		argAt := 1
		if checked.parent != nil {
			argAt = 2
		}
		allowed := false
		if len(args) > argAt {
			for _, a := range u.firstArgs[checked.id] {
				if strings.EqualFold(a, string(args[argAt])) {
					allowed = true
					break
				}
			}
		}
		if !allowed {
			return aclDeniedCmd, 0
		}
	}
	if !u.allKeys {
		// A container's keys are its subcommand's (OBJECT ENCODING key).
		for _, k := range checked.keys(args, buf[:0]) {
			if !u.keyAllowed(args[k.at], k.need) {
				return aclDeniedKey, k.at
			}
		}
	}
	if !u.allChannels && checked.channels != chanNone {
		last := len(args) - 1
		if checked.channels == chanFirst {
			last = 1
		}
		for i := 1; i <= last; i++ {
			if !u.channelAllowed(args[i], checked.channels == chanPatterns) {
				return aclDeniedChannel, i
			}
		}
	}
	return aclOK, 0
}

// channelAllowed reports whether the user may use channel: one of its
// channel patterns matches it, or, for a pattern a PSUBSCRIBE names, is it
// literally.
func (u *aclUser) channelAllowed(channel []byte, literal bool) bool {
	for _, p := range u.channels {
		if (literal && p == string(channel)) || (!literal && glob.Match(p, string(channel))) {
			return true
		}
	}
	return false
}

func (u *aclUser) keyAllowed(key []byte, need keyPerm) bool {
	for i := range u.patterns {
		p := &u.patterns[i]
		if p.perm&need == need && p.matches(key) {
			return true
		}
	}
	return false
}

// userRef is a user as connections hold it: its current rules, replaced
// whole by ACL SETUSER, and whether it was deleted (its connections are
// then closed).
type userRef struct {
	name    string
	rules   atomic.Pointer[aclUser]
	deleted atomic.Bool
}

// ACL is the server's users. Reads (authentication, checks) take no
// lock; changes are serialized by mu and publish new maps and rules.
type ACL struct {
	mu    sync.Mutex
	users atomic.Pointer[map[string]*userRef]
	// onGone closes the connections of deleted users (set by New).
	onGone atomic.Pointer[func([]*userRef)]
}

// NewACL holds the default user: every command, every key, no
// password unless requirepass sets one.
func NewACL(requirepass string) *ACL {
	st := &ACL{}
	def := newACLUser("default")
	for _, op := range []string{"+@all", "~*", "&*", "on"} {
		def.apply([]byte(op))
	}
	setDefaultPassword(def, requirepass)
	ref := &userRef{name: "default"}
	ref.rules.Store(def)
	m := map[string]*userRef{"default": ref}
	st.users.Store(&m)
	return st
}

// setDefaultPassword is requirepass: it replaces the default user's
// passwords (none means nopass).
func setDefaultPassword(u *aclUser, pass string) {
	u.apply([]byte("resetpass"))
	if pass == "" {
		u.apply([]byte("nopass"))
		return
	}
	u.apply(append([]byte(">"), pass...))
}

func (st *ACL) get(name string) *userRef { return (*st.users.Load())[name] }

func (st *ACL) defaultUser() *userRef { return st.get("default") }

// names lists the users in byte order, as Redis's radix tree does.
func (st *ACL) names() []string {
	m := *st.users.Load()
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// setUser applies modifiers to a user (created if missing): all of them,
// or, on the first error, none. The error names the modifier.
func (st *ACL) setUser(name string, ops [][]byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	ref := st.get(name)
	var u *aclUser
	if ref != nil {
		u = ref.rules.Load().clone()
	} else {
		u = newACLUser(name)
	}
	for _, op := range ops {
		if err := u.apply(op); err != nil {
			return &aclModifierError{op: string(op), err: err}
		}
	}
	if ref != nil {
		ref.rules.Store(u)
		return nil
	}
	ref = &userRef{name: name}
	ref.rules.Store(u)
	m := *st.users.Load()
	next := make(map[string]*userRef, len(m)+1)
	for k, v := range m {
		next[k] = v
	}
	next[name] = ref
	st.users.Store(&next)
	return nil
}

type aclModifierError struct {
	op  string
	err error
}

func (e *aclModifierError) Error() string {
	return "Error in ACL SETUSER modifier '" + e.op + "': " + e.err.Error()
}

func (e *aclModifierError) Unwrap() error { return e.err }

// delUsers deletes users and returns the refs deleted, for their
// connections to be closed.
func (st *ACL) delUsers(names []string) []*userRef {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := *st.users.Load()
	next := make(map[string]*userRef, len(m))
	for k, v := range m {
		next[k] = v
	}
	var gone []*userRef
	for _, n := range names {
		if ref, ok := next[n]; ok {
			delete(next, n)
			ref.deleted.Store(true)
			gone = append(gone, ref)
		}
	}
	st.users.Store(&next)
	return gone
}

// replace swaps the whole user set (ACL LOAD), keeping the refs of users
// that still exist so their connections follow the new rules, and returns
// the refs of users that are gone.
func (st *ACL) replace(users map[string]*aclUser) []*userRef {
	st.mu.Lock()
	defer st.mu.Unlock()
	old := *st.users.Load()
	next := make(map[string]*userRef, len(users))
	for name, u := range users {
		ref := old[name]
		if ref == nil {
			ref = &userRef{name: name}
		}
		ref.rules.Store(u)
		next[name] = ref
	}
	var gone []*userRef
	for name, ref := range old {
		if _, ok := next[name]; !ok {
			ref.deleted.Store(true)
			gone = append(gone, ref)
		}
	}
	st.users.Store(&next)
	return gone
}

// authenticate checks a user and password. Unknown users, disabled users
// and wrong passwords fail alike.
func (st *ACL) authenticate(name string, pass []byte) (*userRef, bool) {
	ref := st.get(name)
	if ref == nil {
		// Spend the same hashing work, so that timing does not tell
		// which user names exist.
		newACLUser("").checkPassword(pass)
		return nil, false
	}
	u := ref.rules.Load()
	if !u.enabled || !u.checkPassword(pass) {
		return nil, false
	}
	return ref, true
}
