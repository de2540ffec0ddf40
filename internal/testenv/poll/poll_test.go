package poll_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/internal/testenv/poll"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	poll.Until(t, time.Minute, "the third check", func() bool { return n.Add(1) == 3 })
	if got := n.Load(); got != 3 {
		t.Errorf("checked %d times, want 3", got)
	}
}

// fatalRecorder records Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestUntilFailsWithWhatWasAwaited(t *testing.T) {
	t.Parallel()
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("Until did not fail the test: %v", r)
			}
		}()
		poll.Until(rec, 50*time.Millisecond, "nothing", func() bool { return false })
	}()
	if rec.msg == "" {
		t.Error("no failure message")
	}
}
