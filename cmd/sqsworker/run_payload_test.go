package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

// loopbackPort returns a port nothing listens on (now), for a command that must serve at
// http://localhost:PORT (--port 0 serves at 127.0.0.1, where the SDK addresses S3 buckets by
// path whatever it is told).
func loopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestRunRunsLargeJobs: a job larger than an SQS message, enqueued with `sqsworker enqueue`
// through the stack's payload bucket, is run by the real worker function under `sqsworker run`,
// and its record says succeeded: on run's own emulator (which provisions the bucket) and on a
// stack `up --payloads` serves (the two terminals). run used to start the worker without
// SQSWORKER_PAYLOAD_BUCKET, and the worker dead-lettered the job as malformed.
func TestRunRunsLargeJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bootstrap, err := buildFunction(ctx, "../../functions/worker", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	args := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(args, []byte(`{"to":"ada@example.com","subject":"`+strings.Repeat("x", 1100<<10)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		// up serves the stack first (with --payloads), and run works on it with --endpoint.
		up bool
	}{
		{"run's own emulator", false},
		{"up --payloads, then run --endpoint", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stack := awslocal.UniqueName("cli-big")
			port := loopbackPort(t)
			endpoint := "http://localhost:" + port
			runArgs := []string{"--stack", stack, "--bootstrap", bootstrap, "--timeout", "20s"}
			if tt.up {
				upCtx, stopUp := context.WithCancel(ctx)
				var upOut, upErr syncBuffer
				upDone := make(chan int, 1)
				go func() {
					upDone <- run(upCtx, []string{"up", "--stack", stack, "--payloads", "--port", port}, &upOut, &upErr)
				}()
				t.Cleanup(func() { stopUp(); <-upDone })
				waitFor(t, 60*time.Second, "up serving", func() bool {
					select {
					case code := <-upDone:
						t.Fatalf("up exited with %d: %s%s", code, upOut.String(), upErr.String())
					default:
					}
					return strings.Contains(upOut.String(), "until Ctrl-C")
				})
				runArgs = append(runArgs, "--endpoint", endpoint)
			} else {
				runArgs = append(runArgs, "--port", port)
			}
			running := startRun(t, ctx, 120*time.Second, runArgs...)
			if got := running.endpointLine(); got != endpoint {
				t.Fatalf("run serves at %s, want %s", got, endpoint)
			}
			bucket := awslocal.BucketName(stack)
			if !strings.Contains(running.stdout.String(), "payloads  "+bucket+" (S3 bucket)\n") {
				t.Errorf("run does not name the payload bucket:\n%s", running.stdout.String())
			}

			var out, errOut bytes.Buffer
			if code := run(ctx, []string{"enqueue", "email.send", "--args", "@" + args, "--stack", stack, "--endpoint", endpoint}, &out, &errOut); code != exitOK {
				t.Fatalf("enqueue: exit %d: %s", code, errOut.String())
			}
			if !strings.Contains(out.String(), "payload     s3://"+bucket+"/") {
				t.Fatalf("the job did not go through the bucket:\n%s", out.String())
			}
			id := regexp.MustCompile(`(?m)^job id +(\S+)$`).FindStringSubmatch(out.String())
			if id == nil {
				t.Fatalf("no job id:\n%s", out.String())
			}

			b, err := awslocal.Start(ctx, awslocal.Options{Endpoint: endpoint})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			st, err := status.New(status.Config{Client: b.DynamoDB(), Table: awslocal.TableName(stack)})
			if err != nil {
				t.Fatal(err)
			}
			var last idempotency.State
			waitFor(t, 120*time.Second, "the large job's record to say succeeded", func() bool {
				running.alive()
				j, err := st.Get(ctx, "email.send", id[1])
				if err == nil {
					last = j.State
				}
				return last == idempotency.StateSucceeded || last == idempotency.StateDead
			})
			if last != idempotency.StateSucceeded {
				t.Fatalf("the large job ended %s:\n%s", last, running.stderr.String())
			}
			// The worker said at its start which bucket it reads.
			if !strings.Contains(running.stderr.String(), `"payload_bucket":"`+bucket+`"`) {
				t.Errorf("the worker's ready line does not name the bucket:\n%s", running.stderr.String())
			}
			running.stopCleanly()
			// The worker reads the bucket without the SDK's warnings (it warned on every read, the
			// emulator sending no checksum).
			for _, line := range strings.Split(running.stderr.String(), "\n") {
				if strings.HasPrefix(line, "SDK ") {
					t.Errorf("the function's SDK logged: %s", line)
				}
			}
		})
	}
}

// endpointLine is the endpoint run works on, from its endpoint line, whatever its kind.
func (r *runningCommand) endpointLine() string {
	r.t.Helper()
	m := regexp.MustCompile(`(?m)^endpoint  (\S+) \(`).FindStringSubmatch(r.stdout.String())
	if m == nil {
		r.t.Fatalf("no endpoint line:\n%s", r.stdout.String())
	}
	return m[1]
}
