package leader

import (
	"crypto/rand"
	"math/big"
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewLeaseID returns "ls_" and 24 random base62 characters (143 bits). The
// leader draws it and puts it into the CreateLease command, so every node
// applies the same id.
func NewLeaseID() string {
	b := make([]byte, 3, 27)
	copy(b, "ls_")
	max := big.NewInt(62)
	for i := 0; i < 24; i++ {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		b = append(b, base62[n.Int64()])
	}
	return string(b)
}
