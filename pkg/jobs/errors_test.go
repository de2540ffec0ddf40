package jobs_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

var errBoom = errors.New("boom")

func TestDeadLetterReasonsAreStable(t *testing.T) {
	t.Parallel()
	// They are written into the DLQ copy's sqsworker.failure attribute: a wire format.
	for got, want := range map[string]string{
		jobs.ReasonExhausted:       "exhausted",
		jobs.ReasonCancelled:       "cancelled",
		jobs.ReasonMalformed:       "malformed",
		jobs.ReasonUnknownKind:     "unknown_kind",
		jobs.ReasonPayloadMismatch: "payload_mismatch",
		jobs.ReasonPayloadMissing:  "payload_missing",
		jobs.ReasonPayloadRefused:  "payload_refused",
		jobs.ReasonDeferredTooLong: "deferred_too_long",
		jobs.ReasonFlowKey:         "flow_key",
	} {
		if got != want {
			t.Errorf("reason %q, want %q", got, want)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	var typeErr *json.UnmarshalTypeError
	jsonErr := json.Unmarshal([]byte(`{"to":42}`), &struct {
		To string `json:"to"`
	}{})
	if !errors.As(jsonErr, &typeErr) {
		t.Fatalf("setup: %v is not a *json.UnmarshalTypeError", jsonErr)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"Cancel", jobs.Cancel(errBoom), "job cancelled: boom"},
		{"Cancel nil", jobs.Cancel(nil), "job cancelled"},
		{"RetryAfter", jobs.RetryAfter(90*time.Second, errBoom), "retry after 1m30s: boom"},
		{"RetryAfter nil", jobs.RetryAfter(time.Hour, nil), "retry after 1h0m0s"},
		{"RetryAfter negative", jobs.RetryAfter(-time.Minute, errBoom), "retry after 0s: boom"},
		{"DeadLetter", jobs.DeadLetter(jobs.ReasonPayloadMismatch, errBoom), "dead-letter: payload_mismatch: boom"},
		{"DeadLetter nil", jobs.DeadLetter(jobs.ReasonUnknownKind, nil), "dead-letter: unknown_kind"},
		{"ErrSkipped", jobs.ErrSkipped, "job skipped"},
		{"ErrSkipped wrapped", fmt.Errorf("duplicate of job-1: %w", jobs.ErrSkipped), "duplicate of job-1: job skipped"},
		{"ArgsError", &jobs.ArgsError{Kind: "email.send", Err: jsonErr}, "decode args of kind email.send: " + jsonErr.Error()},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s: Error() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestRetryAfterDelay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want time.Duration }{
		{0, 0},
		{time.Nanosecond, time.Nanosecond},
		{15 * time.Minute, 15 * time.Minute},
		{48 * time.Hour, 48 * time.Hour}, // kept: longer delays are served by a re-send
		{-1, 0},
		{-time.Hour, 0},
	} {
		var ra *jobs.RetryAfterError
		if !errors.As(jobs.RetryAfter(tc.in, errBoom), &ra) {
			t.Fatalf("RetryAfter(%s) is not a *RetryAfterError", tc.in)
		}
		if ra.Delay != tc.want {
			t.Errorf("RetryAfter(%s).Delay = %s, want %s", tc.in, ra.Delay, tc.want)
		}
	}
}

// TestErrorChains checks that each control error is found by errors.As through wrapping, keeps
// its cause for errors.Is, and is not mistaken for another control.
func TestErrorChains(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("send welcome: %w", err) }

	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		err := wrap(jobs.Cancel(errBoom))
		var ce *jobs.CancelError
		if !errors.As(err, &ce) || ce.Err != errBoom {
			t.Fatalf("errors.As(%v, *CancelError) = %v, %+v", err, false, ce)
		}
		if !errors.Is(err, errBoom) || errors.Unwrap(ce) != errBoom {
			t.Error("cause lost")
		}
		var ra *jobs.RetryAfterError
		var dl *jobs.DeadLetterError
		if errors.As(err, &ra) || errors.As(err, &dl) || errors.Is(err, jobs.ErrSkipped) {
			t.Error("Cancel matches another control")
		}
		if errors.Unwrap(jobs.Cancel(nil)) != nil {
			t.Error("Cancel(nil) unwraps to non-nil")
		}
	})

	t.Run("RetryAfter", func(t *testing.T) {
		t.Parallel()
		err := wrap(jobs.RetryAfter(time.Minute, errBoom))
		var ra *jobs.RetryAfterError
		if !errors.As(err, &ra) || ra.Delay != time.Minute || ra.Err != errBoom {
			t.Fatalf("errors.As(%v, *RetryAfterError) = %+v", err, ra)
		}
		if !errors.Is(err, errBoom) || errors.Unwrap(ra) != errBoom {
			t.Error("cause lost")
		}
		var ce *jobs.CancelError
		if errors.As(err, &ce) {
			t.Error("RetryAfter matches CancelError")
		}
	})

	t.Run("DeadLetter", func(t *testing.T) {
		t.Parallel()
		err := wrap(jobs.DeadLetter(jobs.ReasonPayloadMismatch, errBoom))
		var dl *jobs.DeadLetterError
		if !errors.As(err, &dl) || dl.Reason != jobs.ReasonPayloadMismatch || dl.Err != errBoom {
			t.Fatalf("errors.As(%v, *DeadLetterError) = %+v", err, dl)
		}
		if !errors.Is(err, errBoom) || errors.Unwrap(dl) != errBoom {
			t.Error("cause lost")
		}
	})

	t.Run("ErrSkipped", func(t *testing.T) {
		t.Parallel()
		if err := fmt.Errorf("job %s already succeeded: %w", "job-1", jobs.ErrSkipped); !errors.Is(err, jobs.ErrSkipped) {
			t.Errorf("errors.Is(%v, ErrSkipped) = false", err)
		}
		if errors.Is(errBoom, jobs.ErrSkipped) {
			t.Error("an unrelated error is ErrSkipped")
		}
	})

	t.Run("ArgsError", func(t *testing.T) {
		t.Parallel()
		jsonErr := json.Unmarshal([]byte(`{"to":42}`), &struct {
			To string `json:"to"`
		}{})
		err := wrap(&jobs.ArgsError{Kind: "email.send", Err: jsonErr})
		var ae *jobs.ArgsError
		if !errors.As(err, &ae) || ae.Kind != "email.send" {
			t.Fatalf("errors.As(%v, *ArgsError) = %+v", err, ae)
		}
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) || errors.Unwrap(ae) != jsonErr {
			t.Errorf("the json error is not reachable from %v", err)
		}
	})

	t.Run("nested controls", func(t *testing.T) {
		t.Parallel()
		// A cancel whose cause is a retry: both are visible; the worker decides the order.
		err := jobs.Cancel(jobs.RetryAfter(time.Second, errBoom))
		var ce *jobs.CancelError
		var ra *jobs.RetryAfterError
		if !errors.As(err, &ce) || !errors.As(err, &ra) || !errors.Is(err, errBoom) {
			t.Errorf("chain of %v incomplete", err)
		}
	})
}
