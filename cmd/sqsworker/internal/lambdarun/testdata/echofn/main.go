// Command echofn is a test Lambda function: it reports the SQS messages whose body contains
// "fail" as batch item failures, fails the whole invoke for a body "error", and for a body
// "checkenv" fails the message unless SQSWORKER_QUEUE_URL and AWS_ENDPOINT_URL are set;
// "sleep" sleeps 5 s.
package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		fail := strings.Contains(m.Body, "fail")
		if m.Body == "sleep" {
			time.Sleep(5 * time.Second) // past the test's function timeout
		}
		if m.Body == "error" {
			return resp, errors.New("echofn: asked to fail")
		}
		if m.Body == "checkenv" && (os.Getenv("SQSWORKER_QUEUE_URL") == "" || os.Getenv("AWS_ENDPOINT_URL") == "") {
			fail = true
		}
		if fail {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

func main() { lambda.Start(handle) }
