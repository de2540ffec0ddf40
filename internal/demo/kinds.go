// Package demo is the end-to-end demonstration behind `sqsworker demo` (`make demo`): it
// provisions a queue and its DLQ on the embedded emulator, enqueues a mix of jobs, runs the
// poller with the worker until every message is settled, and reports what happened.
package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// EmailArgs sends an email. It always succeeds.
type EmailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Kind implements jobs.Args.
func (EmailArgs) Kind() string { return "email.send" }

// ReportArgs builds a report. The warehouse is busy for its first two attempts.
type ReportArgs struct {
	Name string `json:"name"`
}

// Kind implements jobs.Args.
func (ReportArgs) Kind() string { return "report.build" }

// ResizeArgs resizes an image. The image is corrupt: every attempt fails (a poison job).
type ResizeArgs struct {
	URL string `json:"url"`
}

// Kind implements jobs.Args.
func (ResizeArgs) Kind() string { return "image.resize" }

// RefundArgs refunds an order. An order that was already refunded is cancelled, not retried.
type RefundArgs struct {
	Order    string `json:"order"`
	Refunded bool   `json:"refunded"`
}

// Kind implements jobs.Args.
func (RefundArgs) Kind() string { return "payment.refund" }

// MaxAttempts is the demo kinds' attempt budget.
const MaxAttempts = 3

// Register adds the demo's kinds to reg.
func Register(reg *jobs.Registry, policy jobs.Policy) error {
	opts := []jobs.Option{jobs.WithMaxAttempts(MaxAttempts), jobs.WithPolicy(policy)}
	return errors.Join(
		jobs.Register(reg, jobs.WorkFunc[EmailArgs](func(ctx context.Context, job *jobs.Job[EmailArgs]) error {
			return nil // a real worker would call the mail API here
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[ReportArgs](func(ctx context.Context, job *jobs.Job[ReportArgs]) error {
			if job.Attempt < 3 {
				return fmt.Errorf("warehouse busy (attempt %d)", job.Attempt)
			}
			return nil
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[ResizeArgs](func(ctx context.Context, job *jobs.Job[ResizeArgs]) error {
			return fmt.Errorf("decode %s: corrupt image", job.Args.URL)
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[RefundArgs](func(ctx context.Context, job *jobs.Job[RefundArgs]) error {
			if job.Args.Refunded {
				return jobs.Cancel(fmt.Errorf("order %s was already refunded", job.Args.Order))
			}
			return nil
		}), opts...),
	)
}
