// Command hello is the smallest Go Lambda function, built exactly like the sqsworker functions
// (-tags lambda.norpc, -trimpath, -ldflags='-s -w'): the baseline of the cold-start benchmark
// (functions/coldstart_test.go).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.StartHandler(lambda.NewHandler(func(context.Context) (string, error) { return "hello", nil }))
}
