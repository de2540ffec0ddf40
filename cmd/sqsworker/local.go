package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
)

// defaultPort is the port `up` and `run` serve the embedded emulator on: LocalStack's, so that
// AWS_ENDPOINT_URL=http://localhost:4566 reaches either.
const defaultPort = 4566

// addPortFlag adds --port to a command that may start the embedded emulator.
func addPortFlag(cmd *cobra.Command, port *int) {
	cmd.Flags().IntVar(port, "port", defaultPort, "the localhost port the embedded emulator listens on (0: any free port); not with --endpoint")
}

// endpointOf returns --endpoint, else AWS_ENDPOINT_URL ("" when neither is set).
func endpointOf(g *globals) string {
	if g.endpoint != "" {
		return g.endpoint
	}
	return os.Getenv("AWS_ENDPOINT_URL")
}

// startLocal returns the backend of a command that provisions a stack (up, run): the endpoint
// given by --endpoint or AWS_ENDPOINT_URL, else the embedded emulator, started in this process
// on --port. SQSWORKER_BACKEND is for tests and is not read here.
func startLocal(ctx context.Context, cmd *cobra.Command, g *globals, port int) (*awslocal.Backend, error) {
	portSet := cmd.Flags().Changed("port")
	if endpoint := endpointOf(g); endpoint != "" {
		if portSet {
			return nil, &usageError{fmt.Errorf("--port is for the embedded emulator, and the endpoint %s is given (by --endpoint or AWS_ENDPOINT_URL): drop one of them", endpoint)}
		}
		if u, err := url.Parse(endpoint); err != nil || u.Scheme == "" || u.Host == "" {
			return nil, &usageError{fmt.Errorf("--endpoint %q is not a URL (want one such as http://localhost:4566)", endpoint)}
		}
		return awslocal.Start(ctx, awslocal.Options{Backend: awslocal.Endpoint, Endpoint: endpoint, Region: g.region})
	}
	if port < 0 || port > 65535 {
		return nil, &usageError{fmt.Errorf("--port %d: want 1-65535, or 0 for any free port", port)}
	}
	// Listen: on its own port (--port 0 too), answering only requests addressed to this machine,
	// so that no web page in the developer's browser drives it (DNS rebinding, cross-site requests).
	b, err := awslocal.Start(ctx, awslocal.Options{Backend: awslocal.Embedded, Region: g.region, Port: port, Listen: true})
	if errors.Is(err, awslocal.ErrPortInUse) {
		return nil, fmt.Errorf("localhost:%d is taken by another program\n  is an emulator (another `sqsworker run` or `sqsworker up`, kumo, LocalStack) serving there? "+
			"Use it with --endpoint http://localhost:%d, or pass --port N for another port (0: any free one)", port, port)
	}
	return b, err
}
