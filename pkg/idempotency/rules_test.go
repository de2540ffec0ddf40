package idempotency

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestTruncateError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"short", "boom", "boom"},
		{"exactly max", strings.Repeat("a", MaxErrorBytes), strings.Repeat("a", MaxErrorBytes)},
		{"one over", strings.Repeat("a", MaxErrorBytes+1), strings.Repeat("a", MaxErrorBytes)},
		{"cut before a 2-byte rune", "x" + strings.Repeat("é", MaxErrorBytes), "x" + strings.Repeat("é", MaxErrorBytes/2-1)},
		{"cut before a 4-byte rune", "ab" + strings.Repeat("😀", MaxErrorBytes), "ab" + strings.Repeat("😀", (MaxErrorBytes-2)/4)},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := TruncateError(tt.in)
			if got != tt.want {
				t.Errorf("TruncateError: %d bytes %q…, want %d bytes", len(got), got[:min(len(got), 12)], len(tt.want))
			}
			if len(got) > MaxErrorBytes || !utf8.ValidString(got) {
				t.Errorf("result of %d bytes, valid %v", len(got), utf8.ValidString(got))
			}
		})
	}
}

func TestTimePrecision(t *testing.T) {
	t.Parallel()
	base := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		in      time.Time
		wantMs  time.Time
		wantExp time.Time
	}{
		{"zero", time.Time{}, time.Time{}, time.Time{}},
		{"whole second", base, base, base},
		{"sub-millisecond", base.Add(1500 * time.Microsecond), base.Add(time.Millisecond), base.Add(time.Second)},
		{"just after a second", base.Add(time.Nanosecond), base, base.Add(time.Second)},
		{"other zone", base.In(time.FixedZone("X", 3600)), base, base},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := msTime(tt.in); !got.Equal(tt.wantMs) || got.IsZero() != tt.wantMs.IsZero() {
				t.Errorf("msTime = %v, want %v", got, tt.wantMs)
			}
			if got := expTime(tt.in); !got.Equal(tt.wantExp) || got.IsZero() != tt.wantExp.IsZero() {
				t.Errorf("expTime = %v, want %v", got, tt.wantExp)
			}
		})
	}
}

func TestClaimable(t *testing.T) {
	t.Parallel()
	now := time.Date(2050, 1, 1, 0, 0, 0, 0, time.UTC)
	req := &ClaimRequest{PayloadHash: "h", Now: now}
	tests := []struct {
		rec  Record
		want bool
	}{
		{Record{State: StateQueued}, true},
		{Record{State: StateScheduled, PayloadHash: "h"}, true},
		{Record{State: StateRetrying, PayloadHash: "other"}, false},
		{Record{State: StateDead}, true},
		{Record{State: StateSucceeded}, false},
		{Record{State: StateCancelled}, false},
		{Record{State: StateRunning, LeaseUntil: now}, true},
		{Record{State: StateRunning, LeaseUntil: now.Add(time.Millisecond)}, false},
		{Record{State: StateRunning, LeaseUntil: now.Add(time.Microsecond)}, true}, // stores keep milliseconds
		{Record{State: "bogus"}, false},
	}
	for _, tt := range tests {
		if got := claimable(&tt.rec, req); got != tt.want {
			t.Errorf("claimable(%+v) = %v, want %v", tt.rec, got, tt.want)
		}
	}
}
