package jobs_test

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

const crockfordAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

func isCrockfordID(id string) bool {
	if len(id) != 26 {
		return false
	}
	for _, c := range id {
		if !strings.ContainsRune(crockfordAlphabet, c) {
			return false
		}
	}
	// 26 characters carry 130 bits; a ULID has 128, so the first character is at most '7'.
	return id[0] <= '7'
}

// fixedRand returns the values in order, then repeats the last one.
func fixedRand(values ...uint64) func() uint64 {
	i := 0
	return func() uint64 {
		v := values[min(i, len(values)-1)]
		i++
		return v
	}
}

// referenceULID encodes 48 bits of milliseconds and 80 random bits (the low 16 bits of the
// first random value, then the 64 of the second) with math/big, independently of id.go.
func referenceULID(ms int64, r1, r2 uint64) string {
	n := new(big.Int).SetInt64(ms & (1<<48 - 1))
	n.Lsh(n, 16).Or(n, new(big.Int).SetUint64(r1&0xffff))
	n.Lsh(n, 64).Or(n, new(big.Int).SetUint64(r2))
	out := make([]byte, 26)
	thirtyTwo, digit := big.NewInt(32), new(big.Int)
	for i := 25; i >= 0; i-- {
		n.DivMod(n, thirtyTwo, digit)
		out[i] = crockfordAlphabet[digit.Int64()]
	}
	return string(out)
}

func TestNewIDIsACrockfordULID(t *testing.T) {
	t.Parallel()
	for range 1000 {
		if id := jobs.NewID(); !isCrockfordID(id) {
			t.Fatalf("NewID() = %q, want 26 Crockford base32 characters", id)
		}
	}
}

func TestNewIDExactValues(t *testing.T) {
	t.Parallel()
	at := func(ms int64) func() time.Time { return func() time.Time { return time.UnixMilli(ms) } }
	for _, tc := range []struct {
		name string
		src  jobs.IDSource
		want string
	}{
		// By hand: everything zero.
		{"zero", jobs.IDSource{Now: at(0), Rand: fixedRand(0)}, "00000000000000000000000000"},
		// By hand: 1 ms, all 80 random bits set (16 characters of 'Z' = 31).
		{"one ms, random all ones", jobs.IDSource{Now: at(1), Rand: fixedRand(^uint64(0))}, "0000000001ZZZZZZZZZZZZZZZZ"},
		// By hand: the largest 48-bit time is "7ZZZZZZZZZ".
		{"max time", jobs.IDSource{Now: at(1<<48 - 1), Rand: fixedRand(0)}, "7ZZZZZZZZZ0000000000000000"},
		// By hand: only the lowest random bit, and only the highest (bit 79 = the top bit of the
		// first random value's low 16 bits: 80 bits in 16 characters, the first holds bits 75–79).
		{"lowest random bit", jobs.IDSource{Now: at(0), Rand: fixedRand(0, 1)}, "00000000000000000000000001"},
		{"highest random bit", jobs.IDSource{Now: at(0), Rand: fixedRand(0x8000, 0)}, "0000000000G000000000000000"},
		// Bits of the first random value above the low 16 are not used.
		{"first value masked", jobs.IDSource{Now: at(0), Rand: fixedRand(0xffff_ffff_ffff_0000, 0)}, "00000000000000000000000000"},
		// The ULID specification's example time: ulid(1469918176385) starts with 01ARYZ6S41.
		{"ULID spec time", jobs.IDSource{Now: at(1469918176385), Rand: fixedRand(0)}, "01ARYZ6S410000000000000000"},
	} {
		if got := tc.src.NewID(); got != tc.want {
			t.Errorf("%s: NewID() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNewIDMatchesReferenceEncoding(t *testing.T) {
	t.Parallel()
	ms := time.Date(2026, 11, 29, 10, 0, 0, 123_000_000, time.UTC).UnixMilli()
	src := jobs.IDSource{
		Now:  func() time.Time { return time.UnixMilli(ms) },
		Rand: fixedRand(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210),
	}
	want := referenceULID(ms, 0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210)
	if got := src.NewID(); got != want {
		t.Errorf("NewID() = %q, reference %q", got, want)
	}
	// Many random inputs against the reference.
	rng := rand.New(rand.NewPCG(7, 11))
	for range 2000 {
		ms, r1, r2 := rng.Int64N(1<<48), rng.Uint64(), rng.Uint64()
		src := jobs.IDSource{Now: func() time.Time { return time.UnixMilli(ms) }, Rand: fixedRand(r1, r2)}
		if got, want := src.NewID(), referenceULID(ms, r1, r2); got != want {
			t.Fatalf("ms=%d r=%#x,%#x: NewID() = %q, reference %q", ms, r1, r2, got, want)
		}
	}
}

func TestNewIDDeterministicWithInjectedSource(t *testing.T) {
	t.Parallel()
	mk := func() jobs.IDSource {
		rng := rand.New(rand.NewPCG(1, 2))
		return jobs.IDSource{
			Now:  func() time.Time { return time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC) },
			Rand: rng.Uint64,
		}
	}
	a, b := mk(), mk()
	for range 100 {
		if x, y := a.NewID(), b.NewID(); x != y {
			t.Fatalf("same sources gave %q and %q", x, y)
		}
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	start := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	src := jobs.IDSource{Now: func() time.Time { return now }, Rand: rng.Uint64}
	var ids []string
	steps := []time.Duration{time.Millisecond, time.Second, time.Minute, time.Hour, 24 * time.Hour} // ≈ 3 years in all
	for i := range 5000 {
		ids = append(ids, src.NewID())
		now = now.Add(steps[i%len(steps)])
	}
	// Far apart too, up to the year 9999 (48 bits of milliseconds last until 10889).
	for _, y := range []int{2026, 2100, 9999} {
		now = time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		ids = append(ids, src.NewID())
	}
	if !slices.IsSorted(ids) {
		for i := 1; i < len(ids); i++ {
			if ids[i-1] >= ids[i] {
				t.Fatalf("id %d %q does not sort before id %d %q although created earlier", i-1, ids[i-1], i, ids[i])
			}
		}
	}
	// Ids of the same millisecond share their first 10 characters.
	now = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	x, y := src.NewID(), src.NewID()
	if x[:10] != y[:10] || x == y {
		t.Errorf("same millisecond gave %q and %q", x, y)
	}
}

func TestNewIDUniqueAcross100k(t *testing.T) {
	t.Parallel()
	const n = 100_000
	seen := make(map[string]struct{}, n)
	for range n {
		id := jobs.NewID()
		if _, dup := seen[id]; dup {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = struct{}{}
	}
}
