package server

import (
	"testing"

	"github.com/sluicehq/sluice/engine"
)

// TestCommandTableMatchesOpTable holds the command table to the engine's op
// table, the only place that classifies ops: a row that claims write,
// readonly, denyoom or decision must agree with its op, so COMMAND, the
// follower redirect, the journal and the maxmemory check can never disagree
// about a command.
func TestCommandTableMatchesOpTable(t *testing.T) {
	named := map[engine.Op]bool{}
	for _, cmd := range commandList() {
		has := func(f cmdFlag) bool { return cmd.flags&f != 0 }
		if cmd.parse == nil {
			// Server-level commands run on the connection and touch no
			// engine state, so they can claim none of the op properties.
			if cmd.op != engine.OpNone || has(flagWrite) || has(flagDecision) || has(flagDenyOOM) || cmd.limitArgs != 0 {
				t.Errorf("%s runs on the connection but claims an op, write, decision or denyoom", cmd.name)
			}
			continue
		}
		spec := cmd.op.Spec()
		if spec.Name == "" {
			t.Errorf("%s names op %v, which is not in the op table", cmd.name, cmd.op)
			continue
		}
		named[cmd.op] = true
		if cmd.cats&catScripting != 0 {
			// Scripts carry Redis's flags (EVAL: neither write nor
			// readonly, no fixed key positions); only EVAL_RO is a read.
			if spec.Writes == has(flagReadonly) {
				t.Errorf("%s: flag readonly is %v, but op %s writes=%v", cmd.name, has(flagReadonly), spec.Name, spec.Writes)
			}
			continue
		}
		if has(flagWrite) != spec.Writes {
			t.Errorf("%s: flag write is %v, but op %s writes=%v", cmd.name, has(flagWrite), spec.Name, spec.Writes)
		}
		if has(flagReadonly) != !spec.Writes {
			t.Errorf("%s: flag readonly is %v, but op %s writes=%v", cmd.name, has(flagReadonly), spec.Name, spec.Writes)
		}
		if has(flagDenyOOM) != spec.Creates {
			t.Errorf("%s: flag denyoom is %v, but op %s creates=%v", cmd.name, has(flagDenyOOM), spec.Name, spec.Creates)
		}
		if has(flagDecision) != spec.Decision {
			t.Errorf("%s: flag decision is %v, but op %s decision=%v", cmd.name, has(flagDecision), spec.Name, spec.Decision)
		}
		if single := spec.Decision && spec.Keys == engine.KeysOne; (cmd.limitArgs > 0) != single {
			t.Errorf("%s: usable inside LIMIT.ALL is %v, but op %s is a single-key decision: %v", cmd.name, cmd.limitArgs > 0, spec.Name, single)
		}
		// Key positions: a whole-keyspace op names no key; the others do.
		if (spec.Keys == engine.KeysAll) != (cmd.firstKey == 0 && cmd.findKeys == nil) {
			t.Errorf("%s: first key %d does not fit op %s's key shape %d", cmd.name, cmd.firstKey, spec.Name, spec.Keys)
		}
	}
	for _, op := range engine.Ops() {
		if !named[op] {
			t.Errorf("op %v is in the op table but no command runs it", op)
		}
	}
}
