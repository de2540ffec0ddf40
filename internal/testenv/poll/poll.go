// Package poll is the tests' one way to wait for something that happens in the background: poll a
// condition until it holds, with a generous deadline, and fail the test with what was awaited
// when it does not. Timing is never asserted here; a deadline only stops a test that would hang.
package poll

import (
	"testing"
	"time"
)

// Interval is the time between two checks of the condition.
const Interval = 20 * time.Millisecond

// Until checks cond every Interval until it holds, and fails tb (Fatalf: call it from the test's
// goroutine) when it still does not after within, naming what was awaited.
func Until(tb testing.TB, within time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(Interval)
	}
}
