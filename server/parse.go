package server

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

var (
	errNegative    = errors.New("must not be negative")
	errNotPositive = errors.New("must be positive")
	errLimitCount  = errors.New("does not match the number of limits that follow")
	errIncomplete  = errors.New("is missing arguments")
	errReqIDLength = errors.New("REQID id must be 1 to 64 bytes")
	errReqIDPlace  = errors.New("REQID must come after the last limit of LIMIT.ALL")
	errLogLimit    = fmt.Errorf("is too large for a sliding log (at most %d)", engine.MaxLogLimit)
	errLogKey      = errors.New("sliding log limit too large for this key: one 16-byte entry per unit plus the key must fit in 1 MiB")
	// errDecrOverflow is Redis's DECRBY of the smallest integer.
	errDecrOverflow = errors.New("decrement would overflow")
)

func parseInt(name string, b []byte) (int64, error) {
	n, err := engine.ParseInt64(b)
	if err != nil {
		return 0, badArg(name, b, err)
	}
	return n, nil
}

func parseNonNegative(name string, b []byte) (int64, error) {
	n, err := parseInt(name, b)
	if err == nil && n < 0 {
		err = badArg(name, b, errNegative)
	}
	return n, err
}

func parseSeconds(name string, b []byte) (int64, error) {
	ns, err := engine.ParseDurationSeconds(b)
	if err != nil {
		return 0, badArg(name, b, err)
	}
	if ns <= 0 {
		return 0, badArg(name, b, errNotPositive)
	}
	return ns, nil
}

func isWord(b []byte, w string) bool { return strings.EqualFold(string(b), w) }

// unit scales an expiry argument to nanoseconds.
const (
	unitSeconds = int64(1e9)
	unitMillis  = int64(1e6)
)
