package server

import (
	"errors"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// The server's own errors. Those that Redis sends with their own error code
// get their whole text in errorText; the rest are sent as ERR <message>.
var (
	errSyntax  = engine.ErrSyntax
	errNoAuth  = errors.New("authentication required")
	errNoProto = errors.New("unsupported protocol version")
	// errHelloNoAuth is NOAUTH as HELLO words it.
	errHelloNoAuth = errors.New("HELLO must be called with the client already authenticated")
	errBadPass     = errors.New("invalid username-password pair or user is disabled")
	errNoPass      = errors.New("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	errDB          = errors.New("DB index is out of range")
	errDebug       = errors.New("DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.")
	errMaxClt      = errors.New("max number of clients reached")
)

// permError is an ACL refusal: of a command (command set), or of a key.
type permError struct{ command string }

// errChannelDenied: a pub/sub command names a channel the user may not use.
var errChannelDenied = engine.RawError("NOPERM this user has no permissions to access one of the channels used as arguments")

func (e *permError) Error() string {
	if e.command != "" {
		return "this user has no permissions to run the '" + e.command + "' command"
	}
	return "this user has no permissions to access one of the keys used as arguments"
}

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
// Errors that Redis sends with their own code (MOVED, WRONGTYPE, OOM,
// NOAUTH...) get Redis's exact wording; everything else is ERR and the
// error's message.
func errorText(err error) string {
	var moved *engine.MovedError
	var perm *permError
	var txPerm *txPermError
	var raw engine.RawError
	var abort *execAbortError
	switch {
	case errors.As(err, &abort):
		// Redis drops the generic "ERR " of the refusal and keeps any
		// other code (NOPERM, NOAUTH).
		return "EXECABORT Transaction discarded because of: " + strings.TrimPrefix(errorText(abort.cause), "ERR ")
	case errors.As(err, &raw):
		// Already a whole error line (a script's); Redis strips newlines.
		return strings.NewReplacer("\r", " ", "\n", " ").Replace(string(raw))
	case errors.As(err, &txPerm):
		return "NOPERM " + txPerm.Error()
	case errors.Is(err, errExecAbort):
		return "EXECABORT " + err.Error()
	case errors.As(err, &perm):
		return "NOPERM " + perm.Error()
	case errors.As(err, &moved):
		return "MOVED " + strconv.Itoa(moved.Slot) + " " + moved.Addr
	case errors.Is(err, engine.ErrWrongType):
		return "WRONGTYPE Operation against a key holding the wrong kind of value"
	case errors.Is(err, engine.ErrOOM):
		return "OOM command not allowed when used memory > 'maxmemory'."
	case errors.Is(err, engine.ErrNotDurable):
		return "NOTDURABLE " + engine.ErrNotDurable.Error()
	case errors.Is(err, engine.ErrMisconf):
		return "MISCONF Errors writing to the append-only file; writes are refused until it succeeds again (see INFO persistence)"
	case errors.Is(err, engine.ErrBusy):
		return "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	case errors.Is(err, engine.ErrTryAgain):
		return "TRYAGAIN no leader is elected yet; retry shortly"
	case errors.Is(err, engine.ErrClusterDown):
		return "CLUSTERDOWN the cluster has no quorum"
	case errors.Is(err, engine.ErrCrossSlot):
		return "CROSSSLOT Keys in request don't hash to the same slot"
	case errors.Is(err, errNoAuth):
		return "NOAUTH Authentication required."
	case errors.Is(err, errHelloNoAuth):
		return "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	case errors.Is(err, errNoProto):
		return "NOPROTO unsupported protocol version"
	case errors.Is(err, errBadPass):
		return "WRONGPASS invalid username-password pair or user is disabled."
	}
	// Redis never puts a newline in an error line; a value echoed into a
	// message must not break the protocol.
	return "ERR " + strings.NewReplacer("\r", " ", "\n", " ").Replace(err.Error())
}
