package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// Memory per key: store the same data-type shapes in each server and read
// what it cost, by the server's own accounting (INFO memory used_memory)
// and by the process's resident set (VmRSS), which is what a machine
// provides.

// MemoryShape is one kind of key: how to write key i.
type MemoryShape struct {
	Name string
	// Fraction divides the number of keys for big shapes, so that one
	// run stores a similar number of bytes of each.
	Fraction int
	// Command returns the command that stores key number i.
	Command func(key string, i int) []string
}

// ts is a millisecond timestamp, the values rate limiters store.
func ts(i int) string { return strconv.FormatInt(1_700_000_000_000+int64(i), 10) }

// MemoryShapes are the shapes the data-type issue names: a token bucket
// (2-field hash), a sliding log (100-member sorted set of timestamps) and
// recent events (10-element list of timestamps); plus a string counter
// for reference.
var MemoryShapes = []MemoryShape{
	{"string counter", 1, func(k string, i int) []string { return []string{"SET", k, strconv.Itoa(i % 1000)} }},
	{"2-field hash", 1, func(k string, i int) []string {
		return []string{"HSET", k, "tokens", strconv.Itoa(i % 100), "ts", ts(i)}
	}},
	{"100-member sorted set", 10, func(k string, i int) []string {
		args := []string{"ZADD", k}
		for m := range 100 {
			args = append(args, ts(i+m), ts(i+m))
		}
		return args
	}},
	{"10-element list", 1, func(k string, i int) []string {
		args := []string{"RPUSH", k}
		for m := range 10 {
			args = append(args, ts(i+m))
		}
		return args
	}},
}

// MemoryRow is one shape on one target.
type MemoryRow struct {
	Target, Shape string
	Keys          int
	// UsedPerKey and RSSPerKey are bytes per key: the growth of
	// used_memory and of the resident set over Keys keys.
	UsedPerKey, RSSPerKey float64
	Failure               string
}

// MeasureMemory stores keys keys of every shape (a tenth as many sorted
// sets) in each target, one shape after another, and reports the growth
// per key. Sluice's figures include its shards' partly filled pages (up to
// 1 MiB each), so they are fair only at hundreds of thousands of keys. A target without a Pid
// gets no RSS figure.
func MeasureMemory(ctx context.Context, targets []Target, keys int, timeout time.Duration) []MemoryRow {
	var rows []MemoryRow
	for _, t := range targets {
		for _, shape := range MemoryShapes {
			n := max(keys/shape.Fraction, 1)
			row := MemoryRow{Target: t.label(), Shape: shape.Name, Keys: n}
			if err := measureShape(ctx, t, shape, n, timeout, &row); err != nil {
				row.Failure = err.Error()
			}
			rows = append(rows, row)
		}
	}
	return rows
}

func measureShape(ctx context.Context, t Target, shape MemoryShape, keys int, timeout time.Duration, row *MemoryRow) error {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", t.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if c, err = secure(c, t, timeout); err != nil {
		return err
	}
	rd := newReplyReader(64 << 10)
	usedBefore, err := usedMemory(c, &rd, timeout)
	if err != nil {
		return err
	}
	rssBefore := processRSS(t.Pid)
	prefix := "sluice-bench:memory:" + strings.ReplaceAll(shape.Name, " ", "-") + ":"
	const chunk = 256
	for start := 0; start < keys; start += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		var buf []byte
		n := min(chunk, keys-start)
		for i := start; i < start+n; i++ {
			q := newRequest(shape.Command(prefix+strconv.Itoa(i), i), false, nil)
			buf = append(buf, q.head...)
		}
		c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write(buf); err != nil {
			return err
		}
		for got := 0; got < n; {
			resp, ok, err := rd.next()
			if err != nil {
				return err
			}
			if !ok {
				if err := rd.fill(c); err != nil {
					return err
				}
				continue
			}
			if resp.Type == redcon.Error {
				return fmt.Errorf("%s: %s", shape.Name, resp.Data)
			}
			got++
		}
	}
	usedAfter, err := usedMemory(c, &rd, timeout)
	if err != nil {
		return err
	}
	row.UsedPerKey = float64(usedAfter-usedBefore) / float64(keys)
	if rssBefore > 0 {
		if after := processRSS(t.Pid); after > 0 {
			row.RSSPerKey = float64(after-rssBefore) / float64(keys)
		}
	}
	return nil
}

// usedMemory reads used_memory from INFO memory.
func usedMemory(c net.Conn, rd *replyReader, timeout time.Duration) (int64, error) {
	c.SetDeadline(time.Now().Add(timeout))
	resp, err := roundTrip(c, rd, "INFO", "memory")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(resp.Data), "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO memory has no used_memory")
}

// processRSS is a process's resident set in bytes, 0 when unknown.
func processRSS(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:")); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(v)), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// MemoryTable renders rows as markdown, each shape with Sluice's figure
// next to Redis's.
func MemoryTable(rows []MemoryRow) string {
	var b strings.Builder
	b.WriteString("| target | shape | keys | used_memory per key | RSS per key |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		if r.Failure != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | failed: %s | |\n", r.Target, r.Shape, r.Keys, r.Failure)
			continue
		}
		rss := "-"
		if r.RSSPerKey != 0 {
			rss = fmt.Sprintf("%.0f B", r.RSSPerKey)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.0f B | %s |\n", r.Target, r.Shape, r.Keys, r.UsedPerKey, rss)
	}
	return b.String()
}
