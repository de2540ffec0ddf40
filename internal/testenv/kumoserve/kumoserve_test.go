package kumoserve

import (
	"context"
	"debug/buildinfo"
	"os"
	"os/exec"
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
// version asked for, or a (devel) build of kumo in the cache directory named after that version.
// The (devel) cases use a stub whose main module is named like kumo's, built here in seconds;
// the exact-version case needs a real kumo binary (an installed `kumo` or KUMO_BIN) and is
// checked when there is one (Binary may fall back to kumod, which is not kumo).
func TestIsVersion(t *testing.T) {
	mod, err := required()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stub := buildStubKumo(t)
	inCache := copyTo(t, stub, filepath.Join(t.TempDir(), "kumo-"+mod.Version, "kumo"))
	inOtherCache := copyTo(t, stub, filepath.Join(t.TempDir(), "kumo-v0.0.1", "kumo"))
	elsewhere := copyTo(t, stub, filepath.Join(t.TempDir(), "kumo"))
	notAGoBinary := filepath.Join(t.TempDir(), "kumo")
	if err := os.WriteFile(notAGoBinary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, path, version, wantErr string
	}{
		{"a (devel) build in the version's cache directory", inCache, mod.Version, ""},
		{"a (devel) build in another version's cache directory", inOtherCache, mod.Version, "is kumo (devel)"},
		{"a (devel) build outside the cache directory", elsewhere, mod.Version, "is kumo (devel)"},
		{"a test binary, not kumo", self, mod.Version, "is not kumo"},
		{"not a Go binary", notAGoBinary, mod.Version, notAGoBinary},
	}
	if bin, err := Binary(); err == nil {
		if info, err := buildinfo.ReadFile(bin); err == nil && info.Main.Path == modulePath && info.Main.Version == mod.Version {
			tests = append(tests,
				struct{ name, path, version, wantErr string }{"the installed kumo", bin, mod.Version, ""},
				struct{ name, path, version, wantErr string }{"the installed kumo, another version asked", bin, "v0.0.1", "want v0.0.1"})
		} else {
			t.Logf("Binary() is %s, not a kumo %s release build: the exact-version case is not checked", bin, mod.Version)
		}
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

// buildStubKumo builds a do-nothing program whose main module path is kumo's, so that its build
// information says github.com/sivchari/kumo (devel).
func buildStubKumo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "stub")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the stub: %v\n%s", err, out)
	}
	if v, err := readMainVersion(bin); err != nil || v != "(devel)" {
		t.Fatalf("the stub's main version = %q, %v; want (devel)", v, err)
	}
	return bin
}

func copyTo(t *testing.T, src, dst string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

func readMainVersion(path string) (string, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", err
	}
	return info.Main.Version, nil
}
