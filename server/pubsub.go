package server

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tidwall/redcon"

	"github.com/sluicehq/sluice/engine/glob"
)

// Pub/sub, as Redis 7.0: SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE, their
// UNSUBSCRIBEs, PUBLISH, SPUBLISH (shard channels: Redis Cluster routes
// them by slot; a lone server treats them as a channel space of their
// own) and PUBSUB. Messages are node-local: a cluster node delivers what
// is published on it (docs/commands.md).
//
// Delivery. A subscribed connection's socket belongs to its writer
// (outqueue.go), so a publisher appends a message to each subscriber's
// queue and never waits for a subscriber's socket; a subscriber that
// reads too slowly is closed by its output buffer limit (the pubsub
// class), as in Redis. Confirmations are queued under the hub's lock, so
// that a message on a channel never precedes its SUBSCRIBE's confirmation
// nor follows its UNSUBSCRIBE's. As in Redis, they are sent whatever
// CLIENT REPLY says.
//
// In RESP2 a subscribed connection may only (un)subscribe, PING, QUIT and
// RESET; in RESP3 it may run anything, messages arriving as pushes.

// subKind is the kind of a subscription: a channel, a pattern, a shard
// channel.
type subKind uint8

const (
	subChannel subKind = iota
	subPattern
	subShard
)

// subReplies are the confirmations' and messages' first words, by kind.
var subReplies = [3]struct{ sub, unsub, message string }{
	{"subscribe", "unsubscribe", "message"},
	{"psubscribe", "punsubscribe", "pmessage"},
	{"ssubscribe", "sunsubscribe", "smessage"},
}

// subscriptions are one connection's, touched only by its goroutine, but
// for counts, which CLIENT LIST reads.
type subscriptions struct {
	names  [3]map[string]uint64 // name -> when it was subscribed, for UNSUBSCRIBE's order
	seq    uint64
	counts [3]atomic.Int64
}

// has reports whether the connection is subscribed to kind/name.
func (ss *subscriptions) has(kind subKind, name string) bool {
	_, ok := ss.names[kind][name]
	return ok
}

// replyCount is the count a confirmation carries: channels and patterns
// together, shard channels on their own, as Redis counts them.
func (ss *subscriptions) replyCount(kind subKind) int64 {
	if kind == subShard {
		return int64(len(ss.names[subShard]))
	}
	return int64(len(ss.names[subChannel]) + len(ss.names[subPattern]))
}

// ordered is the connection's subscriptions of kind in the order it made
// them (UNSUBSCRIBE with no argument ends them in it).
func (ss *subscriptions) ordered(kind subKind) []string {
	m := ss.names[kind]
	list := make([]string, 0, len(m))
	for name := range m {
		list = append(list, name)
	}
	sort.Slice(list, func(i, j int) bool { return m[list[i]] < m[list[j]] })
	return list
}

// pubsubHub is the server's subscriptions: who is subscribed to each
// channel, pattern and shard channel. Publishers read it under the read
// lock; subscriptions change under the write lock, a name at a time, so
// that no change holds publishers up for long.
type pubsubHub struct {
	mu   sync.RWMutex
	subs [3]map[string]map[*client]struct{}
}

// add subscribes c to kind/name, and reports whether it was not already.
// Called with the write lock held.
func (h *pubsubHub) add(c *client, kind subKind, name string) bool {
	ss := &c.subs
	if ss.has(kind, name) {
		return false
	}
	if ss.names[kind] == nil {
		ss.names[kind] = map[string]uint64{}
	}
	ss.seq++
	ss.names[kind][name] = ss.seq
	if h.subs[kind] == nil {
		h.subs[kind] = map[string]map[*client]struct{}{}
	}
	set := h.subs[kind][name]
	if set == nil {
		set = map[*client]struct{}{}
		h.subs[kind][name] = set
	}
	set[c] = struct{}{}
	ss.counts[kind].Add(1)
	c.subsN.Add(1)
	return true
}

// remove unsubscribes c from kind/name, and reports whether it was
// subscribed. Called with the write lock held.
func (h *pubsubHub) remove(c *client, kind subKind, name string) bool {
	ss := &c.subs
	if !ss.has(kind, name) {
		return false
	}
	delete(ss.names[kind], name)
	if set := h.subs[kind][name]; set != nil {
		delete(set, c)
		if len(set) == 0 {
			delete(h.subs[kind], name)
		}
	}
	ss.counts[kind].Add(-1)
	c.subsN.Add(-1)
	return true
}

// publish sends msg to the subscribers of channel (kind subChannel, and
// the patterns matching it; or subShard) and returns how many messages it
// queued, as PUBLISH answers.
func (h *pubsubHub) publish(s *Server, kind subKind, channel, msg []byte) int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var enc [2][]byte // the message in RESP2 and RESP3, made once each
	n := int64(0)
	for c := range h.subs[kind][string(channel)] {
		c.deliver(s, &enc, kind, "", channel, msg)
		n++
	}
	if kind != subChannel {
		return n
	}
	for pattern, set := range h.subs[subPattern] {
		if !glob.Match(pattern, string(channel)) {
			continue
		}
		var penc [2][]byte
		for c := range set {
			c.deliver(s, &penc, subPattern, pattern, channel, msg)
			n++
		}
	}
	return n
}

// subscribers is how many connections a PUBLISH to channel would reach
// (a script's PUBLISH answers it; its messages go out once the script's
// run counts).
func (h *pubsubHub) subscribers(kind subKind, channel []byte) int64 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := int64(len(h.subs[kind][string(channel)]))
	if kind == subChannel {
		for pattern, set := range h.subs[subPattern] {
			if glob.Match(pattern, string(channel)) {
				n += int64(len(set))
			}
		}
	}
	return n
}

// deliver queues one message for c, encoded for its protocol (enc caches
// the encodings). pattern is the pattern it matched, for a pmessage.
func (c *client) deliver(s *Server, enc *[2][]byte, kind subKind, pattern string, channel, msg []byte) {
	q := c.oq.Load()
	if q == nil {
		return // a subscriber always has its queue; this is defensive
	}
	proto := 0
	if c.pushResp3.Load() {
		proto = 1
	}
	if enc[proto] == nil {
		n := 3
		if kind == subPattern {
			n = 4
		}
		b := appendPushHeader(nil, proto == 1, n)
		b = redcon.AppendBulkString(b, subReplies[kind].message)
		if kind == subPattern {
			b = redcon.AppendBulkString(b, pattern)
		}
		b = redcon.AppendBulk(b, channel)
		enc[proto] = redcon.AppendBulk(b, msg)
	}
	name := pattern
	if kind != subPattern {
		name = string(channel)
	}
	q.pushMessage(s, enc[proto], kind, name)
}

// appendPushHeader starts an n-item confirmation or message: an array in
// RESP2, a push in RESP3.
func appendPushHeader(b []byte, resp3 bool, n int) []byte {
	if resp3 {
		return append(strconv.AppendInt(append(b, '>'), int64(n), 10), '\r', '\n')
	}
	return redcon.AppendArray(b, n)
}

// Commands.

func pubsubCommands() []*command {
	channelArgs := []argSpec{many(str("channel"))}
	patternArgs := []argSpec{many(str("pattern"))}
	shardArgs := []argSpec{many(str("shardchannel"))}
	const subFlags = flagPubSub | flagNoScript | flagLoading | flagStale
	return []*command{
		{name: "subscribe", cats: catPubSub, arity: -2, flags: subFlags, channels: chanAll, group: "pubsub", since: "2.0.0",
			summary: "Listen for messages published to the channels.", args: channelArgs, run: subscribeCommand(subChannel)},
		{name: "psubscribe", cats: catPubSub, arity: -2, flags: subFlags, channels: chanPatterns, group: "pubsub", since: "2.0.0",
			summary: "Listen for messages published to channels matching the glob patterns.", args: patternArgs, run: subscribeCommand(subPattern)},
		{name: "ssubscribe", cats: catPubSub, arity: -2, flags: subFlags, channels: chanAll, group: "pubsub", since: "7.0.0",
			summary: "Listen for messages published to the shard channels.", args: shardArgs, run: subscribeCommand(subShard)},
		{name: "unsubscribe", cats: catPubSub, arity: -1, flags: subFlags, group: "pubsub", since: "2.0.0",
			summary: "Stop listening to the channels (all of them when none is named).", args: []argSpec{opt(many(str("channel")))}, run: unsubscribeCommand(subChannel)},
		{name: "punsubscribe", cats: catPubSub, arity: -1, flags: subFlags, group: "pubsub", since: "2.0.0",
			summary: "Stop listening to the patterns (all of them when none is named).", args: []argSpec{opt(many(str("pattern")))}, run: unsubscribeCommand(subPattern)},
		{name: "sunsubscribe", cats: catPubSub, arity: -1, flags: subFlags, group: "pubsub", since: "7.0.0",
			summary: "Stop listening to the shard channels (all of them when none is named).", args: []argSpec{opt(many(str("shardchannel")))}, run: unsubscribeCommand(subShard)},
		{name: "publish", cats: catPubSub, arity: 3, flags: flagPubSub | flagLoading | flagStale | flagFast, channels: chanFirst, group: "pubsub", since: "2.0.0",
			summary: "Post a message to a channel; the number of subscribers that received it.", args: []argSpec{str("channel"), str("message")}, run: publishCommand(subChannel)},
		{name: "spublish", cats: catPubSub, arity: 3, flags: flagPubSub | flagLoading | flagStale | flagFast, channels: chanFirst, group: "pubsub", since: "7.0.0",
			summary: "Post a message to a shard channel; the number of subscribers that received it.", args: []argSpec{str("shardchannel"), str("message")}, run: publishCommand(subShard)},
		{name: "pubsub", arity: -2, group: "pubsub", since: "2.8.0",
			summary: "PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP: the active subscriptions.", args: []argSpec{str("subcommand"), opt(many(str("arg")))},
			subs: []*command{
				sub("channels", -2, flagPubSub|flagLoading|flagStale, catPubSub|catSlow), sub("numsub", -2, flagPubSub|flagLoading|flagStale, catPubSub|catSlow),
				sub("numpat", 2, flagPubSub|flagLoading|flagStale, catPubSub|catSlow), sub("shardchannels", -2, flagPubSub|flagLoading|flagStale, catPubSub|catSlow),
				sub("shardnumsub", -2, flagPubSub|flagLoading|flagStale, catPubSub|catSlow), sub("help", 2, flagLoading|flagStale, catSlow),
			},
			run: cmdPubSub},
	}
}

// chanSpec says which arguments of a command are channels, for ACL.
type chanSpec uint8

const (
	chanNone     chanSpec = iota
	chanFirst             // args[1] (PUBLISH)
	chanAll               // args[1:] (SUBSCRIBE)
	chanPatterns          // args[1:], patterns a user's must name literally (PSUBSCRIBE)
)

// allowedInSubscribed: the commands a RESP2 connection may send while it
// is subscribed.
func allowedInSubscribed(cmd *command) bool {
	switch cmd.name {
	case "subscribe", "psubscribe", "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "ping", "quit", "reset":
		return true
	}
	return false
}

var errSSubscribeInExec = errors.New("SSUBSCRIBE isn't allowed for a DENY BLOCKING client")

func errSubscribedContext(name string) error {
	return fmt.Errorf("Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context", name)
}

func subscribeCommand(kind subKind) func(*Server, *client, [][]byte) {
	return func(s *Server, c *client, args [][]byte) { c.subscribe(kind, args[1:]) }
}

func unsubscribeCommand(kind subKind) func(*Server, *client, [][]byte) {
	return func(s *Server, c *client, args [][]byte) { c.unsubscribe(kind, args[1:]) }
}

// subscribe: each name is subscribed to and confirmed in turn.
func (c *client) subscribe(kind subKind, names [][]byte) {
	if kind == subShard && c.inExec {
		// Redis 7.0 refuses SSUBSCRIBE to a client that may not block,
		// which a transaction's is (SUBSCRIBE it lets through).
		c.writeError(errSSubscribeInExec)
		return
	}
	q := c.startQueue()
	c.beginConfirmations(q)
	h := &c.s.pubsub
	for _, n := range names {
		name := string(n)
		h.mu.Lock()
		h.add(c, kind, name)
		c.confirm(q, subReplies[kind].sub, n, c.subs.replyCount(kind))
		h.mu.Unlock()
	}
}

// unsubscribe: each name (every subscription of kind when none is named,
// in the order they were made) is left and confirmed in turn; with none
// at all, one confirmation with a null name.
func (c *client) unsubscribe(kind subKind, names [][]byte) {
	q := c.oq.Load()
	c.beginConfirmations(q)
	h := &c.s.pubsub
	if len(names) == 0 {
		for _, name := range c.subs.ordered(kind) {
			names = append(names, []byte(name))
		}
		if len(names) == 0 {
			c.confirm(q, subReplies[kind].unsub, nil, c.subs.replyCount(kind))
		}
	}
	for _, n := range names {
		h.mu.Lock()
		h.remove(c, kind, string(n))
		c.confirm(q, subReplies[kind].unsub, n, c.subs.replyCount(kind))
		h.mu.Unlock()
	}
	c.stopQueue()
}

// beginConfirmations readies the connection for confirmations: the
// replies before them written (into the queue, when there is one), or,
// inside EXEC, whose reply holds them, messages held until EXEC's reply
// is out.
func (c *client) beginConfirmations(q *outQueue) {
	if c.inExec {
		if q != nil {
			q.hold()
		}
		return
	}
	c.flushOut()
}

// confirm writes one (un)subscribe confirmation: in EXEC's reply, or
// straight into the queue (or to the socket, unsubscribing with none),
// past CLIENT REPLY.
func (c *client) confirm(q *outQueue, word string, name []byte, count int64) {
	var b []byte
	if c.inExec {
		b = c.out
	}
	b = appendPushHeader(b, c.resp3, 3)
	b = redcon.AppendBulkString(b, word)
	switch {
	case name != nil:
		b = redcon.AppendBulk(b, name)
	case c.resp3:
		b = append(b, '_', '\r', '\n')
	default:
		b = append(b, "$-1\r\n"...)
	}
	b = redcon.AppendInt(b, count)
	switch {
	case c.inExec:
		c.out = b
	case q != nil:
		q.push(c.s, b)
	default:
		if _, err := c.nc.Write(b); err != nil {
			c.quit = true
		}
	}
}

// releaseHeld queues the messages held during EXEC once its reply is out.
func (c *client) releaseHeld(q *outQueue) {
	if q.holding && !c.inExec {
		q.release(c.subs.has)
	}
}

// endSubscriptions leaves every subscription, unconfirmed: the connection
// ends, or RESET.
func (c *client) endSubscriptions() {
	if c.subsN.Load() == 0 {
		return
	}
	h := &c.s.pubsub
	h.mu.Lock()
	defer h.mu.Unlock()
	for kind := range c.subs.names {
		for name := range c.subs.names[kind] {
			h.remove(c, subKind(kind), name)
		}
	}
}

func publishCommand(kind subKind) func(*Server, *client, [][]byte) {
	return func(s *Server, c *client, args [][]byte) {
		if c.oq.Load() != nil {
			// Publishing to itself: its earlier replies come first.
			c.flushOut()
		}
		c.writeInt(s.pubsub.publish(s, kind, args[1], args[2]))
	}
}

// cmdPubSub: PUBSUB CHANNELS|SHARDCHANNELS [pattern], NUMSUB|SHARDNUMSUB
// [channel ...], NUMPAT, HELP.
func cmdPubSub(s *Server, c *client, args [][]byte) {
	h := &s.pubsub
	sub := asciiLower(string(args[1]))
	switch {
	case (sub == "channels" || sub == "shardchannels") && len(args) <= 3:
		kind := subChannel
		if sub == "shardchannels" {
			kind = subShard
		}
		h.mu.RLock()
		var names []string
		for name := range h.subs[kind] {
			if len(args) == 2 || glob.Match(string(args[2]), name) {
				names = append(names, name)
			}
		}
		h.mu.RUnlock()
		slices.Sort(names)
		c.writeArray(len(names))
		for _, name := range names {
			c.writeBulkString(name)
		}
	case sub == "numsub" || sub == "shardnumsub":
		kind := subChannel
		if sub == "shardnumsub" {
			kind = subShard
		}
		h.mu.RLock()
		counts := make([]int64, len(args)-2)
		for i, name := range args[2:] {
			counts[i] = int64(len(h.subs[kind][string(name)]))
		}
		h.mu.RUnlock()
		c.writeArray(2 * len(counts)) // an array in RESP3 too, as Redis 7.0's
		for i, name := range args[2:] {
			c.writeBulk(name)
			c.writeInt(counts[i])
		}
	case sub == "numpat":
		h.mu.RLock()
		n := len(h.subs[subPattern])
		h.mu.RUnlock()
		c.writeInt(int64(n))
	case sub == "help":
		help := []string{
			"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CHANNELS [<pattern>]",
			"    Return the currently active channels matching a <pattern> (default: '*').",
			"NUMPAT",
			"    Return number of subscriptions to patterns.",
			"NUMSUB [<channel> ...]",
			"    Return the number of subscribers for the specified channels, excluding",
			"    pattern subscriptions(default: no channels).",
			"SHARDCHANNELS [<pattern>]",
			"    Return the currently active shard level channels matching a <pattern> (default: '*').",
			"SHARDNUMSUB [<shardchannel> ...]",
			"    Return the number of subscribers for the specified shard level channel(s)",
			"HELP",
			"    Prints this help.",
		}
		c.writeHelp(help)
	default:
		c.writeError(errors.New("unknown subcommand or wrong number of arguments for '" + string(args[1]) + "'. Try PUBSUB HELP."))
	}
}

// infoLines are INFO stats' pub/sub lines.
func (h *pubsubHub) infoLines() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return []string{
		"pubsub_channels:" + strconv.Itoa(len(h.subs[subChannel])),
		"pubsub_patterns:" + strconv.Itoa(len(h.subs[subPattern])),
		"pubsubshard_channels:" + strconv.Itoa(len(h.subs[subShard])),
	}
}

// closeDeniedSubscribers closes, as Redis 7 does when ACL rules change,
// every connection subscribed to a channel or pattern its user may no
// longer use. The asking connection, if it is one, is closed once its
// reply is out.
func (s *Server) closeDeniedSubscribers(asking *client) {
	var denied []*client
	h := &s.pubsub
	for _, c := range s.clientsByID() {
		if c.subsN.Load() == 0 {
			continue
		}
		c.mu.Lock()
		u := c.user.rules.Load()
		c.mu.Unlock()
		if u.allChannels {
			continue
		}
		// The subscriptions change under the hub's lock only.
		h.mu.RLock()
		allowed := true
		for kind, names := range c.subs.names {
			for name := range names {
				allowed = allowed && u.channelAllowed([]byte(name), subKind(kind) == subPattern)
			}
		}
		h.mu.RUnlock()
		if !allowed {
			denied = append(denied, c)
		}
	}
	for _, c := range denied {
		if c == asking {
			c.quit = true
		} else {
			c.kill()
		}
	}
}
