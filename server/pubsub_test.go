package server_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/difftest"
	"github.com/sluicehq/sluice/internal/sluicetest"
)

// Pub/sub against a real redis-server: a seeded random sequence of
// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, SPUBLISH
// (also from scripts and transactions), PUBSUB, PING, RESET and commands a
// subscribed RESP2 connection may not send, over four connections to each
// server (two RESP2, one RESP3, one RESP2 of a user limited to some
// channels). After every step each connection sends PING with a tag of
// the step and reads up to its answer: every confirmation and message a
// connection received in the step, in order, must be the same bytes from
// both servers. Redis's own orders that come from its hash tables (the
// channels an UNSUBSCRIBE without arguments ends, the patterns one message
// matches, PUBSUB CHANNELS) are put in order on both sides first.
//
// SLUICE_DIFF_STEPS and SLUICE_DIFF_SEED set the run's length and seed.
func TestPubSubMatchesRedis(t *testing.T) {
	steps, seed, _ := difftest.Settings(1500)
	ts := sluicetest.Start(t, sluicetest.Options{})
	r := sluicetest.StartRedis(t, "--databases", "1")
	admin := newTwin(t, ts, r)
	admin.same("ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "resetchannels", "&c*", "&news.*")

	d := &pubsubDiff{t: t, rng: rand.New(rand.NewPCG(seed, 7))}
	for i := range 4 {
		pc := &pubsubConn{twin: newTwin(t, ts, r), resp3: i == 2, limited: i == 3}
		d.conns = append(d.conns, pc)
		d.greet(pc)
	}
	t.Logf("seed %d, %d steps", seed, steps)
	for step := range steps {
		d.step(step)
	}
	for _, pc := range d.conns {
		pc.twin.sluice.Send(t, "RESET")
		pc.twin.redis.Send(t, "RESET")
	}
	d.barrier(steps, "RESET", nil)
	for _, name := range []string{"pubsub_channels", "pubsub_patterns", "pubsubshard_channels"} {
		got, want := infoField(admin.sluice.Do(t, "INFO", "stats"), name), infoField(admin.redis.Do(t, "INFO", "stats"), name)
		if got != want || got != "0" {
			t.Errorf("after RESET everywhere, %s: sluice %q, redis %q", name, got, want)
		}
	}
	t.Logf("commands sent per name: %v", d.counts)
}

type pubsubConn struct {
	twin           *twin
	resp3, limited bool
}

type pubsubDiff struct {
	t       *testing.T
	rng     *rand.Rand
	conns   []*pubsubConn
	history []string
	counts  map[string]int
}

var (
	pubsubChannels = []string{"c1", "c2", "c3", "news.a", "news.b", "x", "{tag}y", "ch1", "chx", "a b"}
	pubsubPatterns = []string{"c*", "news.*", "?1", "[cx]*", "*", "news.\\*", "ch?", "nomatch*", "[^c]*"}
)

// greet readies a connection as the test starts and after RESET.
func (d *pubsubDiff) greet(pc *pubsubConn) {
	if pc.resp3 {
		pc.twin.hello(true)
	}
	if pc.limited {
		pc.twin.same("AUTH", "limited", "pw")
	}
}

func (d *pubsubDiff) pick(xs []string) string { return xs[d.rng.IntN(len(xs))] }

func (d *pubsubDiff) names(kind int, lo, hi int) []string {
	pool := pubsubChannels
	if kind == 1 {
		pool = pubsubPatterns
	}
	n := lo + d.rng.IntN(hi-lo+1)
	out := make([]string, n)
	for i := range out {
		out[i] = d.pick(pool)
	}
	return out
}

var (
	subWords   = []string{"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"}
	unsubWords = []string{"UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"}
)

// command draws one step's commands for one connection.
func (d *pubsubDiff) command(step int) [][]string {
	msg := "m" + strconv.Itoa(step)
	switch d.rng.IntN(100) / 5 {
	case 0, 1, 2, 3, 4:
		kind := d.rng.IntN(3)
		return [][]string{append([]string{subWords[kind]}, d.names(kind, 1, 3)...)}
	case 5, 6, 7:
		kind := d.rng.IntN(3)
		return [][]string{append([]string{unsubWords[kind]}, d.names(kind, 0, 2)...)}
	case 8, 9, 10, 11:
		if d.rng.IntN(4) == 0 {
			msg = d.pick([]string{"", "a\r\nb", strings.Repeat("z", 300)})
		}
		return [][]string{{d.pick([]string{"PUBLISH", "PUBLISH", "SPUBLISH"}), d.pick(pubsubChannels), msg}}
	case 12:
		return [][]string{{"EVAL", "return redis.call(ARGV[1], ARGV[2], ARGV[3])", "0", d.pick([]string{"publish", "spublish"}), d.pick(pubsubChannels), msg}}
	case 13, 14:
		switch d.rng.IntN(6) {
		case 0:
			return [][]string{{"PUBSUB", "CHANNELS"}}
		case 1:
			return [][]string{{"PUBSUB", "CHANNELS", d.pick(pubsubPatterns)}}
		case 2:
			return [][]string{append([]string{"PUBSUB", "NUMSUB"}, d.names(0, 0, 3)...)}
		case 3:
			return [][]string{{"PUBSUB", "NUMPAT"}}
		case 4:
			return [][]string{{"PUBSUB", "SHARDCHANNELS"}}
		default:
			return [][]string{append([]string{"PUBSUB", "SHARDNUMSUB"}, d.names(0, 0, 2)...)}
		}
	case 15:
		return [][]string{d.pick2([][]string{{"PING"}, {"PING", msg}, {"GET", "k"}, {"CLIENT", "INFO"}, {"SUBSCRIBE"}, {"PUBLISH", "c1"}, {"PUBSUB", "NUMPAT", "x"}})}
	case 16:
		// A transaction that subscribes or unsubscribes, by name.
		tx := [][]string{{"MULTI"}}
		for range 1 + d.rng.IntN(3) {
			kind := d.rng.IntN(3)
			if d.rng.IntN(2) == 0 {
				tx = append(tx, append([]string{subWords[kind]}, d.names(kind, 1, 2)...))
			} else {
				tx = append(tx, append([]string{unsubWords[kind]}, d.names(kind, 1, 2)...))
			}
		}
		return append(tx, []string{"EXEC"})
	case 17:
		return [][]string{{"RESET"}}
	default:
		return [][]string{{"ACL", "DRYRUN", "limited", d.pick([]string{"PUBLISH", "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"}), d.pick(append(pubsubChannels, pubsubPatterns...)), "m"}}
	}
}

func (d *pubsubDiff) pick2(xs [][]string) []string { return xs[d.rng.IntN(len(xs))] }

// step sends one connection's commands to both servers, then takes every
// connection through the barrier and compares what each received.
func (d *pubsubDiff) step(step int) {
	pc := d.conns[d.rng.IntN(len(d.conns))]
	cmds := d.command(step)
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	for _, args := range cmds {
		d.counts[strings.ToLower(args[0])]++
		d.history = append(d.history, fmt.Sprintf("%d conn %d %q", step, slices.Index(d.conns, pc), args))
		pc.twin.sluice.Send(d.t, args...)
		pc.twin.redis.Send(d.t, args...)
	}
	if len(d.history) > 40 {
		d.history = d.history[len(d.history)-40:]
	}
	d.barrier(step, cmds[len(cmds)-1][0], pc)
	if cmds[0][0] == "RESET" {
		d.greet(pc)
	}
}

// barrier: each connection sends PING tag and reads until its answer,
// the one that sent the step's commands first: once it has its answer,
// what those commands published is queued for the others before their
// PINGs arrive.
func (d *pubsubDiff) barrier(step int, last string, sender *pubsubConn) {
	tag := "barrier-" + strconv.Itoa(step)
	order := slices.Clone(d.conns)
	if i := slices.Index(order, sender); i > 0 {
		order[0], order[i] = order[i], order[0]
	}
	for _, pc := range order {
		i := slices.Index(d.conns, pc)
		got := readToBarrier(d.t, pc.twin.sluice, tag)
		want := readToBarrier(d.t, pc.twin.redis, tag)
		if c, w := canonicalPubSub(got, last), canonicalPubSub(want, last); c != w {
			d.t.Fatalf("step %d, connection %d:\n sluice %q\n redis  %q\nlast commands:\n%s", step, i, c, w, strings.Join(d.history, "\n"))
		}
	}
}

func readToBarrier(t *testing.T, c *sluicetest.RawConn, tag string) []string {
	t.Helper()
	c.Send(t, "PING", tag)
	bulk := "$" + strconv.Itoa(len(tag)) + "\r\n" + tag + "\r\n"
	var out []string
	for {
		r := c.Read(t)
		if r == bulk || r == "*2\r\n$4\r\npong\r\n"+bulk {
			return out
		}
		out = append(out, r)
	}
}

var clientInfoFields = regexp.MustCompile(`flags=\S+ db=0 sub=\d+ psub=\d+ ssub=\d+`)

// canonicalPubSub joins one step's replies with Redis's hash-table orders
// put in order: a run of pmessages (one message matching several
// patterns), the names of a run of UNSUBSCRIBE or SUNSUBSCRIBE
// confirmations answering one without arguments (counts kept in place),
// PUBSUB CHANNELS' names; CLIENT INFO is cut to its pub/sub fields.
func canonicalPubSub(replies []string, last string) string {
	out := slices.Clone(replies)
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && isPMessage(out[j]) {
			j++
		}
		if j > i+1 {
			slices.Sort(out[i:j])
		}
		i = max(j, i+1)
	}
	noArgUnsub := strings.EqualFold(last, "unsubscribe") || strings.EqualFold(last, "sunsubscribe") || strings.EqualFold(last, "reset")
	for i := 0; noArgUnsub && i < len(out); {
		j := i
		for j < len(out) && unsubWord(out[j]) != "" && unsubWord(out[j]) == unsubWord(out[i]) {
			j++
		}
		if j > i+1 {
			sortConfirmationNames(out[i:j])
		}
		i = max(j, i+1)
	}
	for i, r := range out {
		if m := clientInfoFields.FindString(r); m != "" {
			// U: the test's Redis listens on a unix socket.
			flags, rest, _ := strings.Cut(strings.TrimPrefix(m, "flags="), " ")
			if flags = strings.ReplaceAll(flags, "U", ""); flags == "" {
				flags = "N"
			}
			out[i] = "flags=" + flags + " " + rest
		} else if strings.EqualFold(last, "pubsub") {
			out[i] = sortBulkArray(r)
		}
	}
	return strings.Join(out, "")
}

func isPMessage(r string) bool {
	return strings.HasPrefix(r, "*4\r\n$8\r\npmessage\r\n") || strings.HasPrefix(r, ">4\r\n$8\r\npmessage\r\n")
}

func unsubWord(r string) string {
	for _, w := range []string{"unsubscribe", "sunsubscribe"} {
		for _, h := range []string{"*3", ">3"} {
			if strings.HasPrefix(r, h+"\r\n$"+strconv.Itoa(len(w))+"\r\n"+w+"\r\n") {
				return w
			}
		}
	}
	return ""
}

// sortConfirmationNames sorts the names of a run of confirmations, each
// "header, word, name, :count", leaving the counts where they are.
func sortConfirmationNames(run []string) {
	heads, names, counts := make([]string, len(run)), make([]string, len(run)), make([]string, len(run))
	for i, r := range run {
		end := strings.LastIndex(r[:len(r)-2], "\r\n") + 2
		counts[i] = r[end:]
		w := unsubWord(r)
		head := len("*3\r\n$" + strconv.Itoa(len(w)) + "\r\n" + w + "\r\n")
		heads[i], names[i] = r[:head], r[head:end]
	}
	slices.Sort(names)
	for i := range run {
		run[i] = heads[i] + names[i] + counts[i]
	}
}

// sortBulkArray sorts the items of a flat array of bulk strings (PUBSUB
// CHANNELS); anything else comes back as it was.
func sortBulkArray(r string) string {
	lines := strings.Split(strings.TrimSuffix(r, "\r\n"), "\r\n")
	if len(lines)%2 != 1 {
		return r
	}
	var items []string
	for i := 1; i+1 < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "$") {
			return r
		}
		items = append(items, lines[i]+"\r\n"+lines[i+1]+"\r\n")
	}
	slices.Sort(items)
	return lines[0] + "\r\n" + strings.Join(items, "")
}

func infoField(info, name string) string {
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			return v
		}
	}
	return ""
}

// A subscriber that stops reading is closed by the pubsub class's hard
// limit while a publisher goes on being answered at once: the publisher
// never waits for the subscriber's socket. A subscriber that reads gets
// every message, in order.
func TestSlowSubscriberIsClosedNotWaitedFor(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	ts.Do(t, "CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0")
	slow := sluicetest.DialRaw(t, "tcp", ts.Addr)
	slow.Conn().(*net.TCPConn).SetReadBuffer(32 << 10)
	if got := slow.Do(t, "SUBSCRIBE", "feed"); got != "*3\r\n$9\r\nsubscribe\r\n$4\r\nfeed\r\n:1\r\n" {
		t.Fatal(got)
	}
	fast := sluicetest.DialRaw(t, "tcp", ts.Addr)
	fast.Do(t, "SUBSCRIBE", "feed")
	r := bufio.NewReaderSize(fast.Conn(), 64<<10)
	fastDone := make(chan error, 1)
	const messages = 400
	go func() {
		for i := range messages {
			fast.Conn().SetReadDeadline(time.Now().Add(20 * time.Second))
			got, err := sluicetest.ReadReply(r)
			if err != nil {
				fastDone <- err
				return
			}
			if !strings.HasSuffix(string(got), "\r\n"+strconv.Itoa(i)+strings.Repeat("x", 64<<10)+"\r\n") {
				fastDone <- fmt.Errorf("message %d: %.60q", i, got)
				return
			}
		}
		fastDone <- nil
	}()
	pub := sluicetest.DialRaw(t, "tcp", ts.Addr)
	for i := range messages {
		start := time.Now()
		got := pub.Do(t, "PUBLISH", "feed", strconv.Itoa(i)+strings.Repeat("x", 64<<10))
		if got != ":2\r\n" && got != ":1\r\n" {
			t.Fatalf("PUBLISH %d: %q", i, got)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("PUBLISH %d took %v: the publisher waited for a subscriber", i, took)
		}
	}
	// 400 messages of 64 KiB (25 MiB) to one that reads 32 KiB at most:
	// past the 1 MiB limit long before the end.
	if got := infoStat(t, ts, "client_output_buffer_limit_disconnections"); got != "1" {
		t.Fatalf("client_output_buffer_limit_disconnections:%s", got)
	}
	if n := closedByServer(t, slow.Conn(), 5*time.Second); n >= messages*64<<10 {
		t.Fatalf("the slow subscriber was sent all %d bytes", n)
	}
	if err := <-fastDone; err != nil {
		t.Fatal(err)
	}
	ts.Expect(t, []any{"feed", int64(1)}, "PUBSUB", "NUMSUB", "feed")
}

// Many publishers and subscribers at once, under -race: every subscriber
// gets every message of each publisher, each publisher's in the order it
// sent them, and a subscriber that leaves mid-stream takes nothing with it.
func TestPubSubConcurrent(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	const subscribers, publishers, each = 6, 4, 300
	ready := make(chan struct{}, subscribers)
	errs := make(chan error, subscribers+publishers+1)
	var wg sync.WaitGroup
	for s := range subscribers {
		wg.Go(func() {
			c := sluicetest.DialRaw(t, "tcp", ts.Addr)
			if s%2 == 1 {
				c.Do(t, "HELLO", "3")
			}
			c.Do(t, "SUBSCRIBE", "load")
			c.Do(t, "PSUBSCRIBE", "lo*")
			ready <- struct{}{}
			next := make([]int, publishers)
			for got := 0; got < 2*publishers*each; got++ {
				m := c.Read(t)
				fields := strings.Split(m, "\r\n")
				p, _ := strconv.Atoi(strings.Split(fields[len(fields)-2], ":")[0])
				n, _ := strconv.Atoi(strings.Split(fields[len(fields)-2], ":")[1])
				if strings.Contains(m, "pmessage") {
					continue // the pattern's copy: counted, not ordered against the channel's
				}
				if n != next[p] {
					errs <- fmt.Errorf("subscriber %d: publisher %d's message %d after %d", s, p, n, next[p]-1)
					return
				}
				next[p]++
			}
		})
	}
	for range subscribers {
		<-ready
	}
	leaver := sluicetest.DialRaw(t, "tcp", ts.Addr)
	leaver.Do(t, "SUBSCRIBE", "load")
	for p := range publishers {
		wg.Go(func() {
			c := sluicetest.DialRaw(t, "tcp", ts.Addr)
			for n := range each {
				got := c.Do(t, "PUBLISH", "load", fmt.Sprintf("%d:%d", p, n))
				if got != ":12\r\n" && got != ":13\r\n" {
					errs <- fmt.Errorf("PUBLISH: %q", got)
					return
				}
			}
		})
	}
	leaver.Conn().Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	sluicetest.WaitFor(t, 5*time.Second, "the closed subscriber to leave", func() bool {
		return ts.Do(t, "PUBSUB", "NUMSUB", "load").([]any)[1] == int64(subscribers)
	})
}

// ACL SETUSER taking a channel away from a user closes its connections
// subscribed to it, on both servers; its connection subscribed only to
// what it keeps stays, and one subscribed by a pattern it keeps stays too.
func TestACLChangeClosesDeniedSubscribersLikeRedis(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	r := sluicetest.StartRedis(t, "--databases", "1")
	admin := newTwin(t, ts, r)
	admin.same("ACL", "SETUSER", "limited", "on", ">pw", "~*", "+@all", "resetchannels", "&c*", "&news.*")
	subscriber := func(args ...string) *twin {
		w := newTwin(t, ts, r)
		w.same("AUTH", "limited", "pw")
		w.same(args...)
		return w
	}
	losing := subscriber("SUBSCRIBE", "c1")
	losingPattern := subscriber("PSUBSCRIBE", "c*")
	keeping := subscriber("SUBSCRIBE", "news.a")
	keepingPattern := subscriber("PSUBSCRIBE", "news.*")
	admin.same("ACL", "SETUSER", "limited", "resetchannels", "&news.*")
	for name, w := range map[string]*twin{"SUBSCRIBE c1": losing, "PSUBSCRIBE c*": losingPattern} {
		for server, c := range map[string]*sluicetest.RawConn{"sluice": w.sluice, "redis": w.redis} {
			c.Conn().SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := c.Conn().Read(make([]byte, 64))
			if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
				t.Errorf("%s: the connection of %s is still open (%v)", server, name, err)
			}
		}
	}
	keeping.same("PING", "still")
	keepingPattern.same("PING", "still")
	admin.same("PUBLISH", "news.a", "m")
	for _, w := range []*twin{keeping, keepingPattern} {
		if got, want := w.sluice.Read(t), w.redis.Read(t); got != want {
			t.Errorf("after the change: sluice %q, redis %q", got, want)
		}
	}
}

// go-redis's PubSub, at its defaults (RESP3: messages as pushes) and over
// RESP2: Subscribe, PSubscribe and SSubscribe on one connection, messages
// from Publish and SPublish (and one from a script) received in order,
// PubSubNumSub and PubSubChannels seeing the subscriber, Unsubscribe,
// and Close leaving nothing behind.
func TestGoRedisPubSub(t *testing.T) {
	ts := sluicetest.Start(t, sluicetest.Options{})
	for _, proto := range []int{3, 2} {
		t.Run("resp"+strconv.Itoa(proto), func(t *testing.T) {
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: ts.Addr, Protocol: proto})
			defer rdb.Close()
			ps := rdb.Subscribe(ctx, "orders")
			if err := ps.PSubscribe(ctx, "ord*"); err != nil {
				t.Fatal(err)
			}
			if err := ps.SSubscribe(ctx, "{user:1}events"); err != nil {
				t.Fatal(err)
			}
			for _, kind := range []string{"subscribe", "psubscribe", "ssubscribe"} {
				m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
				if sub, ok := m.(*redis.Subscription); err != nil || !ok || sub.Kind != kind {
					t.Fatalf("want the %s confirmation, got %#v, %v", kind, m, err)
				}
			}
			if n, err := rdb.Publish(ctx, "orders", "o1").Result(); err != nil || n != 2 {
				t.Fatalf("PUBLISH orders: %d, %v (want 2: the channel and the pattern)", n, err)
			}
			if n, err := rdb.SPublish(ctx, "{user:1}events", "e1").Result(); err != nil || n != 1 {
				t.Fatalf("SPUBLISH: %d, %v", n, err)
			}
			if n, err := rdb.Eval(ctx, "return redis.call('publish', KEYS[1], ARGV[1])", []string{"orders"}, "o2").Int(); err != nil || n != 2 {
				t.Fatalf("PUBLISH from a script: %d, %v", n, err)
			}
			var got []string
			for range 5 {
				m, err := ps.ReceiveTimeout(ctx, 5*time.Second)
				msg, ok := m.(*redis.Message)
				if err != nil || !ok {
					t.Fatalf("after %q: %#v, %v", got, m, err)
				}
				got = append(got, msg.Pattern+"|"+msg.Channel+"|"+msg.Payload)
			}
			want := []string{"|orders|o1", "ord*|orders|o1", "|{user:1}events|e1", "|orders|o2", "ord*|orders|o2"}
			if !slices.Equal(got, want) {
				t.Fatalf("messages %q, want %q", got, want)
			}
			if subs, err := rdb.PubSubNumSub(ctx, "orders").Result(); err != nil || subs["orders"] != 1 {
				t.Fatalf("NUMSUB: %v, %v", subs, err)
			}
			if chans, err := rdb.PubSubChannels(ctx, "ord*").Result(); err != nil || !slices.Equal(chans, []string{"orders"}) {
				t.Fatalf("CHANNELS: %v, %v", chans, err)
			}
			if err := ps.Unsubscribe(ctx, "orders"); err != nil {
				t.Fatal(err)
			}
			if m, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil || m.(*redis.Subscription).Kind != "unsubscribe" {
				t.Fatalf("want the unsubscribe confirmation, got %#v, %v", m, err)
			}
			if n, err := rdb.Publish(ctx, "orders", "o3").Result(); err != nil || n != 1 {
				t.Fatalf("PUBLISH after UNSUBSCRIBE: %d, %v (want 1: the pattern)", n, err)
			}
			ps.Close()
			sluicetest.WaitFor(t, 5*time.Second, "the closed subscriber to leave", func() bool {
				n, _ := rdb.PubSubNumPat(ctx).Result()
				s, _ := rdb.PubSubShardChannels(ctx, "*").Result()
				return n == 0 && len(s) == 0
			})
		})
	}
}
