package worker

import (
	"errors"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	fixed := jobs.PolicyFunc(func(attempt int) time.Duration { return time.Duration(attempt) * 10 * time.Second })
	plain := errors.New("boom")
	capVis := time.Hour
	tests := []struct {
		name           string
		err            error
		attempt, max   int
		want           result
		wantErrIsPlain bool
	}{
		{name: "success", err: nil, attempt: 1, max: 3, want: result{outcome: OutcomeSucceeded, act: actAck}},
		{name: "skipped", err: jobs.ErrSkipped, attempt: 1, max: 3, want: result{outcome: OutcomeSkipped, act: actAck}},
		{name: "plain error backs off by policy", err: plain, attempt: 2, max: 3, want: result{outcome: OutcomeRetry, act: actRetry, visibility: 20 * time.Second}},
		{name: "last attempt is exhausted", err: plain, attempt: 3, max: 3, want: result{outcome: OutcomeDeadLettered, act: actDeadLetter, reason: jobs.ReasonExhausted}},
		{name: "cancel dead-letters at once", err: jobs.Cancel(plain), attempt: 1, max: 3, want: result{outcome: OutcomeDeadLettered, act: actDeadLetter, reason: jobs.ReasonCancelled}},
		{name: "dead letter keeps its reason", err: jobs.DeadLetter(jobs.ReasonPayloadMismatch, plain), attempt: 1, max: 3, want: result{outcome: OutcomeDeadLettered, act: actDeadLetter, reason: jobs.ReasonPayloadMismatch}},
		{name: "args error is malformed", err: &jobs.ArgsError{Kind: "k", Err: plain}, attempt: 1, max: 3, want: result{outcome: OutcomeDeadLettered, act: actDeadLetter, reason: jobs.ReasonMalformed}},
		{name: "retry after within cap", err: jobs.RetryAfter(90*time.Second, plain), attempt: 1, max: 3, want: result{outcome: OutcomeRetry, act: actRetry, visibility: 90 * time.Second}},
		{name: "retry after on last attempt is exhausted", err: jobs.RetryAfter(time.Second, plain), attempt: 3, max: 3, want: result{outcome: OutcomeDeadLettered, act: actDeadLetter, reason: jobs.ReasonExhausted}},
		{name: "retry after beyond cap re-sends", err: jobs.RetryAfter(3*time.Hour, plain), attempt: 2, max: 3,
			want: result{outcome: OutcomeRetry, act: actResend, delay: 15 * time.Minute, runAt: now.Add(3 * time.Hour), attempts: 2}},
		{name: "defer never exhausts", err: jobs.Defer(30*time.Second, plain), attempt: 3, max: 3, want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 30 * time.Second}},
		{name: "defer is capped", err: jobs.Defer(2*time.Hour, plain), attempt: 1, max: 3, want: result{outcome: OutcomeDeferred, act: actRetry, visibility: capVis}},
		{name: "backoff above cap is capped", err: plain, attempt: 1, max: 3, want: result{outcome: OutcomeRetry, act: actRetry, visibility: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			info := &jobs.Info{Attempt: tt.attempt, MaxAttempts: tt.max}
			got := decide(tt.err, info, fixed, now, capVis, false)
			got.err = nil
			if got != tt.want {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("cap applies to backoff", func(t *testing.T) {
		t.Parallel()
		info := &jobs.Info{Attempt: 1, MaxAttempts: 3}
		got := decide(plain, info, jobs.PolicyFunc(func(int) time.Duration { return 2 * time.Hour }), now, capVis, false)
		if got.visibility != capVis {
			t.Errorf("visibility = %s, want the cap %s", got.visibility, capVis)
		}
	})
}

// TestDecideDefer: a deferred job is hidden for its delay on its first two receives; from its
// third on a standard queue it is re-sent (attempts_before unchanged, the deferral's start
// carried) so that deferrals never use up the queue's maxReceiveCount; a FIFO message always
// waits in its visibility (a copy would lose its place in the group).
func TestDecideDefer(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	since := now.Add(-time.Hour)
	capVis := time.Hour
	cause := errors.New("limit full")
	tests := []struct {
		name     string
		err      error
		receives int
		fifo     bool
		want     result
	}{
		{name: "first receive: hidden", err: jobs.Defer(30*time.Second, cause), receives: 1,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 30 * time.Second}},
		{name: "second receive: hidden", err: jobs.DeferUntilSince(30*time.Second, since, cause), receives: 2,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 30 * time.Second}},
		{name: "third receive: a fresh copy with the delay and the start", err: jobs.DeferUntilSince(30*time.Second, since, cause), receives: 3,
			want: result{outcome: OutcomeDeferred, act: actResend, delay: 30 * time.Second, attempts: 2, since: since}},
		{name: "a deferral without a start is never re-sent: the redrive policy bounds it", err: jobs.Defer(5*time.Second, cause), receives: 7,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 5 * time.Second}},
		{name: "long delay on a re-send becomes the copy's run_at", err: jobs.DeferUntilSince(2*time.Hour, since, cause), receives: 7,
			want: result{outcome: OutcomeDeferred, act: actResend, delay: 15 * time.Minute, runAt: now.Add(2 * time.Hour), attempts: 2, since: since}},
		{name: "fifo: hidden even when received often", err: jobs.DeferUntilSince(30*time.Second, since, cause), receives: 9, fifo: true,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 30 * time.Second}},
		{name: "hidden delay is capped", err: jobs.Defer(3*time.Hour, cause), receives: 1,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: capVis}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Attempt at MaxAttempts: a deferral never exhausts the job.
			info := &jobs.Info{Attempt: 3, MaxAttempts: 3, AttemptsBefore: 2, ReceiveCount: tt.receives}
			got := decide(tt.err, info, jobs.Exponential{}, now, capVis, tt.fifo)
			if got.err != tt.err {
				t.Errorf("err = %v, want the job's error", got.err)
			}
			got.err = nil
			if got != tt.want {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecideWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	capVis := 11 * time.Hour
	tests := []struct {
		name     string
		ahead    time.Duration
		receives int
		fifo     bool
		want     result
	}{
		{name: "near: fresh copy with the exact delay", ahead: 10 * time.Minute, receives: 1,
			want: result{outcome: OutcomeDeferred, act: actResend, delay: 10 * time.Minute, attempts: 4}},
		{name: "far: hide until 15 min before", ahead: 2 * time.Hour, receives: 1,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 105 * time.Minute}},
		{name: "very far: hide up to the cap", ahead: 30 * time.Hour, receives: 1,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: capVis}},
		{name: "far but received often: fresh copy resets the count", ahead: 30 * time.Hour, receives: 3,
			want: result{outcome: OutcomeDeferred, act: actResend, delay: 15 * time.Minute, attempts: 4}},
		{name: "fifo waits in its visibility", ahead: 10 * time.Minute, receives: 1, fifo: true,
			want: result{outcome: OutcomeDeferred, act: actRetry, visibility: 10 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			info := &jobs.Info{RunAt: now.Add(tt.ahead), ReceiveCount: tt.receives, AttemptsBefore: 4}
			got := decideWait(info, tt.fifo, now, capVis)
			if tt.want.act == actResend {
				tt.want.runAt = info.RunAt
			}
			if got != tt.want {
				t.Errorf("decideWait = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVisibilityCapAndSeconds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if got, want := visibilityCap(now.Add(-time.Hour), now, 5*time.Minute), 10*time.Hour+55*time.Minute; got != want {
		t.Errorf("visibilityCap = %s, want %s", got, want)
	}
	if got := visibilityCap(now.Add(-13*time.Hour), now, 0); got != 0 {
		t.Errorf("visibilityCap past the limit = %s, want 0", got)
	}
	for d, want := range map[time.Duration]int64{0: 0, -time.Second: 0, 1500 * time.Millisecond: 2, time.Second: 1, 13 * time.Hour: 43200} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	t.Parallel()
	s := "ééééééééééééééééééééé" // 2 bytes each
	got := truncate(s, 20)
	if len(got) > 20 {
		t.Errorf("len = %d, want ≤ 20", len(got))
	}
	for _, r := range got {
		if r == '\uFFFD' {
			t.Fatalf("truncate split a rune: %q", got)
		}
	}
	if truncate("short", 20) != "short" {
		t.Error("short strings must be kept")
	}
}

func TestAppendResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ids  []string
		want string
	}{
		{nil, `{"batchItemFailures":[]}`},
		{[]string{"a"}, `{"batchItemFailures":[{"itemIdentifier":"a"}]}`},
		{[]string{"a", `q"\`}, `{"batchItemFailures":[{"itemIdentifier":"a"},{"itemIdentifier":"q\"\\"}]}`},
	}
	for _, tt := range tests {
		if got := string(appendResponse(nil, tt.ids)); got != tt.want {
			t.Errorf("appendResponse(%q) = %s, want %s", tt.ids, got, tt.want)
		}
	}
}
