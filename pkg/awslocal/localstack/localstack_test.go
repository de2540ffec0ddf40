package localstack_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/localstack"
)

// TestLocalStackBackend provisions the stack on LocalStack 4.14.0. It is opt-in: it runs with
// SQSWORKER_BACKEND=localstack and needs Docker (absent on the project's CI machine); the whole
// suite runs against LocalStack the same way, since every test takes its backend from Shared.
func TestLocalStackBackend(t *testing.T) {
	if os.Getenv(awslocal.BackendEnv) != string(awslocal.LocalStack) {
		t.Skipf("LocalStack tests are opt-in: set %s=localstack (Docker needed) to run them", awslocal.BackendEnv)
	}
	ctx := context.Background()
	b, err := localstack.Start(ctx, "")
	if errors.Is(err, awslocal.ErrNoDocker) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Kind != awslocal.LocalStack {
		t.Fatalf("backend kind = %s", b.Kind)
	}
	if _, err := awslocal.Provision(ctx, sqs.NewFromConfig(b.Config), awslocal.StackOptions{Name: "ls-test"}); err != nil {
		t.Fatal(err)
	}
}

// TestStartWithoutDockerSaysSo: where no Docker engine answers (this project's CI machine), the
// registered backend fails with awslocal.ErrNoDocker, which tests turn into a skip.
func TestStartWithoutDockerSaysSo(t *testing.T) {
	if os.Getenv(awslocal.BackendEnv) == string(awslocal.LocalStack) {
		t.Skip("LocalStack was asked for: TestLocalStackBackend covers it")
	}
	// An engine that cannot answer, whatever this machine has.
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	_, err := awslocal.Start(t.Context(), awslocal.Options{Backend: awslocal.LocalStack})
	if !errors.Is(err, awslocal.ErrNoDocker) {
		t.Errorf("Start = %v, want an error wrapping ErrNoDocker", err)
	}
}
