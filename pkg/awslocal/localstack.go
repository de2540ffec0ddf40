package awslocal

import (
	"context"
	"errors"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/localstack"
)

// LocalStack is LocalStack in Docker, started with testcontainers-go.
const LocalStack Kind = "localstack"

// LocalStackImage is the LocalStack image used: the last one that runs without an auth token.
const LocalStackImage = "localstack/localstack:4.14.0"

// BackendEnv names the environment variable that selects the backend of Start and Shared:
// "embedded" (the default), "localstack" (Docker needed), or "endpoint" (AWS_ENDPOINT_URL).
const BackendEnv = "SQSWORKER_BACKEND"

// ErrNoDocker is returned when LocalStack is asked for and no Docker engine answers.
var ErrNoDocker = errors.New("awslocal: LocalStack needs a running Docker engine, and none answers")

// dockerAvailable reports whether a Docker engine answers, without panicking when none is set up.
func dockerAvailable(ctx context.Context) (ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("%v", r)
		}
	}()
	provider, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return false, err
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return false, err
	}
	return true, nil
}

// startLocalStack runs LocalStackImage and returns its edge endpoint and a function that stops it.
func startLocalStack(ctx context.Context) (string, func(), error) {
	if ok, err := dockerAvailable(ctx); !ok {
		return "", nil, fmt.Errorf("%w (%v)", ErrNoDocker, err)
	}
	c, err := localstack.Run(ctx, LocalStackImage)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return "", nil, fmt.Errorf("awslocal: start %s: %w", LocalStackImage, err)
	}
	endpoint, err := c.PortEndpoint(ctx, "4566/tcp", "http")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", nil, fmt.Errorf("awslocal: LocalStack endpoint: %w", err)
	}
	return endpoint, func() { _ = testcontainers.TerminateContainer(c) }, nil
}
