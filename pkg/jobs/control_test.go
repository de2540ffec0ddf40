package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

type recordingReporter struct {
	fraction float64
	message  string
}

func (r *recordingReporter) ReportProgress(fraction float64, message string) error {
	r.fraction, r.message = fraction, message
	return nil
}

func TestProgress(t *testing.T) {
	t.Parallel()
	r := &recordingReporter{}
	ctx := jobs.WithProgressReporter(context.Background(), r)
	if err := jobs.Progress(ctx, 0.4, "page 4 of 10"); err != nil || r.fraction != 0.4 || r.message != "page 4 of 10" {
		t.Errorf("Progress = %v, reporter got %v %q", err, r.fraction, r.message)
	}
	for _, f := range []float64{-0.01, 1.0001, math.NaN(), math.Inf(1)} {
		if err := jobs.Progress(ctx, f, ""); !errors.Is(err, jobs.ErrInvalidProgress) {
			t.Errorf("Progress(%v) = %v, want ErrInvalidProgress", f, err)
		}
	}
	for _, f := range []float64{0, 1} {
		if err := jobs.Progress(ctx, f, ""); err != nil {
			t.Errorf("Progress(%v) = %v, want nil (bounds included)", f, err)
		}
	}
	if err := jobs.Progress(context.Background(), 0.5, ""); !errors.Is(err, jobs.ErrNoProgressReporter) {
		t.Errorf("Progress outside a job = %v, want ErrNoProgressReporter", err)
	}
}

func TestCancelRequestError(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err := fmt.Errorf("wrapped: %w", &jobs.CancelRequestError{RequestedAt: at, Reason: "duplicate order"})
	if !errors.Is(err, jobs.ErrCancelRequested) {
		t.Errorf("%v does not match ErrCancelRequested", err)
	}
	if got, want := err.Error(), "wrapped: jobs: cancellation requested at 2026-12-01T10:00:00.000Z: duplicate order"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := (&jobs.CancelRequestError{}).Error(); got != "jobs: cancellation requested" {
		t.Errorf("empty request: %q", got)
	}
}
