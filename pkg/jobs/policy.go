package jobs

import (
	"math/rand/v2"
	"time"
)

// MaxVisibility is the longest visibility timeout SQS accepts (12 hours, counted from the
// receive). No backoff goes beyond it.
const MaxVisibility = 12 * time.Hour

// Policy decides how long a failed job waits before its next attempt.
type Policy interface {
	// Backoff returns the delay after the given failed attempt (1 for the first).
	Backoff(attempt int) time.Duration
}

// PolicyFunc adapts a function to a [Policy].
type PolicyFunc func(attempt int) time.Duration

// Backoff calls f.
func (f PolicyFunc) Backoff(attempt int) time.Duration { return f(attempt) }

// Exponential is exponential backoff with full jitter: after attempt n the delay is uniform in
// [0, min(Cap, Base·2^(n-1))]. The zero value is the default policy.
type Exponential struct {
	// Base is the ceiling of the first delay. Defaults to 5 seconds.
	Base time.Duration
	// Cap bounds every delay. Defaults to 15 minutes; values above 12 hours (SQS's visibility
	// limit) are lowered to 12 hours.
	Cap time.Duration
	// Rand returns a uniform int64 in [0, n). Defaults to math/rand/v2's Int64N (safe for
	// concurrent use). Inject a fixed source in tests.
	Rand func(n int64) int64
}

// Default values of [Exponential].
const (
	DefaultBackoffBase = 5 * time.Second
	DefaultBackoffCap  = 15 * time.Minute
)

// Backoff returns a full-jitter delay for attempt.
func (p Exponential) Backoff(attempt int) time.Duration {
	ceiling := p.Ceiling(attempt)
	if ceiling <= 0 {
		return 0
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Int64N
	}
	return time.Duration(rnd(int64(ceiling) + 1))
}

// Ceiling returns the largest delay Backoff can return for attempt: min(Cap, Base·2^(attempt-1)).
func (p Exponential) Ceiling(attempt int) time.Duration {
	base, limit := p.Base, p.Cap
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if limit <= 0 {
		limit = DefaultBackoffCap
	}
	if limit > MaxVisibility {
		limit = MaxVisibility
	}
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt; i++ {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}
