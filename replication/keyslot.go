package replication

import "github.com/sluicehq/sluice/engine"

// Slots is the number of hash slots in the Redis Cluster key space.
const Slots = engine.Slots

// KeySlot is engine.KeySlot: the Redis Cluster hash slot of key.
func KeySlot(key []byte) int { return engine.KeySlot(key) }

// commandSlot is the slot a redirect names for c: its first key, as
// routing sees its keys (a restricted user's EVAL carries the user's name
// in its Key, which is not a key). Keyless commands (FLUSHALL, KEYS) use
// slot 0; one group owns every slot, so any slot leads to the leader.
func commandSlot(c *engine.Command) int {
	slot, found := 0, false
	c.EachKey(func(key []byte) {
		if !found {
			slot, found = KeySlot(key), true
		}
	})
	return slot
}
