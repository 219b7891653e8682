package leader

import "crypto/rand"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// leaseIDRandom is the number of base62 characters after "ls_".
const leaseIDRandom = 24

// NewLeaseID returns "ls_" and 24 random base62 characters (143 bits). The
// leader draws it and puts it into the CreateLease command, so every node
// applies the same id.
//
// Each character is one random byte below 248 (4*62) taken modulo 62, so
// every character is uniform (no modulo bias); bytes of 248 and above are
// drawn again. One read of 32 bytes usually covers all 24 characters: one
// allocation per id (the string), where drawing each character with
// crypto/rand.Int allocated big integers 24 times (1.1 GB of garbage over
// the 1M-lease benchmark's fill).
func NewLeaseID() string { return newID("ls_") }

// NewLockLeaseID returns "ll_" and 24 random base62 characters: a lock
// lease's id, as NewLeaseID.
func NewLockLeaseID() string { return newID("ll_") }

func newID(prefix string) string {
	var out [3 + leaseIDRandom]byte
	copy(out[:], prefix)
	n := 3
	var buf [32]byte
	for n < len(out) {
		if _, err := rand.Read(buf[:]); err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		for _, c := range buf {
			if c < 248 && n < len(out) {
				out[n] = base62[c%62]
				n++
			}
		}
	}
	return string(out[:])
}
