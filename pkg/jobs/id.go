package jobs

import (
	"math/rand/v2"
	"time"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// IDSource makes job ids: ULIDs (26 characters of Crockford base32, 48 bits of milliseconds then
// 80 random bits), sortable by creation time. The zero value uses the wall clock and
// math/rand/v2's global source; inject Now and Rand for reproducible ids in tests.
type IDSource struct {
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
	// Rand returns 64 random bits. Defaults to math/rand/v2's Uint64.
	Rand func() uint64
}

// NewID returns a new job id from the default source.
func NewID() string { return IDSource{}.NewID() }

// NewID returns a new id.
func (s IDSource) NewID() string {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	rnd := rand.Uint64
	if s.Rand != nil {
		rnd = s.Rand
	}
	ms := uint64(now().UnixMilli())
	hi, lo := rnd()&0xffff, rnd() // 16 + 64 = 80 random bits
	var b [26]byte
	// 48-bit time in 10 characters (50 bits, the top 2 zero).
	for i := 9; i >= 0; i-- {
		b[i] = crockford[ms&31]
		ms >>= 5
	}
	// 80 random bits in 16 characters: the low 64 bits, then the high 16.
	for i := 25; i >= 10; i-- {
		b[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(b[:])
}
