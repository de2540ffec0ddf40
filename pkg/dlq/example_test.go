package dlq_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/dlq"
)

// Example inspects a dead-letter queue and redrives it, on the embedded emulator (which has no
// StartMessageMoveTask, so RedriveAll moves the messages itself).
func Example() {
	ctx := context.Background()
	backend, err := awslocal.Shared()
	if err != nil {
		log.Fatal(err)
	}
	client := sqs.NewFromConfig(backend.Config)
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example")})
	if err != nil {
		log.Fatal(err)
	}
	// A job the worker dead-lettered (normally with a sqsworker.failure attribute).
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(stack.DLQURL),
		MessageBody: aws.String(`{"v":1,"id":"job-1","kind":"email.send","args":{},"attempts_before":4}`),
	}); err != nil {
		log.Fatal(err)
	}

	d, err := dlq.New(dlq.Config{SQS: client, DLQURL: stack.DLQURL, SourceURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}
	msgs, err := d.Peek(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range msgs {
		fmt.Println(m.JobID, m.Kind, m.Reason)
	}
	res, err := d.RedriveAll(ctx, dlq.RedriveOptions{
		Progress: func(moved, total int) { fmt.Printf("moved %d of %d\n", moved, total) },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: moved %d of %d, left %d behind\n", res.Method, res.Moved, res.Total, res.LeftBehind)
	// Output:
	// job-1 email.send max_receive_count
	// moved 0 of 1
	// moved 1 of 1
	// receive-send-delete: moved 1 of 1, left 0 behind
}
