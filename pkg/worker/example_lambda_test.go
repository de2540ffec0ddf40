package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

// WelcomeEmail is the job of this example: its arguments, and its kind.
type WelcomeEmail struct {
	To string `json:"to"`
}

// Kind implements jobs.Args.
func (WelcomeEmail) Kind() string { return "email.welcome" }

var errMailboxFull = errors.New("452 mailbox full, try later")

// sendWelcome is the job's code: a temporary failure is retried after the kind's backoff, an
// address that cannot work is cancelled (straight to the DLQ, with the reason).
func sendWelcome(_ context.Context, job *jobs.Job[WelcomeEmail]) error {
	switch {
	case strings.HasSuffix(job.Args.To, ".invalid"):
		return jobs.Cancel(fmt.Errorf("no such domain: %s", job.Args.To))
	case strings.HasPrefix(job.Args.To, "full@"):
		return errMailboxFull
	}
	return nil // sent
}

// The main of a Lambda function that consumes a queue: the SQS event source mapping (with
// ReportBatchItemFailures) invokes it with batches of messages, and the handler answers with the
// partial batch response.
//
// In a function, main loads the AWS configuration from the environment and hands the handler
// to the Lambda runtime:
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	…
//	lambda.StartHandler(h)
//
// Here the embedded emulator stands in for AWS, and the example invokes the handler once the
// way lambda.StartHandler does, with the JSON payload of one batch.
func Example_lambda() {
	ctx := context.Background()
	backend, err := awslocal.Shared() // in a function: config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cfg := backend.Config
	client := sqs.NewFromConfig(cfg)

	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, jobs.WorkFunc[WelcomeEmail](sendWelcome), jobs.WithMaxAttempts(5))
	var outcomes []worker.Outcome
	h, err := worker.New(worker.Config{
		Registry: reg,
		SQS:      client,
		// QueueURL and DLQURL default to the event's source queue and its redrive target.
		OnBatch: func(_ context.Context, o []worker.Outcome) { outcomes = o },
		Logger:  slog.New(slog.DiscardHandler), // the default logs one JSON line per job
	})
	if err != nil {
		log.Fatal(err)
	}
	// lambda.StartHandler(h) in a function.

	// The rest plays Lambda's part: a queue with a DLQ, three jobs, one batch.
	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("example-lambda")})
	if err != nil {
		log.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: client, QueueURL: stack.QueueURL})
	if err != nil {
		log.Fatal(err)
	}
	for _, to := range []string{"ada@example.com", "full@example.com", "bob@example.invalid"} {
		if _, err := prod.Enqueue(ctx, WelcomeEmail{To: to}, producer.WithKey("welcome-"+to)); err != nil {
			log.Fatal(err)
		}
	}
	payload := receiveBatch(ctx, client, stack, 3)
	resp, err := h.Invoke(ctx, payload) // what lambda.StartHandler calls for each invocation
	if err != nil {
		log.Fatal(err)
	}
	var r events.SQSEventResponse
	if err := json.Unmarshal(resp, &r); err != nil {
		log.Fatal(err)
	}

	sort.Slice(outcomes, func(i, j int) bool { return outcomes[i].Key < outcomes[j].Key })
	for _, o := range outcomes {
		line := o.Key + ": " + o.Outcome
		if o.Reason != "" {
			line += " (" + o.Reason + ")"
		}
		if o.Failed {
			line += ", reported failed: Lambda leaves it on the queue"
		}
		fmt.Println(line)
	}
	fmt.Println("batch item failures:", len(r.BatchItemFailures))
	// Output:
	// welcome-ada@example.com: succeeded
	// welcome-bob@example.invalid: dead_lettered (cancelled)
	// welcome-full@example.com: retry, reported failed: Lambda leaves it on the queue
	// batch item failures: 1
}

// receiveBatch receives n messages from the stack's queue and returns them as the payload of
// a Lambda SQS event, as the event source mapping sends it.
func receiveBatch(ctx context.Context, client *sqs.Client, stack *awslocal.Stack, n int) []byte {
	var ev events.SQSEvent
	for len(ev.Records) < n {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(stack.QueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range out.Messages {
			rec := events.SQSMessage{
				MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes,
				MessageAttributes: map[string]events.SQSMessageAttribute{},
				EventSource:       "aws:sqs", EventSourceARN: stack.QueueARN, AWSRegion: "us-east-1",
			}
			for k, v := range m.MessageAttributes {
				rec.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue, BinaryValue: v.BinaryValue}
			}
			ev.Records = append(ev.Records, rec)
		}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		log.Fatal(err)
	}
	return payload
}
