package schedule

import (
	"errors"
	"testing"
	"time"
	_ "time/tzdata"
)

var fuzzZones = []string{
	"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", // 30-minute DST shift
	"Pacific/Apia", // skipped 2011-12-30 entirely
	"America/Sao_Paulo", "Asia/Kolkata",
}

// FuzzParse: Parse never panics; an accepted expression's String round-trips; Next is strictly
// after `after` when ok, and is itself the next occurrence after the instant just before it.
// The seeds in testdata/fuzz/FuzzParse run with every go test.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"at(2026-03-08T02:30:00)", "rate(1 minute)", "rate(5 minutes)",
		"cron(0 10 * * ? *)", "cron(0/15 * * * ? *)", "cron(0 9 ? * 2#1 *)",
		"cron(0 0 L * ? *)", "cron(0 0 15W * ? *)", "cron(0 0 ? * 6L *)",
		"cron(30 2 * * ? *)", "cron(0 0 1 1 ? 2099-2199)",
	} {
		f.Add(s, int64(1_773_000_000), uint8(1), int64(0))
	}
	locs := make([]*time.Location, len(fuzzZones))
	for i, z := range fuzzZones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			f.Fatal(err)
		}
		locs[i] = loc
	}
	f.Fuzz(func(t *testing.T, s string, afterSec int64, zone uint8, anchorDelta int64) {
		e, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidExpression) {
				t.Fatalf("Parse(%q): %v does not wrap ErrInvalidExpression", s, err)
			}
			return
		}
		if e.String() != s {
			t.Fatalf("String() = %q, want %q", e.String(), s)
		}
		again, err := Parse(e.String())
		if err != nil || again.Kind() != e.Kind() || again.String() != s {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
		// Keep instants within ~1906–2255 so the search stays cheap.
		after := time.Unix(-2_000_000_000+mod(afterSec, 9_000_000_000), mod(afterSec, 1_000_000_000))
		anchor := after.Add(time.Duration(mod(anchorDelta, 2*366*24*3600)-366*24*3600) * time.Second)
		loc := locs[int(zone)%len(locs)]
		next, ok := e.Next(after, loc, anchor)
		if !ok {
			return
		}
		if !next.After(after) {
			t.Fatalf("%s: Next(%v, %v) = %v, not after", s, after, loc, next)
		}
		if again, ok := e.Next(next.Add(-time.Nanosecond), loc, anchor); !ok || !again.Equal(next) {
			t.Fatalf("%s in %v: Next(%v) = %v but Next(that - 1ns) = %v, %v", s, loc, after, next, again, ok)
		}
	})
}

func mod(a, m int64) int64 {
	r := a % m
	if r < 0 {
		r += m
	}
	return r
}
