package awslocal_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// TestLocalStackBackend provisions the stack on LocalStack 4.14.0. It is opt-in: it runs with
// SQSWORKER_BACKEND=localstack and needs Docker (absent on the project's CI machine); the whole
// suite runs against LocalStack the same way, since every test takes its backend from Shared.
func TestLocalStackBackend(t *testing.T) {
	if os.Getenv(awslocal.BackendEnv) != string(awslocal.LocalStack) {
		t.Skipf("LocalStack tests are opt-in: set %s=localstack (Docker needed) to run them", awslocal.BackendEnv)
	}
	ctx := context.Background()
	b, err := awslocal.Start(ctx, awslocal.Options{})
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

func TestUnknownBackendIsAnError(t *testing.T) {
	t.Parallel()
	_, err := awslocal.Start(context.Background(), awslocal.Options{Backend: "mainframe"})
	if err == nil || err.Error() != `awslocal: unknown backend "mainframe" (want embedded, localstack or endpoint)` {
		t.Errorf("Start = %v", err)
	}
	_, err = awslocal.Start(context.Background(), awslocal.Options{Backend: awslocal.Endpoint})
	if err == nil && os.Getenv("AWS_ENDPOINT_URL") == "" {
		t.Error("the endpoint backend without an endpoint must be an error")
	}
}
