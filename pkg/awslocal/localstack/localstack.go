// Package localstack starts LocalStack in Docker, with testcontainers-go, as a backend of
// pkg/awslocal. Importing it registers the backend awslocal.LocalStack, so that
// SQSWORKER_BACKEND=localstack makes awslocal.Start and awslocal.Shared (and so every test of the
// repository, through awslocaltest) run against a LocalStack container of their own:
//
//	import _ "github.com/sqsworker/sqsworker/pkg/awslocal/localstack"
//
// It is a package of its own so that a program that uses only the embedded emulator does not
// depend on testcontainers-go and the Docker client. Docker is needed to use it.
package localstack

import (
	"context"
	"fmt"

	"github.com/testcontainers/testcontainers-go"
	tclocalstack "github.com/testcontainers/testcontainers-go/modules/localstack"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// Image is the LocalStack image started: the last one that runs without an auth token.
const Image = "localstack/localstack:4.14.0"

func init() { awslocal.Register(awslocal.LocalStack, start) }

// Start runs Image in Docker and returns a backend for it (Close removes the container). The
// error wraps awslocal.ErrNoDocker when no Docker engine answers. Region defaults as in
// awslocal.Options.
func Start(ctx context.Context, region string) (*awslocal.Backend, error) {
	return awslocal.Start(ctx, awslocal.Options{Backend: awslocal.LocalStack, Region: region})
}

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

// start runs Image and returns its edge endpoint and a function that stops it.
func start(ctx context.Context) (string, func(), error) {
	if ok, err := dockerAvailable(ctx); !ok {
		return "", nil, fmt.Errorf("%w (%v)", awslocal.ErrNoDocker, err)
	}
	c, err := tclocalstack.Run(ctx, Image)
	if err != nil {
		if c != nil {
			_ = testcontainers.TerminateContainer(c)
		}
		return "", nil, fmt.Errorf("localstack: start %s: %w", Image, err)
	}
	endpoint, err := c.PortEndpoint(ctx, "4566/tcp", "http")
	if err != nil {
		_ = testcontainers.TerminateContainer(c)
		return "", nil, fmt.Errorf("localstack: the endpoint of %s: %w", Image, err)
	}
	return endpoint, func() { _ = testcontainers.TerminateContainer(c) }, nil
}
