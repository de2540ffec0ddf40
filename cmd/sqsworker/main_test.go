package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"demo", "--nope"}, "unknown flag: --nope"},
		{"extra argument", []string{"demo", "extra"}, `demo takes no arguments, got ["extra"]`},
		{"up without stack", []string{"up"}, "up needs --stack NAME"},
		{"bad flag value", []string{"demo", "--timeout", "soon"}, `invalid argument "soon"`},
	}
	for _, tt := range tests {
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
		})
	}
}

func TestHelpHasExamples(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"demo", "--help"}, {"up", "--help"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		if !strings.Contains(out.String(), "Examples:") {
			t.Errorf("%v: help has no examples:\n%s", args, out.String())
		}
	}
}

func TestUpProvisionsOnTheEmbeddedEmulator(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"up", "--stack", "cli-up-test", "--fifo"}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"cli-up-test-jobs.fifo", "cli-up-test-jobs-dlq.fifo", "embedded", "table     cli-up-test-jobs\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
