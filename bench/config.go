package bench

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"time"
)

// Config describes one run: one mode against one target. The zero value of
// every field but Target and Mode is usable.
type Config struct {
	// Target is the server to load. Required.
	Target Target
	// Mode is a mode name (see ModeNames). It runs exactly as named; use
	// Plan to map a family onto each target's own command. Required.
	Mode string

	// Conns is the number of connections, each with one goroutine. Default 50.
	Conns int
	// Pipeline is the number of requests written together on a connection
	// before waiting for all their replies. Default 1.
	Pipeline int
	// Requests bounds the run by total requests over all connections
	// (0: no count bound).
	Requests int64
	// Duration bounds the run by time. Default 5s when Requests is 0; with
	// both set, whichever is reached first ends the run.
	Duration time.Duration
	// Rate, when positive, makes the run open-loop: Rate requests per second
	// in total, each connection sending its batches on a fixed schedule, and
	// latency measured from a batch's intended send time (coordinated-
	// omission correction). 0: closed loop, as fast as replies come back.
	Rate float64

	// Keys is the number of distinct keys, chosen uniformly. Default 10000.
	Keys int
	// Hot is the fraction of requests (0..1) sent to one extra hot key.
	Hot float64
	// Split, when Split.Of > 1, sends only one share of the key space:
	// the keys whose CRC32 (IEEE) modulo Of is Index, which is what a
	// client that spreads keys over Of servers by CRC32 sends to server
	// Index. The hot key is sent regardless of its share.
	Split KeySplit
	// Seed seeds the key choice; connection i uses (Seed, i). Default 1.
	Seed uint64
	// KeyPrefix starts every key. Default "sluice-bench:<mode>:".
	KeyPrefix string
	// Limit holds the limiter parameters for decision modes.
	Limit Limit

	// Timeout bounds dialing and every wait for a write or a reply; a
	// connection that exceeds it fails. Default 5s.
	Timeout time.Duration
	// AllowRemote permits a target outside loopback.
	AllowRemote bool
	// Progress, when set, receives a progress bar for runs expected to
	// last longer than two seconds.
	Progress io.Writer

	// keySuffix ends every key; prepare sets it for a library that puts
	// something after the caller's key.
	keySuffix string
}

const (
	defaultConns    = 50
	defaultDuration = 5 * time.Second
	defaultKeys     = 10000
	defaultTimeout  = 5 * time.Second
)

// prepare applies defaults, validates, and finds the mode.
func (c Config) prepare() (Config, *mode, error) {
	m, err := lookupMode(c.Mode)
	if err != nil {
		return c, nil, err
	}
	c.Mode = m.name
	if c.Target.Addr == "" {
		return c, m, errors.New("no target address")
	}
	if c.Conns == 0 {
		c.Conns = defaultConns
	}
	if c.Pipeline == 0 {
		c.Pipeline = 1
	}
	if c.Requests == 0 && c.Duration == 0 {
		c.Duration = defaultDuration
	}
	if c.Keys == 0 {
		c.Keys = defaultKeys
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "sluice-bench:" + m.name + ":"
	}
	if m.lib != nil {
		// The library puts its own prefix before the caller's key.
		c.KeyPrefix = m.lib.keyPrefix + c.KeyPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if m.lib != nil {
		c.Limit = libDefaults(c.Limit)
	} else {
		c.Limit = c.Limit.withDefaults()
	}
	switch {
	case c.Conns < 1:
		return c, m, fmt.Errorf("conns %d: must be at least 1", c.Conns)
	case c.Pipeline < 1:
		return c, m, fmt.Errorf("pipeline %d: must be at least 1", c.Pipeline)
	case c.Requests < 0:
		return c, m, fmt.Errorf("requests %d: must not be negative", c.Requests)
	case c.Duration < 0:
		return c, m, fmt.Errorf("duration %v: must not be negative", c.Duration)
	case c.Rate < 0:
		return c, m, fmt.Errorf("rate %v: must not be negative", c.Rate)
	case c.Keys < 1:
		return c, m, fmt.Errorf("keys %d: must be at least 1", c.Keys)
	case !(c.Hot >= 0 && c.Hot <= 1):
		return c, m, fmt.Errorf("hot %v: must be between 0 and 1", c.Hot)
	case c.Timeout < 0:
		return c, m, fmt.Errorf("timeout %v: must not be negative", c.Timeout)
	}
	if c.Split.Of > 1 && (c.Split.Index < 0 || c.Split.Index >= c.Split.Of) {
		return c, m, fmt.Errorf("split index %d: must be in [0, %d)", c.Split.Index, c.Split.Of)
	}
	if err := c.Limit.validate(); err != nil {
		return c, m, err
	}
	c.keySuffix = ""
	if m.lib != nil {
		if _, err := m.lib.args(c.Limit); err != nil {
			return c, m, err
		}
		if m.lib.keySuffix != nil {
			c.keySuffix = m.lib.keySuffix(c.Limit)
		}
	}
	return c, m, nil
}

// KeySplit names one share of a key space split over Of servers by CRC32.
// The zero value (and Of == 1) means the whole key space.
type KeySplit struct {
	Of, Index int
}

// shareOf returns the key numbers in [0, keys) whose key (prefix + number
// + suffix) falls in the share, or nil for no split.
func (s KeySplit) shareOf(prefix, suffix string, keys int) []uint64 {
	if s.Of <= 1 {
		return nil
	}
	var share []uint64
	key := []byte(prefix)
	for n := range uint64(keys) {
		key = strconv.AppendUint(key[:len(prefix)], n, 10)
		key = append(key, suffix...)
		if int(crc32.ChecksumIEEE(key)%uint32(s.Of)) == s.Index {
			share = append(share, n)
		}
	}
	return share
}

// Owner returns which of Of servers a key goes to.
func (s KeySplit) Owner(key string) int {
	if s.Of <= 1 {
		return 0
	}
	return int(crc32.ChecksumIEEE([]byte(key)) % uint32(s.Of))
}
