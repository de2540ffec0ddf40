package jobs_test

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

var (
	_ jobs.Policy = jobs.Exponential{}
	_ jobs.Policy = jobs.PolicyFunc(nil)
)

func TestExponentialDefaults(t *testing.T) {
	t.Parallel()
	if jobs.DefaultBackoffBase != 5*time.Second || jobs.DefaultBackoffCap != 15*time.Minute {
		t.Errorf("defaults = %s base, %s cap; want 5s, 15m", jobs.DefaultBackoffBase, jobs.DefaultBackoffCap)
	}
	if jobs.MaxVisibility != 12*time.Hour {
		t.Errorf("MaxVisibility = %s, want 12h (SQS's limit)", jobs.MaxVisibility)
	}
}

func TestExponentialCeilingPerAttempt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		policy  jobs.Exponential
		attempt int
		want    time.Duration
	}{
		// Zero value: 5 s base doubling per attempt, 15 min cap.
		{"default 1", jobs.Exponential{}, 1, 5 * time.Second},
		{"default 2", jobs.Exponential{}, 2, 10 * time.Second},
		{"default 3", jobs.Exponential{}, 3, 20 * time.Second},
		{"default 4", jobs.Exponential{}, 4, 40 * time.Second},
		{"default 5", jobs.Exponential{}, 5, 80 * time.Second},
		{"default 6", jobs.Exponential{}, 6, 160 * time.Second},
		{"default 7", jobs.Exponential{}, 7, 320 * time.Second},
		{"default 8", jobs.Exponential{}, 8, 640 * time.Second},
		{"default 9 capped", jobs.Exponential{}, 9, 15 * time.Minute},
		{"default 100 capped", jobs.Exponential{}, 100, 15 * time.Minute},
		{"base only", jobs.Exponential{Base: time.Second}, 4, 8 * time.Second},
		{"cap only", jobs.Exponential{Cap: time.Minute}, 4, 40 * time.Second},
		{"cap only reached", jobs.Exponential{Cap: time.Minute}, 5, time.Minute},
		{"custom 1", jobs.Exponential{Base: time.Second, Cap: time.Minute}, 1, time.Second},
		{"custom 6", jobs.Exponential{Base: time.Second, Cap: time.Minute}, 6, 32 * time.Second},
		{"custom 7 capped", jobs.Exponential{Base: time.Second, Cap: time.Minute}, 7, time.Minute},
		{"base above cap", jobs.Exponential{Base: time.Hour, Cap: time.Minute}, 1, time.Minute},
		{"cap 12h kept", jobs.Exponential{Base: time.Hour, Cap: 12 * time.Hour}, 5, 12 * time.Hour},
		{"cap 24h lowered to 12h", jobs.Exponential{Base: time.Hour, Cap: 24 * time.Hour}, 5, 12 * time.Hour},
		{"cap 24h, below 12h", jobs.Exponential{Base: time.Hour, Cap: 24 * time.Hour}, 4, 8 * time.Hour},
		{"huge cap lowered to 12h", jobs.Exponential{Base: time.Second, Cap: math.MaxInt64}, 100, 12 * time.Hour},
		{"huge base", jobs.Exponential{Base: math.MaxInt64}, 1, 15 * time.Minute},
		{"1ns base, 2^45", jobs.Exponential{Base: 1, Cap: 12 * time.Hour}, 46, 1 << 45},
		{"1ns base, 2^46 above 12h", jobs.Exponential{Base: 1, Cap: 12 * time.Hour}, 47, 12 * time.Hour},
		{"attempt 0 is 1", jobs.Exponential{}, 0, 5 * time.Second},
		{"attempt -1 is 1", jobs.Exponential{}, -1, 5 * time.Second},
		{"attempt MinInt is 1", jobs.Exponential{}, math.MinInt, 5 * time.Second},
		{"attempt MaxInt capped", jobs.Exponential{}, math.MaxInt, 15 * time.Minute},
		{"attempt MaxInt, 1ns base, 12h cap", jobs.Exponential{Base: 1, Cap: 12 * time.Hour}, math.MaxInt, 12 * time.Hour},
		{"attempt 64 does not overflow", jobs.Exponential{Base: time.Second, Cap: 12 * time.Hour}, 64, 12 * time.Hour},
	} {
		if got := tc.policy.Ceiling(tc.attempt); got != tc.want {
			t.Errorf("%s: %+v.Ceiling(%d) = %s, want %s", tc.name, tc.policy, tc.attempt, got, tc.want)
		}
	}
}

// TestExponentialBackoffDrawsFromZeroToCeiling checks that Backoff asks Rand for a value in
// [0, ceiling] (n = ceiling+1) and returns what Rand returns.
func TestExponentialBackoffDrawsFromZeroToCeiling(t *testing.T) {
	t.Parallel()
	for _, attempt := range []int{math.MinInt, 0, 1, 2, 3, 8, 9, 60, math.MaxInt} {
		var gotN int64
		low := jobs.Exponential{Rand: func(n int64) int64 { gotN = n; return 0 }}
		high := jobs.Exponential{Rand: func(n int64) int64 { return n - 1 }}
		ceiling := low.Ceiling(attempt)
		if d := low.Backoff(attempt); d != 0 {
			t.Errorf("attempt %d: Backoff with Rand→0 = %s, want 0", attempt, d)
		}
		if gotN != int64(ceiling)+1 {
			t.Errorf("attempt %d: Rand called with n=%d, want ceiling+1 = %d", attempt, gotN, int64(ceiling)+1)
		}
		if d := high.Backoff(attempt); d != ceiling {
			t.Errorf("attempt %d: Backoff with Rand→n-1 = %s, want the ceiling %s", attempt, d, ceiling)
		}
	}
}

func TestExponentialBackoffWithinBounds(t *testing.T) {
	t.Parallel()
	policies := []jobs.Exponential{
		{}, // math/rand/v2's source
		{Base: time.Millisecond, Cap: 48 * time.Hour}, // cap lowered to 12h
		{Base: time.Second, Cap: time.Minute, Rand: rand.New(rand.NewPCG(1, 2)).Int64N},
	}
	for _, p := range policies {
		for _, attempt := range []int{-3, 0, 1, 2, 5, 10, 30, 63, 64, 1000, math.MaxInt} {
			ceiling := p.Ceiling(attempt)
			if ceiling <= 0 || ceiling > jobs.MaxVisibility {
				t.Fatalf("%+v.Ceiling(%d) = %s, outside (0, 12h]", p, attempt, ceiling)
			}
			for range 200 {
				if d := p.Backoff(attempt); d < 0 || d > ceiling {
					t.Fatalf("%+v.Backoff(%d) = %s, outside [0, %s]", p, attempt, d, ceiling)
				}
			}
		}
	}
}

// TestExponentialFullJitterUsesWholeRange draws from a seeded source, so the result is the same
// on every run: the delays spread evenly over [0, ceiling], down to near 0 and up to near the
// ceiling (full jitter, not "equal jitter" or "ceiling/2 + jitter").
func TestExponentialFullJitterUsesWholeRange(t *testing.T) {
	t.Parallel()
	p := jobs.Exponential{Base: time.Second, Cap: time.Hour, Rand: rand.New(rand.NewPCG(42, 1024)).Int64N}
	const attempt, draws, buckets = 4, 20_000, 10
	ceiling := p.Ceiling(attempt) // 8s
	if ceiling != 8*time.Second {
		t.Fatalf("Ceiling(4) = %s, want 8s", ceiling)
	}
	var counts [buckets]int
	lo, hi := ceiling, time.Duration(0)
	for range draws {
		d := p.Backoff(attempt)
		lo, hi = min(lo, d), max(hi, d)
		counts[min(int(d*buckets/(ceiling+1)), buckets-1)]++
	}
	if lo > ceiling/100 || hi < ceiling*99/100 {
		t.Errorf("delays span [%s, %s], want nearly all of [0, %s]", lo, hi, ceiling)
	}
	for i, c := range counts {
		if want := draws / buckets; c < want*85/100 || c > want*115/100 {
			t.Errorf("bucket %d holds %d of %d delays, want about %d: %v", i, c, draws, want, counts)
		}
	}
}

func TestExponentialBackoffConcurrentUse(t *testing.T) {
	t.Parallel()
	var p jobs.Policy = jobs.Exponential{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				if d := p.Backoff(g + i%10); d < 0 || d > jobs.DefaultBackoffCap {
					t.Errorf("Backoff = %s", d)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestPolicyFuncCallsFunction(t *testing.T) {
	t.Parallel()
	var got []int
	var p jobs.Policy = jobs.PolicyFunc(func(attempt int) time.Duration {
		got = append(got, attempt)
		return time.Duration(attempt) * time.Minute
	})
	for _, attempt := range []int{1, 2, 7} {
		if d := p.Backoff(attempt); d != time.Duration(attempt)*time.Minute {
			t.Errorf("Backoff(%d) = %s, want %s", attempt, d, time.Duration(attempt)*time.Minute)
		}
	}
	if len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 7 {
		t.Errorf("function called with %v, want [1 2 7]", got)
	}
}
