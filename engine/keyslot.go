package engine

// Slots is the number of hash slots in the Redis Cluster key space.
const Slots = 16384

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of the key,
// or of its hash tag (the bytes between the first '{' and the next '}', when
// not empty), modulo 16384. Cluster clients cache slot -> node maps from
// MOVED replies, so the slot must be exactly Redis's.
func KeySlot(key []byte) int {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return int(crc16(key)) & (Slots - 1)
			}
		}
		break
	}
	return int(crc16(key)) & (Slots - 1)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), as Redis's
// crc16.c.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
