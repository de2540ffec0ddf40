package awslocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/sivchari/kumo"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/internal/sdkhttp"
)

// DefaultRegion is the region used for the embedded emulator and when none is configured.
const DefaultRegion = "us-east-1"

// Kind names a backend.
type Kind string

// The backends a Backend can be.
const (
	// Embedded is the in-process emulator (no network, no Docker).
	Embedded Kind = "embedded"
	// Endpoint is any AWS-compatible endpoint given by AWS_ENDPOINT_URL or Options.Endpoint.
	Endpoint Kind = "endpoint"
)

// Backend is a running AWS backend and the configuration to reach it.
type Backend struct {
	// Kind says which backend this is.
	Kind Kind
	// URL is the endpoint every client uses.
	URL string
	// Config is ready for sqs.NewFromConfig, dynamodb.NewFromConfig, and so on.
	Config aws.Config

	close func()
}

// Options configures Start. The zero value starts the embedded emulator unless AWS_ENDPOINT_URL is
// set, or SQSWORKER_BACKEND asks for another backend.
type Options struct {
	// Backend selects the backend. Defaults to SQSWORKER_BACKEND, then to Endpoint when an endpoint
	// is known, else Embedded.
	Backend Kind
	// Endpoint overrides AWS_ENDPOINT_URL. Defaults to the environment variable, then to the
	// embedded emulator.
	Endpoint string
	// Region defaults to AWS_REGION, then to DefaultRegion.
	Region string
	// Port, for the embedded emulator, is the loopback port it listens on (127.0.0.1 and, where
	// the system has IPv6, ::1), so that other programs reach it at http://localhost:Port, which
	// is then the backend's URL; it answers there only requests addressed to this machine
	// (Listen). Defaults to 0: a free port the system picks (URL http://127.0.0.1:N). A port taken
	// by another program gives an error wrapping ErrPortInUse.
	Port int
	// Listen, for the embedded emulator, serves it on a loopback port of this package's own
	// (Port, or a free one when Port is 0) that answers only requests addressed to this machine:
	// a Host header naming localhost (or a name under .localhost) or a loopback address, and no
	// Origin or Sec-Fetch-Site header of a web page of another site. Anything else gets 403
	// Forbidden with the reason: a page in the developer's browser cannot drive the emulator by
	// DNS rebinding or by cross-site requests. Programs that serve the emulator to others (the
	// CLI's up, run and demo) set it; a Port other than 0 implies it. Defaults to false with Port
	// 0: clients reach the emulator's own listener (a random port), as tests do.
	Listen bool
	// MaxIdleConnsPerHost sizes the HTTP client's idle pool. Defaults to 64, enough for the
	// concurrency a local run uses (the SDK's default keeps too few and reconnects constantly).
	MaxIdleConnsPerHost int
}

// Start returns a backend. Close it when done.
func Start(ctx context.Context, opts Options) (*Backend, error) {
	endpoint := opts.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("AWS_ENDPOINT_URL")
	}
	region := opts.Region
	if region == "" {
		region = os.Getenv("AWS_REGION")
	}
	if region == "" {
		region = DefaultRegion
	}
	kind := opts.Backend
	if kind == "" {
		kind = Kind(os.Getenv(BackendEnv))
	}
	if kind == "" {
		kind = Embedded
		if endpoint != "" {
			kind = Endpoint
		}
	}
	if (opts.Port != 0 || opts.Listen) && kind != Embedded {
		return nil, fmt.Errorf("awslocal: Options.Port and Options.Listen are for the embedded emulator, not the %s backend", kind)
	}
	b := &Backend{Kind: kind, URL: endpoint, close: func() {}}
	switch kind {
	case Embedded:
		srvURL := embeddedServer()
		b.URL = srvURL
		if opts.Port != 0 || opts.Listen {
			// kumo listens where httptest puts it, and answers whatever reaches it; the loopback
			// server gives it the port asked for, and turns away what is not for this machine.
			u, err := url.Parse(srvURL)
			if err != nil {
				return nil, fmt.Errorf("awslocal: the embedded emulator's URL %q: %w", srvURL, err)
			}
			l, err := listenLoopback(opts.Port, u.Host)
			if err != nil {
				return nil, err
			}
			b.URL = "http://localhost:" + strconv.Itoa(l.port)
			if opts.Port == 0 {
				b.URL = "http://127.0.0.1:" + strconv.Itoa(l.port) // ::1 may not have that port
			}
			b.close = l.close
		}
	case Endpoint:
		if endpoint == "" {
			return nil, fmt.Errorf("awslocal: backend %q needs AWS_ENDPOINT_URL or Options.Endpoint", kind)
		}
	default:
		start := starter(kind)
		switch {
		case start == nil && kind == LocalStack:
			return nil, fmt.Errorf("awslocal: backend %q is not linked into this program: import _ %q (Docker needed)", kind, LocalStackPackage)
		case start == nil:
			return nil, fmt.Errorf("awslocal: unknown backend %q (want %s, %s or %s)", kind, Embedded, LocalStack, Endpoint)
		}
		url, stop, err := start(ctx)
		if err != nil {
			return nil, err
		}
		b.URL, b.close = url, stop
	}
	cfg, err := NewConfig(ctx, b.URL, region, opts.MaxIdleConnsPerHost, b.Kind != Endpoint)
	if err != nil {
		b.close()
		return nil, err
	}
	if kind == Embedded {
		cfg.APIOptions = append(cfg.APIOptions, guardPlaceholders) // see exprnames.go
	}
	b.Config = cfg
	return b, nil
}

// NewConfig builds an aws.Config that talks to endpoint. With static set (the embedded emulator
// and LocalStack), fixed test credentials are used; otherwise the default credential chain applies,
// falling back to test credentials only when it finds none (emulators accept any). On an endpoint
// that is not AWS's own, the chain never asks the EC2 instance metadata service: off EC2 that
// costs a timeout or, where something answers 169.254.169.254, a warning on every command
// ("falling back to IMDSv1"), and an emulator's credentials are never there.
func NewConfig(ctx context.Context, endpoint, region string, maxIdle int, static bool) (aws.Config, error) {
	if maxIdle <= 0 {
		maxIdle = 64
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConns = maxIdle * 2
		tr.MaxIdleConnsPerHost = maxIdle
	}).WithDialerOptions(func(d *net.Dialer) { d.Timeout = 5 * time.Second })
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithHTTPClient(httpClient),
	}
	if static {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	if endpoint != "" && !awsendpoint.IsAWS(endpoint) {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awslocal: load AWS config: %w", err)
	}
	// Every client built from this config keeps its connection under a response being read (see
	// internal/sdkhttp): local servers answer fast enough to lose answers to the SDK's race, and a
	// lost receive hides its messages for their visibility timeout. Wrapped after loading, which
	// needs the buildable client itself (AWS_CA_BUNDLE).
	cfg.HTTPClient = sdkhttp.KeepConnection(cfg.HTTPClient)
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
		if !static {
			if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
				cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
			}
		}
	}
	return cfg, nil
}

// Close stops serving the backend: the embedded emulator's port (Options.Port, Options.Listen)
// is closed. The in-process emulator behind it lives as long as the process (see
// embeddedServer). A no-op for other backends.
func (b *Backend) Close() {
	if b != nil && b.close != nil {
		b.close()
	}
}

var (
	embeddedOnce sync.Once
	embeddedURL  string
)

// embeddedServer returns the URL of the process's one in-process emulator, started on first use
// and never closed. Every embedded Backend of the process is served by it: the emulator keeps
// its state in process-wide services anyway (two servers see the same queues and tables), and a
// second server's constructor rewires those services while the first one serves them (kumo's S3
// notifications read what the constructor writes: a data race -race reports).
func embeddedServer() string {
	embeddedOnce.Do(func() { embeddedURL = kumo.NewServer().URL })
	return embeddedURL
}

var (
	sharedOnce sync.Once
	shared     *Backend
	sharedErr  error
)

// Shared returns one embedded (or AWS_ENDPOINT_URL) backend per process, for tests. It is never
// closed; the process exit ends it. Use unique resource names (UniqueName) per test, since the
// emulator's state is shared.
func Shared() (*Backend, error) {
	sharedOnce.Do(func() { shared, sharedErr = Start(context.Background(), Options{}) })
	return shared, sharedErr
}

// errNoName is returned when a stack name is empty or invalid.
var errNoName = errors.New("awslocal: stack name must be 1-60 characters of [A-Za-z0-9_-]")

func validStackName(s string) error {
	if s == "" || len(s) > 60 {
		return errNoName
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return errNoName
		}
	}
	return nil
}

var uniqueSeq struct {
	sync.Mutex
	n int
}

// UniqueName returns prefix followed by a suffix unique within this process and time, short
// enough for an SQS queue name with ".fifo" and "-dlq" appended.
func UniqueName(prefix string) string {
	uniqueSeq.Lock()
	uniqueSeq.n++
	n := uniqueSeq.n
	uniqueSeq.Unlock()
	prefix = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, prefix)
	if len(prefix) > 30 {
		prefix = prefix[:30]
	}
	return fmt.Sprintf("%s-%x-%d", prefix, time.Now().UnixNano()&0xffffffffff, n)
}
