package localstack_test

import (
	"context"
	"log"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	_ "github.com/sqsworker/sqsworker/pkg/awslocal/localstack" // registers awslocal.LocalStack
)

// With the package imported, awslocal starts LocalStack in a Docker container of its own, when
// asked by Options.Backend or by SQSWORKER_BACKEND=localstack. It needs Docker, so it is compiled
// here, not run (make localstack-test runs the repository's tests on it).
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Start(ctx, awslocal.Options{Backend: awslocal.LocalStack})
	if err != nil {
		log.Fatal(err) // errors.Is(err, awslocal.ErrNoDocker) without a Docker engine
	}
	defer backend.Close()
	stack, err := awslocal.Provision(ctx, sqs.NewFromConfig(backend.Config), awslocal.StackOptions{Name: "myapp"})
	if err != nil {
		log.Fatal(err)
	}
	log.Println("queue", stack.QueueURL)
}
