package server

import (
	"errors"
	"strings"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/shard"
)

// Errors raised while reading arguments. Each wraps the argument's name and
// value so the client learns exactly what was wrong.
var (
	errSyntax  = errors.New("syntax error")
	errNoAuth  = errors.New("NOAUTH Authentication required.")
	errNoProto = errors.New("NOPROTO unsupported protocol version")
	errBadPass = errors.New("WRONGPASS invalid username-password pair or user is disabled.")
	errNoPass  = errors.New("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errDB      = errors.New("DB index is out of range")
	errDebug   = errors.New("DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")
	errMaxClt  = errors.New("max number of clients reached")
)

// argError names an offending argument.
type argError struct {
	name  string
	value []byte
	err   error
}

func (a *argError) Error() string {
	v := string(a.value)
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return "invalid " + a.name + " '" + v + "': " + a.err.Error()
}

func (a *argError) Unwrap() error { return a.err }

func badArg(name string, value []byte, err error) error {
	return &argError{name: name, value: value, err: err}
}

// errorText is the one place that turns a Go error into RESP error text.
// Errors that already carry a Redis error code (WRONGTYPE, OOM, NOAUTH...)
// keep it; everything else is an ERR.
func errorText(err error) string {
	var moved *engine.MovedError
	switch {
	case errors.As(err, &moved):
		return moved.Error()
	case errors.Is(err, engine.ErrWrongType), errors.Is(err, engine.ErrOOM), errors.Is(err, engine.ErrMisconf),
		errors.Is(err, engine.ErrTryAgain), errors.Is(err, engine.ErrClusterDown),
		errors.Is(err, errNoAuth), errors.Is(err, errNoProto), errors.Is(err, errBadPass):
		return err.Error()
	case errors.Is(err, shard.ErrTooLarge), errors.Is(err, shard.ErrFull):
		return "ERR " + err.Error()
	}
	msg := err.Error()
	// Redis never puts a newline in an error line; a value echoed into a
	// message must not break the protocol.
	msg = strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	return "ERR " + msg
}
