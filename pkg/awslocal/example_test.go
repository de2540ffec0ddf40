package awslocal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// A test's queue and DLQ on the embedded emulator (or on AWS_ENDPOINT_URL, or LocalStack with
// SQSWORKER_BACKEND=localstack): no account, no Docker.
func ExampleProvision() {
	ctx := context.Background()
	backend, err := awslocal.Shared() // one backend per test binary; Start for one of your own
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	name := awslocal.UniqueName("example") // the emulator's state is shared: unique names
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: name})
	if err != nil {
		log.Fatal(err)
	}

	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(stack.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		log.Fatal(err)
	}
	short := func(url string) string { return strings.Replace(path.Base(url), name, "<name>", 1) }
	fmt.Println("queue", short(stack.QueueURL), "dead-letters to", short(stack.DLQURL))
	var redrive struct {
		MaxReceiveCount any `json:"maxReceiveCount"` // a number, or a string of digits on some backends
	}
	if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &redrive); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after", redrive.MaxReceiveCount, "receives (3 × the default MaxAttempts)")
	// Output:
	// queue <name>-jobs dead-letters to <name>-jobs-dlq
	// after 15 receives (3 × the default MaxAttempts)
}
