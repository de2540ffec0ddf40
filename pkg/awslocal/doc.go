// Package awslocal gives tests, the CLI and local runs an AWS backend: the embedded emulator
// (github.com/sivchari/kumo, in-process) by default, or any endpoint named by AWS_ENDPOINT_URL
// (LocalStack, another emulator, or a real account). LocalStack in Docker is the package
// pkg/awslocal/localstack, which registers itself (see Register), so that this package does not
// depend on testcontainers-go and the Docker client.
//
//	backend, err := awslocal.Shared() // one per process; Start for one of your own
//	…
//	client := sqs.NewFromConfig(backend.Config)
//	stack, err := awslocal.Provision(ctx, client, awslocal.StackOptions{Name: awslocal.UniqueName("test")})
//	// stack.QueueURL, stack.DLQURL: a queue and its DLQ with a redrive policy
//
// It needs neither Docker nor an AWS account, and never asks the EC2 instance metadata service
// for credentials on an endpoint that is not AWS's. The emulator accepts some requests AWS
// refuses; the known gaps are listed in docs/ARCHITECTURE.md §6, and code must follow AWS's
// rules, not the emulator's. One gap the embedded backend's clients guard against: the emulator
// substitutes DynamoDB expression attribute names as text, so a placeholder that begins another
// (#p beside #pk) is misread some of the time; such a request fails at once, every time, with
// ErrPlaceholderPrefix.
//
// It is never imported by a library package or a Lambda function: production code receives its
// aws.Config from the caller.
package awslocal
