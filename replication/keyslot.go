package replication

import "github.com/sluicehq/sluice/engine"

// Slots is the number of hash slots in the Redis Cluster key space.
const Slots = engine.Slots

// KeySlot is engine.KeySlot: the Redis Cluster hash slot of key.
func KeySlot(key []byte) int { return engine.KeySlot(key) }

// commandSlot is the slot a redirect names for c: its key, or for a
// multi-key command its first key. Keyless commands (FLUSHALL, KEYS) use
// slot 0; one group owns every slot, so any slot leads to the leader.
func commandSlot(c *engine.Command) int {
	key := c.Key
	if len(key) == 0 && len(c.Sub) > 0 {
		key = c.Sub[0].Key
	}
	if len(key) == 0 {
		return 0
	}
	return KeySlot(key)
}
