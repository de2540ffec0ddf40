package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/payload"
)

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	checkUsageErrors(t, []usageCase{
		{"unknown flag", []string{"demo", "--nope"}, "unknown flag: --nope"},
		{"extra argument", []string{"demo", "extra"}, `demo takes no arguments, got ["extra"]`},
		{"up without stack", []string{"up"}, "up needs --stack NAME"},
		{"up bad stack name", []string{"up", "--stack", "bad name!"}, `--stack "bad name!": a stack name is 1-60 characters`},
		{"up negative visibility", []string{"up", "--stack", "s", "--visibility-timeout", "-3"}, "--visibility-timeout -3: want 1-43200 seconds"},
		{"up visibility too long", []string{"up", "--stack", "s", "--visibility-timeout", "43201"}, "--visibility-timeout 43201: want 1-43200 seconds"},
		{"up max receive 0", []string{"up", "--stack", "s", "--max-receive-count", "0"}, "--max-receive-count 0: want 1-1000"},
		{"up port and endpoint", []string{"up", "--stack", "s", "--port", "4567", "--endpoint", "http://localhost:4566"}, "--port is for the embedded emulator"},
		{"up port out of range", []string{"up", "--stack", "s", "--port", "-1"}, "--port -1: want 1-65535, or 0 for any free port"},
		{"up max receive too high", []string{"up", "--stack", "s", "--max-receive-count", "1001"}, "--max-receive-count 1001: want 1-1000"},
		{"bad flag value", []string{"demo", "--timeout", "soon"}, `invalid argument "soon"`},
		{"unknown command", []string{"nope"}, `unknown command "nope"`},
		{"bad output", []string{"jobs", "--status", "dead", "--stack", "s", "--output", "yaml"}, `--output "yaml": want table or json`},
		{"bad stack name", []string{"status", "j", "--stack", "my app"}, `--stack "my app": a stack name is 1-60 characters`},
		{"bad endpoint", []string{"status", "j", "--stack", "s", "--endpoint", "localhost"}, `--endpoint "localhost" is not a URL`},

		{"enqueue without stack", []string{"enqueue", "a.b", "{}"}, "enqueue needs --stack NAME"},
		{"enqueue without args", []string{"enqueue", "a.b", "--stack", "s"}, "enqueue needs KIND ARGS_JSON, missing ARGS_JSON"},
		{"enqueue extra argument", []string{"enqueue", "a.b", "{}", "x", "--stack", "s"}, "enqueue takes KIND ARGS_JSON, got 3 arguments"},
		{"enqueue bad kind", []string{"enqueue", "Email", "{}", "--stack", "s"}, `KIND: kind "Email": character 'E' at 0 is not allowed`},
		{"enqueue args not JSON", []string{"enqueue", "a.b", "{to:1}", "--stack", "s"}, "ARGS_JSON is not valid JSON: invalid character 't'"},
		{"enqueue args an array", []string{"enqueue", "a.b", "[1]", "--stack", "s"}, "ARGS_JSON is a JSON array: want a JSON object"},
		{"enqueue args empty", []string{"enqueue", "a.b", " ", "--stack", "s"}, "ARGS_JSON is empty"},
		{"enqueue negative delay", []string{"enqueue", "a.b", "{}", "--delay", "-1s", "--stack", "s"}, "--delay -1s is negative"},
		{"enqueue bad delay", []string{"enqueue", "a.b", "{}", "--delay", "soon", "--stack", "s"}, `invalid argument "soon" for "--delay"`},
		{"enqueue empty key", []string{"enqueue", "a.b", "{}", "--key", "", "--stack", "s"}, "--key is empty: leave it out to use the job id"},
		{"enqueue empty group", []string{"enqueue", "a.b", "{}", "--group", "", "--stack", "s"}, "--group is empty"},
		{"demo zero timeout", []string{"demo", "--timeout", "0s"}, "--timeout 0s: want a positive duration"},
		{"demo negative timeout", []string{"demo", "--timeout", "-1s"}, "--timeout -1s: want a positive duration"},
		{"enqueue max attempts 0", []string{"enqueue", "a.b", "{}", "--max-attempts", "0", "--stack", "s"}, "--max-attempts 0: must be at least 1"},

		{"status without stack", []string{"status", "j"}, "status needs --stack NAME"},
		{"status without job", []string{"status", "--stack", "s"}, "status needs JOB"},
		{"status bad kind", []string{"status", "Email/k", "--stack", "s"}, `JOB "Email/k": KIND/KEY: kind "Email"`},
		{"status empty key", []string{"status", "email.send/", "--stack", "s"}, "KIND/KEY: the key is empty"},

		{"jobs without stack", []string{"jobs", "--status", "dead"}, "jobs needs --stack NAME"},
		{"jobs without status", []string{"jobs", "--stack", "s"}, "jobs needs --status dead|retrying|scheduled|cancelled"},
		{"jobs unindexed status", []string{"jobs", "--status", "succeeded", "--stack", "s"}, `--status "succeeded": want dead, retrying, scheduled, cancelled`},
		{"jobs bad limit", []string{"jobs", "--status", "dead", "--limit", "0", "--stack", "s"}, "--limit 0: want 1-1000"},
		{"jobs bad kind", []string{"jobs", "--status", "dead", "--kind", "A", "--stack", "s"}, `--kind: kind "A"`},
		{"jobs argument", []string{"jobs", "dead", "--stack", "s"}, `jobs takes no arguments, got ["dead"]`},

		{"dlq unknown command", []string{"dlq", "peek", "--stack", "s"}, `unknown dlq command "peek"`},
		{"dlq list without stack", []string{"dlq", "list"}, "dlq list needs --stack NAME"},
		{"dlq list bad max", []string{"dlq", "list", "--max", "11", "--stack", "s"}, "--max 11: want 1-10"},
		{"dlq show without job", []string{"dlq", "show", "--stack", "s"}, "dlq show needs JOB_ID"},
		{"dlq redrive empty job", []string{"dlq", "redrive", "--job", "", "--stack", "s"}, "--job is empty"},
		{"dlq redrive argument", []string{"dlq", "redrive", "all", "--stack", "s"}, "redrive takes no arguments"},
		{"dlq purge without confirm", []string{"dlq", "purge", "--stack", "myapp"}, "dlq purge needs --confirm QUEUE_NAME, the name of the dead-letter queue (myapp-jobs-dlq, or myapp-jobs-dlq.fifo"},
		{"dlq purge without stack", []string{"dlq", "purge", "--confirm", "x"}, "dlq purge needs --stack NAME"},
	})
}

// usageCase is a command line the CLI must refuse as bad usage, and part of what it must say.
type usageCase struct {
	name string
	args []string
	want string
}

// checkUsageErrors runs each case in parallel: exit code 2, and stderr says want and points to
// --help.
func checkUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, &out, &errOut)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d (stderr: %s)", code, exitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) || !strings.Contains(errOut.String(), "--help") {
				t.Errorf("stderr = %q, want it to contain %q and point to --help", errOut.String(), tt.want)
			}
			// The message is the CLI's, not a library's; the hint names a command line that works.
			if strings.Contains(errOut.String(), "awslocal:") || strings.Contains(errOut.String(), "sqsworker  ") {
				t.Errorf("stderr = %q: a library's words, or a double space in the --help hint", errOut.String())
			}
		})
	}
}

// TestBareGroupsPrintHelp: every command group without a command (the root included) prints its
// help on stdout and exits 0, as gh and other cobra CLIs do, the same as with --help; a word
// that is none of its commands exits 2.
func TestBareGroupsPrintHelp(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"Usage:\n  sqsworker [command]", "Available Commands:", "outbox ", "version ", "Exit codes: 0 success, 1 failure, 2 bad command line."}},
		{[]string{"dlq"}, []string{"Usage:\n  sqsworker dlq [command]", "purge "}},
		{[]string{"schedules"}, []string{"Usage:\n  sqsworker schedules [command]", "pause ", "resume "}},
		{[]string{"outbox"}, []string{"Usage:\n  sqsworker outbox [command]", "retry "}},
	} {
		bare, help := runCLI(t, tt.args...), runCLI(t, append(tt.args, "--help")...)
		if bare.code != exitOK || bare.stderr != "" || bare.stdout != help.stdout || help.code != exitOK {
			t.Errorf("sqsworker %v: exit %d, stderr %q; want the --help text on stdout, exit 0", tt.args, bare.code, bare.stderr)
		}
		for _, want := range tt.want {
			if !strings.Contains(bare.stdout, want) {
				t.Errorf("sqsworker %v: the help lacks %q:\n%s", tt.args, want, bare.stdout)
			}
		}
		if len(tt.args) == 0 {
			continue
		}
		if r := runCLI(t, append(tt.args, "nope")...); r.code != exitUsage || !strings.Contains(r.stderr, `unknown `+tt.args[0]+` command "nope"`) {
			t.Errorf("sqsworker %v nope: exit %d, stderr %q; want exit 2, unknown command", tt.args, r.code, r.stderr)
		}
	}
	if r := runCLI(t, "nope"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "nope"`) {
		t.Errorf("sqsworker nope: exit %d, stderr %q", r.code, r.stderr)
	}
}

// result is what one run of the CLI printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs sqsworker with args (no endpoint, no stack: for help and usage).
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return result{out.String(), errOut.String(), code}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "version")
	if r.code != exitOK || !strings.Contains(r.stdout, "go         "+runtime.Version()) || !strings.Contains(r.stdout, "module     github.com/sqsworker/sqsworker") {
		t.Errorf("version: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	first := strings.SplitN(r.stdout, "\n", 2)[0]
	if v := runCLI(t, "--version"); v.code != exitOK || v.stdout != first+"\n" {
		t.Errorf("--version = %q (exit %d), want the first line of version, %q", v.stdout, v.code, first)
	}
	var doc versionJSON
	if j := runCLI(t, "version", "-o", "json"); j.code != exitOK || json.Unmarshal([]byte(j.stdout), &doc) != nil || doc.Go != runtime.Version() || doc.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version -o json: %+v (%s)", doc, j.stdout)
	}
	// What a build from a checkout records.
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/sqsworker/sqsworker", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-30T08:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	v := readVersion(bi, true)
	if v.Version != "v1.4.0" || v.Revision != "0123456789abcdef0123456789abcdef01234567" || !v.Modified || time.Time(v.Time).IsZero() {
		t.Errorf("readVersion = %+v", v)
	}
	if got, want := v.line(), "sqsworker v1.4.0 (0123456789ab, modified, go1.26.8 "+runtime.GOOS+"/"+runtime.GOARCH+")"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	if got := readVersion(nil, false).line(); !strings.Contains(got, "(unknown) (no revision recorded") {
		t.Errorf("line without build info = %q", got)
	}
}

func TestHelpHasExamples(t *testing.T) {
	t.Parallel()
	// Every command of the tree, found by walking it, so that a new command cannot go without.
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() && sub.Name() != "help" && sub.Name() != "completion" {
				walk(sub, append(append([]string{}, path...), sub.Name()))
			}
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	if len(paths) < 25 {
		t.Fatalf("walked %d commands", len(paths))
	}
	for _, path := range paths {
		args := append(append([]string{}, path...), "--help")
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		_, examples, ok := strings.Cut(out.String(), "Examples:\n")
		if !ok || !strings.Contains(examples, "sqsworker "+strings.Join(path, " ")) {
			t.Errorf("%v: help has no examples:\n%s", args, out.String())
		}
	}
}

// TestHelpNamesWhatExists: help texts name the stack output the CDK stack really publishes, and
// every command that runs the local schedule dispatcher.
func TestHelpNamesWhatExists(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"enqueue", "--help"}, "the CloudFormation stack's output JobsSchedulerRoleArn)"},
		{[]string{"schedules", "--help"}, "'sqsworker run' and\n'sqsworker demo' run it"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tt.args, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut.String())
		}
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("%v: help lacks %q:\n%s", tt.args, tt.want, out.String())
		}
	}
}

// TestUpServesTheEmbeddedEmulator: without an endpoint, up provisions the stack on the embedded
// emulator and keeps serving it until cancelled (it used to exit at once, taking the stack with
// it, without a word), at URLs another program can reach.
func TestUpServesTheEmbeddedEmulator(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"up", "--stack", "cli-up-test", "--fifo", "--port", "0"}, &out, &errOut)
	}()
	waitFor(t, 30*time.Second, "up's serving line", func() bool {
		select {
		case code := <-done:
			t.Fatalf("up exited with %d before it was cancelled:\n%s%s", code, out.String(), errOut.String())
		default:
		}
		return strings.Contains(out.String(), "until Ctrl-C")
	})
	for _, want := range []string{"cli-up-test-jobs.fifo", "cli-up-test-jobs-dlq.fifo", "(embedded)", "table     cli-up-test-jobs\n",
		"serving the embedded emulator at http://127.0.0.1:", "export AWS_ENDPOINT_URL=http://127.0.0.1:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Still serving: the stack is there for other programs.
	checkPrintedQueues(t, out.String())
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after cancel, want 0: %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not return within 30s of cancel")
	}
}

// TestUpAndRunPortInUse: a taken port is an error (1) that says what to do.
func TestUpAndRunPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, args := range [][]string{
		{"up", "--stack", "s", "--port", port},
		{"run", "--stack", "s", "--bootstrap", os.Args[0], "--port", port},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		for _, want := range []string{"localhost:" + port + " is taken by another program", "--endpoint http://localhost:" + port, "--port N"} {
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("%v: stderr lacks %q: %s", args, want, errOut.String())
			}
		}
		if code != exitError {
			t.Errorf("%v: exit %d, want %d", args, code, exitError)
		}
	}
}

// TestPortDefaultsTo4566: up and run serve where AWS_ENDPOINT_URL=http://localhost:4566 (and
// LocalStack's default) points.
func TestPortDefaultsTo4566(t *testing.T) {
	t.Parallel()
	for _, cmd := range []*cobra.Command{newUpCmd(&globals{}), newRunCmd(&globals{})} {
		if f := cmd.Flags().Lookup("port"); f == nil || f.DefValue != "4566" {
			t.Errorf("%s --port: %+v, want the default 4566", cmd.Name(), f)
		}
	}
}

// TestEnqueueStdinTooLarge: ARGS_JSON read from standard input beyond SQS's message size is a bad
// command line that says so (it used to be cut at the limit and reported as invalid JSON).
// TestEnqueueStdinTooLarge: args above what even a job sent through S3 may be are refused before
// any AWS call (args above an SQS message's size may be fine: the stack may have a payload
// bucket, TestPayloadGolden).
func TestEnqueueStdinTooLarge(t *testing.T) {
	t.Parallel()
	big := `{"x":"` + strings.Repeat("a", payload.DefaultMaxSize) + `"}`
	var out, errOut bytes.Buffer
	code := runWithInput(context.Background(), []string{"enqueue", "a.b", "-", "--stack", "s"}, strings.NewReader(big), &out, &errOut)
	if want := fmt.Sprintf("ARGS_JSON on standard input is larger than %d bytes", payload.DefaultMaxSize); code != exitUsage || !strings.Contains(errOut.String(), want) {
		t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut.String(), exitUsage, want)
	}
}
