package kumoserve

import (
	"context"
	"debug/buildinfo"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// TestStartServesSQSAndStops starts `kumo serve`, creates a queue through it with the SDK, and
// checks that Stop ends the process.
func TestStartServesSQSAndStops(t *testing.T) {
	s := Start(t)
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Fatalf("URL = %q, want http://127.0.0.1:<port>", s.URL)
	}
	cfg, err := awslocal.NewConfig(t.Context(), s.URL, awslocal.DefaultRegion, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	out, err := client.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("kumoserve-test")})
	if err != nil {
		t.Fatalf("CreateQueue on %s: %v", s.URL, err)
	}
	if !strings.HasSuffix(aws.ToString(out.QueueUrl), "/kumoserve-test") {
		t.Errorf("QueueUrl = %q", aws.ToString(out.QueueUrl))
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	default:
		t.Fatal("the process is still running after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop = %v, want nil", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := client.ListQueues(ctx, &sqs.ListQueuesInput{}, func(o *sqs.Options) { o.RetryMaxAttempts = 1 }); err == nil {
		t.Error("the server still answers after Stop")
	}
}

// TestIsVersion: a binary is accepted only when its build information says it is kumo of the
// version asked for, or a build of ours in the cache directory named after that version.
func TestIsVersion(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("skipped: needs the kumo binary: %v", err)
	}
	mod, err := required()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the binary under a directory that does not name the version.
	elsewhere := filepath.Join(t.TempDir(), "kumo")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere, data, 0o755); err != nil {
		t.Fatal(err)
	}
	notAGoBinary := filepath.Join(t.TempDir(), "kumo")
	if err := os.WriteFile(notAGoBinary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path, version, wantErr string
	}{
		{"the binary Binary returns", bin, mod.Version, ""},
		{"another version", bin, "v0.0.1", "want v0.0.1"},
		{"a test binary, not kumo", self, mod.Version, "is not kumo"},
		{"not a Go binary", notAGoBinary, mod.Version, notAGoBinary},
	}
	if info, err := readMainVersion(bin); err == nil && info == "(devel)" {
		tests = append(tests, struct{ name, path, version, wantErr string }{
			"a (devel) build outside the cache directory", elsewhere, mod.Version, "is kumo (devel)",
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := isVersion(tt.path, tt.version)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("isVersion = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("isVersion = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func readMainVersion(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	return info.Main.Version, nil
}
