// Package awslocaltest gives tests the shared backend of pkg/awslocal, skipping them with a clear
// message when SQSWORKER_BACKEND=localstack was asked for and no Docker engine answers. It links
// the LocalStack backend (pkg/awslocal/localstack) into every test binary that uses it, so that
// the whole suite can run on LocalStack.
package awslocaltest

import (
	"errors"
	"testing"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	_ "github.com/sqsworker/sqsworker/pkg/awslocal/localstack" // SQSWORKER_BACKEND=localstack
)

// Backend returns awslocal.Shared(). When LocalStack was asked for (SQSWORKER_BACKEND=localstack)
// and Docker is absent, the test is skipped and says so; any other failure fails the test.
func Backend(tb testing.TB) *awslocal.Backend {
	tb.Helper()
	b, err := awslocal.Shared()
	if errors.Is(err, awslocal.ErrNoDocker) {
		tb.Skipf("skipped: %s=localstack needs Docker: %v", awslocal.BackendEnv, err)
	}
	if err != nil {
		tb.Fatalf("backend: %v", err)
	}
	return b
}
