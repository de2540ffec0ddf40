package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/internal/testenv/poll"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// syncBuffer is a bytes.Buffer safe for the command's goroutines and the test's polling.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, cond)
}

// runningCommand is a `sqsworker run` started in the background by startRun.
type runningCommand struct {
	t              *testing.T
	cancel         context.CancelFunc
	done           chan struct{} // closed once run has returned, code set
	code           int
	stdout, stderr syncBuffer
	before         []string // the test process's children before run started (a test binary's PostgreSQL cluster, …)
}

// startRun starts `sqsworker run args...` under ctx, waits up to wait for its running line
// (failing the test if it exits first), and registers a cleanup that stops it. Without
// --endpoint or --port, the embedded emulator gets any free port (tests run in parallel, beside
// other programs: 4566 may be taken).
func startRun(t *testing.T, ctx context.Context, wait time.Duration, args ...string) *runningCommand {
	t.Helper()
	if !slices.Contains(args, "--endpoint") && !slices.Contains(args, "--port") {
		args = append(args, "--port", "0")
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &runningCommand{t: t, cancel: cancel, done: make(chan struct{}), before: children(t)}
	go func() {
		defer close(r.done)
		r.code = run(ctx, append([]string{"run"}, args...), &r.stdout, &r.stderr)
	}()
	t.Cleanup(func() { r.stop() })
	waitFor(t, wait, "the running line", func() bool {
		t.Helper() // an early exit is reported at the caller's line
		r.alive()
		return strings.Contains(r.stderr.String(), "running ")
	})
	return r
}

// alive fails the test if run has returned (for waitFor conditions, which run on the test goroutine).
func (r *runningCommand) alive() {
	r.t.Helper()
	select {
	case <-r.done:
		r.t.Fatalf("run exited early with %d:\nstdout: %s\nstderr: %s", r.code, r.stdout.String(), r.stderr.String())
	default:
	}
}

// stop cancels run, waits up to 30 s for it to return (failing the test if it does not) and
// returns its exit code. Once run has returned, it returns the same code at once.
func (r *runningCommand) stop() int {
	r.t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.code
	case <-time.After(30 * time.Second):
		r.t.Fatal("run did not return within 30s of cancel")
		return -1
	}
}

// stopOK stops run and fails the test unless it exited 0.
func (r *runningCommand) stopOK() {
	r.t.Helper()
	if code := r.stop(); code != exitOK {
		r.t.Errorf("exit %d after cancel, want 0:\n%s", code, r.stderr.String())
	}
}

// stopCleanly is stopOK, and checks that run said it stopped and left no child process.
func (r *runningCommand) stopCleanly() {
	r.t.Helper()
	r.stopOK()
	if !strings.Contains(r.stderr.String(), "stopped") {
		r.t.Errorf("stderr lacks the stopped line:\n%s", r.stderr.String())
	}
	var left []string
	for _, pid := range children(r.t) {
		if !slices.Contains(r.before, pid) {
			left = append(left, pid)
		}
	}
	if len(left) > 0 {
		r.t.Errorf("child processes left after run returned: %v", left)
	}
}

// endpoint is the embedded emulator's address from run's endpoint line.
func (r *runningCommand) endpoint() string {
	r.t.Helper()
	m := regexp.MustCompile(`endpoint  (\S+) \(embedded\)`).FindStringSubmatch(r.stdout.String())
	if m == nil {
		r.t.Fatalf("no endpoint line:\n%s", r.stdout.String())
	}
	return m[1]
}

// checkPrintedQueues checks that the queue and DLQ URLs a command printed are at the endpoint it
// printed (not at the host emulators write into their URLs), and that another client, knowing
// only a printed URL, reaches the queue there.
func checkPrintedQueues(t *testing.T, stdout string) {
	t.Helper()
	ep := regexp.MustCompile(`(?m)^endpoint +(\S+) `).FindStringSubmatch(stdout)
	qs := regexp.MustCompile(`(?m)^(?:queue|dlq) +(\S+)$`).FindAllStringSubmatch(stdout, -1)
	if ep == nil || len(qs) != 2 {
		t.Fatalf("want an endpoint line and two queue lines:\n%s", stdout)
	}
	for _, q := range qs {
		if !strings.HasPrefix(q[1], ep[1]+"/") {
			t.Errorf("printed queue URL %s is not at the endpoint %s", q[1], ep[1])
			continue
		}
		cfg, err := awslocal.NewConfig(context.Background(), ep[1], "us-east-1", 0, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sqs.NewFromConfig(cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q[1])}); err != nil {
			t.Errorf("the printed queue %s: %v", q[1], err)
		}
	}
}

func buildEchoFn(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, "./internal/lambdarun/testdata/echofn")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build echofn: %v\n%s", err, b)
	}
	return out
}

// children returns the pids of this process's live child processes.
func children(t *testing.T) []string {
	t.Helper()
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var pids []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err == nil {
			pids = append(pids, strings.Fields(string(b))...)
		}
	}
	return pids
}

var batchLine = regexp.MustCompile(`(?m)^batch size=(\d+) failures=(\d+)`)

func batchTotals(stderr string) (size, failures int) {
	for _, m := range batchLine.FindAllStringSubmatch(stderr, -1) {
		s, _ := strconv.Atoi(m[1])
		f, _ := strconv.Atoi(m[2])
		size, failures = size+s, failures+f
	}
	return size, failures
}

// TestRunEndToEnd runs `sqsworker run` on the embedded emulator with a test function under
// the RIE: jobs sent to the queue and a due schedule are processed, the failed one stays on the
// queue, and cancelling the context stops everything with exit 0.
func TestRunEndToEnd(t *testing.T) {
	bootstrap := buildEchoFn(t)
	stack := awslocal.UniqueName("cli-run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	running := startRun(t, ctx, 60*time.Second, "--stack", stack, "--bootstrap", bootstrap, "--concurrency", "2", "--timeout", "10s")

	b, err := awslocal.Start(ctx, awslocal.Options{Endpoint: running.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	client := sqs.NewFromConfig(b.Config)
	q, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awslocal.QueueName(stack, false))})
	if err != nil {
		t.Fatal(err)
	}
	checkPrintedQueues(t, running.stdout.String())
	for _, body := range []string{"ok-1", "ok-2", "please fail", "checkenv"} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// A one-time schedule already due: the dispatcher beside the poller fires it.
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute).Format("2006-01-02T15:04:05")
	_, err = scheduler.NewFromConfig(b.Config).CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String("once"), GroupName: aws.String(awslocal.ScheduleGroupName(stack)),
		ScheduleExpression: aws.String(fmt.Sprintf("at(%s)", at)),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target: &schedtypes.Target{Arn: aws.String(attrs.Attributes["QueueArn"]),
			RoleArn: aws.String(awslocal.SchedulerRoleARN(stack)), Input: aws.String("scheduled")},
	})
	if err != nil {
		t.Fatal(err)
	}

	waitFor(t, 60*time.Second, "5 messages handled, 1 failed", func() bool {
		size, failures := batchTotals(running.stderr.String())
		return size >= 5 && failures >= 1
	})
	if size, failures := batchTotals(running.stderr.String()); size != 5 || failures != 1 {
		t.Errorf("batches handled %d messages with %d failures, want 5 and 1:\n%s", size, failures, running.stderr.String())
	}

	running.stopCleanly()
}

func TestRunUsageAndBuildErrors(t *testing.T) {
	t.Parallel()
	bad := "./internal/lambdarun/testdata/badfn"
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"neither", []string{"run", "--stack", "s"}, exitUsage, "run needs --function DIR"},
		{"both", []string{"run", "--stack", "s", "--function", ".", "--bootstrap", "x"}, exitUsage, "not both"},
		{"no stack", []string{"run", "--bootstrap", "x"}, exitUsage, "run needs --stack NAME"},
		{"bad concurrency", []string{"run", "--stack", "s", "--bootstrap", "x", "--concurrency", "0"}, exitUsage, "--concurrency 0"},
		{"missing bootstrap", []string{"run", "--stack", "s", "--bootstrap", filepath.Join(t.TempDir(), "nope")}, exitError, "--bootstrap:"},
		{"build failure", []string{"run", "--stack", "s", "--function", bad, "--port", "0"}, exitError, "undefined: undefinedFunction"},
		{"port out of range", []string{"run", "--stack", "s", "--bootstrap", os.Args[0], "--port", "65536"}, exitUsage, "--port 65536: want 1-65535, or 0 for any free port"},
		{"port and endpoint", []string{"run", "--stack", "s", "--bootstrap", os.Args[0], "--port", "4567", "--endpoint", "http://localhost:4566"}, exitUsage,
			"--port is for the embedded emulator, and the endpoint http://localhost:4566 is given"},
		{"fifo batch size", []string{"run", "--stack", "s", "--bootstrap", "x", "--fifo", "--batch-size", "11"}, exitUsage, "a FIFO event source takes at most 10"},
		{"fifo window", []string{"run", "--stack", "s", "--bootstrap", "x", "--fifo", "--batching-window", "1s"}, exitUsage, "a FIFO event source has no batching window"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tt.args, &out, &errOut); code != tt.code {
				t.Errorf("exit %d, want %d: %s", code, tt.code, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", errOut.String(), tt.want)
			}
		})
	}
}

// TestRunProvisionsFIFOOnTheEmbeddedEmulator: with --fifo and no endpoint, run provisions the
// stack's FIFO queues in its own emulator and polls the .fifo queue.
func TestRunProvisionsFIFOOnTheEmbeddedEmulator(t *testing.T) {
	bootstrap := buildEchoFn(t)
	stack := awslocal.UniqueName("cli-run-fifo")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	running := startRun(t, ctx, 60*time.Second, "--stack", stack, "--bootstrap", bootstrap, "--fifo")
	for _, want := range []string{"/" + stack + "-jobs.fifo\n", "/" + stack + "-jobs-dlq.fifo\n"} {
		if !strings.Contains(running.stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", strings.TrimSpace(want), running.stdout.String())
		}
	}
	running.stopOK()
}
