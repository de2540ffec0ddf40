// Package examplejobs holds the example job kinds of the demo, the worker function and the
// container example. It imports only pkg/jobs, so a Lambda bootstrap that registers them stays
// small.
package examplejobs

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// InvoiceArgs renders an invoice. The demo has a worker "crash" while holding its claim.
type InvoiceArgs struct {
	Invoice int `json:"invoice"`
}

// Kind implements jobs.Args.
func (InvoiceArgs) Kind() string { return "invoice.render" }

// SideEffects counts how many times each job key's work really ran (the side effect a real
// worker would have: an email sent, a card charged).
type SideEffects struct {
	mu   sync.Mutex
	runs map[string]int
}

// NewSideEffects returns an empty counter.
func NewSideEffects() *SideEffects { return &SideEffects{runs: map[string]int{}} }

func (s *SideEffects) add(job *jobs.Info) {
	s.mu.Lock()
	s.runs[job.Kind+"#"+job.Key]++
	s.mu.Unlock()
}

// Runs returns how many times the job key ran.
func (s *SideEffects) Runs(kind, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[kind+"#"+key]
}

// RollupArgs rolls up metrics; a recurring schedule enqueues it every minute.
type RollupArgs struct {
	Window string `json:"window"`
}

// Kind implements jobs.Args.
func (RollupArgs) Kind() string { return "metrics.rollup" }

// MaxAttempts is the demo kinds' attempt budget.
const MaxAttempts = 3

// Register adds the demo's kinds to reg.
// Every run is counted in effects.
func Register(reg *jobs.Registry, policy jobs.Policy, effects *SideEffects) error {
	opts := []jobs.Option{jobs.WithMaxAttempts(MaxAttempts), jobs.WithPolicy(policy)}
	return errors.Join(
		jobs.Register(reg, jobs.WorkFunc[EmailArgs](func(ctx context.Context, job *jobs.Job[EmailArgs]) error {
			effects.add(job.Info) // a real worker would call the mail API here
			return nil
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[InvoiceArgs](func(ctx context.Context, job *jobs.Job[InvoiceArgs]) error {
			effects.add(job.Info)
			return nil
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[RollupArgs](func(ctx context.Context, job *jobs.Job[RollupArgs]) error {
			effects.add(job.Info)
			return nil
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[ReportArgs](func(ctx context.Context, job *jobs.Job[ReportArgs]) error {
			effects.add(job.Info)
			if job.Attempt < 3 {
				return fmt.Errorf("warehouse busy (attempt %d)", job.Attempt)
			}
			return nil
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[ResizeArgs](func(ctx context.Context, job *jobs.Job[ResizeArgs]) error {
			effects.add(job.Info)
			return fmt.Errorf("decode %s: corrupt image", job.Args.URL)
		}), opts...),
		jobs.Register(reg, jobs.WorkFunc[RefundArgs](func(ctx context.Context, job *jobs.Job[RefundArgs]) error {
			effects.add(job.Info)
			if job.Args.Refunded {
				return jobs.Cancel(fmt.Errorf("order %s was already refunded", job.Args.Order))
			}
			return nil
		}), opts...),
	)
}
