//go:build unix

package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBadConfigurationExits runs the real bootstrap with bad settings: one line per problem on
// stderr and exit status 1, before any Lambda call.
func TestBadConfigurationExits(t *testing.T) {
	bootstrap, _ := build.Build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Env = []string{"SQSWORKER_CONCURRENCY=0", "SQSWORKER_LOG_LEVEL=loud", "SQSWORKER_DEADLINE_MARGIN=soon", "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit = %v, want status 1\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, want := range []string{"SQSWORKER_CONCURRENCY", "SQSWORKER_LOG_LEVEL", "SQSWORKER_DEADLINE_MARGIN"} {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s is named on %d lines, want exactly 1:\n%s", want, n, out)
		}
	}
}
