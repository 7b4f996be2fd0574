package engine

import "testing"

func TestKeySlot(t *testing.T) {
	// Values as Redis's CLUSTER KEYSLOT reports them.
	for key, want := range map[string]int{
		"123456789": 0x31C3, // the CRC16/XMODEM check value
		"foo":       12182,
		"bar":       5061,
		"hello":     866,
		"somekey":   11058,
		"":          0,
	} {
		if got := KeySlot([]byte(key)); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
	// Hash tags, with the cases from the Redis Cluster specification.
	for key, hashed := range map[string]string{
		"{user1000}.following": "user1000",
		"{user1000}.followers": "user1000",
		"foo{}{bar}":           "foo{}{bar}", // empty tag: the whole key
		"foo{{bar}}zap":        "{bar",       // tag from the first '{' to the next '}'
		"foo{bar}{zap}":        "bar",        // only the first tag counts
		"{":                    "{",
		"}{":                   "}{",
		"x{y":                  "x{y",
	} {
		if got, want := KeySlot([]byte(key)), int(crc16([]byte(hashed)))%Slots; got != want {
			t.Errorf("KeySlot(%q) = %d, want %d (the slot of %q)", key, got, want, hashed)
		}
	}
}
