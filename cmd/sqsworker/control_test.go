package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// longArgs is a job that reports progress five times, then waits until it is cancelled (so that
// the cancellation is noticed by a read in Lambda mode, by a renewal in container mode, not by a
// progress write).
type longArgs struct{}

func (longArgs) Kind() string { return "control.long" }

type okArgs struct{}

func (okArgs) Kind() string { return "control.ok" }

type badArgs struct{}

func (badArgs) Kind() string { return "control.bad" }

// controlRig is a stack on the emulator with a worker under the poller: in Lambda mode (each
// batch with a deadline: the lease is the deadline, a cancellation is noticed by reads) or in
// container mode (no deadline: the lease is renewed, a cancellation is noticed by the renewal).
type controlRig struct {
	stack   string
	prod    *producer.Producer
	mw      *idempotency.Middleware
	dlqURL  string
	sqs     *sqs.Client
	tr      *transcript
	mu      sync.Mutex
	causes  []error
	started chan string
}

func newControlRig(t *testing.T, lambda bool) *controlRig {
	t.Helper()
	b := backend(t)
	r := &controlRig{stack: newStack(t, "control", false), sqs: sqs.NewFromConfig(b.Config), started: make(chan string, 4)}
	ctx, cancel := context.WithCancel(context.Background())
	url := func(name string) string {
		out, err := r.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl)
	}
	queueURL, dlqURL := url(awslocal.QueueName(r.stack, false)), url(awslocal.DLQName(r.stack, false))
	r.dlqURL = dlqURL
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: b.DynamoDB(), Table: awslocal.TableName(r.stack)})
	if err != nil {
		t.Fatal(err)
	}
	mcfg := idempotency.MiddlewareConfig{Store: store, ProgressInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if lambda {
		mcfg.CancelCheck = 300 * time.Millisecond
	} else {
		mcfg.CancelCheck, mcfg.Lease = -1, 3*time.Second // only the renewals (every second) look
	}
	if r.mw, err = idempotency.NewMiddleware(mcfg); err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[longArgs](func(ctx context.Context, job *jobs.Job[longArgs]) error {
		r.started <- job.ID
		for i := 1; ; i++ {
			if i <= 5 {
				if err := jobs.Progress(ctx, float64(i)/10, "step \x1b[31m"+time.Now().Format("15:04:05.000")); err != nil {
					return err
				}
			}
			select {
			case <-ctx.Done():
				r.mu.Lock()
				r.causes = append(r.causes, context.Cause(ctx))
				r.mu.Unlock()
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}), jobs.WithMaxAttempts(3))
	jobs.MustRegister(reg, jobs.WorkFunc[okArgs](func(context.Context, *jobs.Job[okArgs]) error { return nil }))
	jobs.MustRegister(reg, jobs.WorkFunc[badArgs](func(context.Context, *jobs.Job[badArgs]) error { return errors.New("always fails") }),
		jobs.WithMaxAttempts(1))
	h, err := worker.New(worker.Config{Registry: reg, SQS: r.sqs, QueueURL: queueURL, DLQURL: dlqURL,
		Middleware: []worker.Middleware{r.mw}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pcfg := poller.Config{SQS: r.sqs, QueueURL: queueURL, Handler: h, WaitTime: time.Second, Concurrency: 2,
		Logger: slog.New(slog.DiscardHandler)}
	if lambda {
		pcfg.InvocationTimeout = 2 * time.Minute
	}
	p, err := poller.New(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("poller: %v", err)
		}
	})
	if r.prod, err = producer.New(producer.Config{SQS: r.sqs, QueueURL: queueURL}); err != nil {
		t.Fatal(err)
	}
	r.tr = newTranscript(t, r.stack)
	return r
}

// statusJSON runs `sqsworker status ID --output json`.
func (r *controlRig) statusJSON(t *testing.T, id string) (jobJSON, bool) {
	t.Helper()
	out, code := r.tr.run("", "status", id, "--output", "json")
	var j jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
		return jobJSON{}, false
	}
	return j, true
}

// TestCancelRunningJobFromTheCLI runs a long job that reports progress under a real poller and
// worker on the emulator, shows its progress with `sqsworker status`, cancels it with
// `sqsworker cancel --wait`, and checks that it stopped, ended cancelled after one run (no
// retry), and went to the DLQ with the reason "cancelled". Then `sqsworker wait` returns the
// final state of a job that succeeds and one that dies.
func TestCancelRunningJobFromTheCLI(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"lambda", "container"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := newControlRig(t, mode == "lambda")
			ctx := context.Background()
			res, err := r.prod.Enqueue(ctx, longArgs{})
			if err != nil {
				t.Fatal(err)
			}
			<-r.started
			// Progress shows in status (written at most every 100 ms here); wait for the last of
			// the five reports, so that no progress write is left to notice the cancellation.
			var before jobJSON
			waitFor(t, 30*time.Second, "progress in `sqsworker status`", func() bool {
				j, ok := r.statusJSON(t, res.ID)
				before = j
				return ok && j.State == "running" && j.Progress != nil && j.Progress.Fraction == 0.5
			})
			text := r.tr.must("status", res.ID)
			if !strings.Contains(text, "progress ") || !strings.Contains(text, `step \x1b[31m`) || strings.Contains(text, "\x1b") {
				t.Errorf("status text shows the progress unescaped or not at all:\n%s", text)
			}

			out := r.tr.must("cancel", res.ID, "--reason", "wrong month", "--wait", "60s", "--output", "json")
			var doc cancelJSON
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("cancel --output json: %v\n%s", err, out)
			}
			if doc.Action != "requested" || doc.Final == nil {
				t.Fatalf("cancel: %+v, want requested and a final state", doc)
			}
			f := doc.Final
			if f.State != "cancelled" || f.Reason != jobs.ReasonCancelled || f.Runs != 1 || f.CancelReason != "wrong month" {
				t.Errorf("final record %+v: want cancelled after 1 run, with the request's reason", f)
			}
			if !strings.Contains(f.LastError, "cancellation requested") {
				t.Errorf("last error %q, want the cancellation", f.LastError)
			}
			requested, finished := time.Time(f.CancelRequestedAt), time.Time(f.UpdatedAt)
			t.Logf("%s: noticed and recorded %v after the request (CancelCheck 300 ms / renewal every 1 s)", mode, finished.Sub(requested))
			r.mu.Lock()
			causes := append([]error(nil), r.causes...)
			r.mu.Unlock()
			var cre *jobs.CancelRequestError
			if len(causes) != 1 || !errors.As(causes[0], &cre) || cre.Reason != "wrong month" {
				t.Errorf("the job's context causes %v, want one CancelRequestError with the reason", causes)
			}
			st := r.mw.Stats()
			if st.CancelRequests != 1 {
				t.Errorf("CancelRequests = %d, want 1", st.CancelRequests)
			}
			if mode == "container" && (st.CancelChecks != 0 || st.LeaseRenewals == 0) {
				t.Errorf("container mode: %d reads, %d renewals; want the renewals alone to notice it", st.CancelChecks, st.LeaseRenewals)
			}
			if mode == "lambda" && (st.CancelChecks == 0 || st.LeaseRenewals != 0) {
				t.Errorf("Lambda mode: %d reads, %d renewals; want reads (no renewal under a deadline)", st.CancelChecks, st.LeaseRenewals)
			}
			if before.Progress.Message == "" {
				t.Errorf("progress without its message: %+v", before.Progress)
			}

			// The DLQ has the job, with the reason "cancelled"; the job ran once.
			var reason string
			waitFor(t, 30*time.Second, "the cancelled job in the DLQ", func() bool {
				m, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(r.dlqURL), MaxNumberOfMessages: 10,
					MessageAttributeNames: []string{worker.FailureAttribute}, WaitTimeSeconds: 1})
				if err != nil || len(m.Messages) == 0 {
					return false
				}
				var fl worker.Failure
				_ = json.Unmarshal([]byte(aws.ToString(m.Messages[0].MessageAttributes[worker.FailureAttribute].StringValue)), &fl)
				reason = fl.Reason
				return fl.JobID == res.ID
			})
			if reason != jobs.ReasonCancelled {
				t.Errorf("DLQ reason %q, want cancelled", reason)
			}

			// Cancelling it again, or an unknown job: clear errors, exit 1.
			if out, code := r.tr.run("", "cancel", res.ID); code != 1 || !strings.Contains(r.tr.buf.String(), "has finished") {
				t.Errorf("second cancel: exit %d, %s", code, out)
			}
			r.tr.buf.Reset()
			if _, code := r.tr.run("", "cancel", "control.long/no-such-key"); code != 1 || !strings.Contains(r.tr.buf.String(), "no job control.long/no-such-key") ||
				strings.Contains(r.tr.buf.String(), "name it as KIND/KEY") || !strings.Contains(r.tr.buf.String(), "no record until a worker claims it") {
				t.Errorf("cancel of an unknown job: exit %d\n%s", code, r.tr.buf.String())
			}

			// wait returns the final state of a job that succeeds and of one that dies.
			for _, c := range []struct {
				args jobs.Args
				want string
			}{{okArgs{}, "succeeded"}, {badArgs{}, "dead"}} {
				res, err := r.prod.Enqueue(ctx, c.args)
				if err != nil {
					t.Fatal(err)
				}
				out := r.tr.must("wait", res.ID, "--timeout", "60s", "--output", "json")
				var j jobJSON
				if err := json.Unmarshal([]byte(out), &j); err != nil || j.State != c.want {
					t.Errorf("wait %s: %v %+v, want %s", c.args.Kind(), err, j, c.want)
				}
			}
		})
	}
}

func TestControlUsageErrors(t *testing.T) {
	t.Parallel()
	checkUsageErrors(t, []usageCase{
		{"cancel without stack", []string{"cancel", "j"}, "cancel needs --stack NAME"},
		{"cancel without job", []string{"cancel", "--stack", "s"}, "cancel needs JOB"},
		{"cancel bad kind", []string{"cancel", "Email/k", "--stack", "s"}, `JOB "Email/k": KIND/KEY: kind "Email"`},
		{"cancel empty key", []string{"cancel", "email.send/", "--stack", "s"}, "KIND/KEY: the key is empty"},
		{"cancel negative wait", []string{"cancel", "j", "--wait", "-1s", "--stack", "s"}, "--wait -1s: want 0 (do not wait) to 12h0m0s"},
		{"cancel wait too long", []string{"cancel", "j", "--wait", "13h", "--stack", "s"}, "--wait 13h0m0s: want 0"},
		{"cancel long reason", []string{"cancel", "j", "--reason", strings.Repeat("x", 513), "--stack", "s"}, "--reason: at most 512 bytes"},
		{"wait without job", []string{"wait", "--stack", "s"}, "wait needs JOB"},
		{"wait zero timeout", []string{"wait", "j", "--timeout", "0s", "--stack", "s"}, "--timeout 0s: want more than 0"},
		{"wait empty job", []string{"wait", " ", "--stack", "s"}, "JOB is empty"},
	})
}

func TestSafeTextEscapesHostileText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"page 4 of 10":       "page 4 of 10",
		"red \x1b[31m":       `red \x1b[31m`,
		"bidi \u202egnp.exe": `bidi \u202egnp.exe`,
		"line\nbreak\ttab":   `line\nbreak\ttab`,
		"bad \xff utf8":      `bad \xff utf8`,
		"ok \uFFFD é 日本":     "ok \uFFFD é 日本",
	} {
		if got := safeText(in); got != want {
			t.Errorf("safeText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPercentText(t *testing.T) {
	t.Parallel()
	for f, want := range map[float64]string{0: "0%", 0.29: "29%", 0.57: "57%", 0.07: "7%", 0.1234: "12.34%", 0.3333: "33.33%", 1: "100%"} {
		if got := percentText(f); got != want {
			t.Errorf("percentText(%v) = %q, want %q", f, got, want)
		}
	}
}
