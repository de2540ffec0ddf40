package awslocaltest_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
)

// A test that needs AWS: the embedded emulator by default, LocalStack with
// SQSWORKER_BACKEND=localstack (skipped, with the reason, when no Docker engine answers), or
// AWS_ENDPOINT_URL.
func ExampleBackend() {
	testQueue := func(t *testing.T) *awslocal.Stack {
		client := sqs.NewFromConfig(awslocaltest.Backend(t).Config)
		stack, err := awslocal.Provision(t.Context(), client, awslocal.StackOptions{Name: awslocal.UniqueName(t.Name())})
		if err != nil {
			t.Fatal(err)
		}
		return stack
	}
	_ = testQueue // in a test: stack := testQueue(t)
}
