package poller_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sqsworker/sqsworker/internal/awsendpoint"
	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/poller"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/worker"
)

type tickArgs struct {
	N int `json:"n"`
}

func (tickArgs) Kind() string { return "conn.tick" }

// connRun is the container's setup (examples/container) on the embedded emulator: a poller with
// concurrency slots over a worker.Handler at its default job concurrency, with the DynamoDB job
// table (a claim and a finish per job), all through one SDK HTTP client, as
// config.LoadDefaultConfig builds it: hc, with its dials counted. It runs until n jobs ran and
// returns the connections dialled.
func connRun(tb testing.TB, hc *awshttp.BuildableClient, concurrency, n int) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	backend, err := awslocal.Shared()
	if err != nil {
		tb.Fatal(err)
	}
	name := awslocal.UniqueName("conns")
	seed := sqs.NewFromConfig(backend.Config)
	st, err := awslocal.Provision(ctx, seed, awslocal.StackOptions{Name: name})
	if err != nil {
		tb.Fatal(err)
	}
	table, err := awslocal.ProvisionTable(ctx, backend.DynamoDB(), name)
	if err != nil {
		tb.Fatal(err)
	}
	prod, err := producer.New(producer.Config{SQS: seed, QueueURL: st.QueueURL})
	if err != nil {
		tb.Fatal(err)
	}
	for start := 0; start < n; start += 100 {
		reqs := make([]producer.Request, 0, 100)
		for i := start; i < min(start+100, n); i++ {
			reqs = append(reqs, producer.Request{Args: tickArgs{N: i}})
		}
		if _, err := prod.EnqueueBatch(ctx, reqs); err != nil {
			tb.Fatal(err)
		}
	}

	var dials atomic.Int64
	hc = hc.WithTransportOptions(func(tr *http.Transport) {
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
	})
	defer hc.GetTransport().CloseIdleConnections()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(awslocal.DefaultRegion), config.WithHTTPClient(hc),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.BaseEndpoint = aws.String(backend.URL)
	client := sqs.NewFromConfig(cfg)
	store, err := idempotency.NewDynamoDBStore(idempotency.DynamoDBConfig{Client: dynamodb.NewFromConfig(cfg, awsendpoint.DynamoDB(cfg)), Table: table})
	if err != nil {
		tb.Fatal(err)
	}
	mw, err := idempotency.NewMiddleware(idempotency.MiddlewareConfig{Store: store})
	if err != nil {
		tb.Fatal(err)
	}
	var ran atomic.Int64
	done := make(chan struct{})
	reg := jobs.NewRegistry()
	if err := jobs.Register(reg, jobs.WorkFunc[tickArgs](func(context.Context, *jobs.Job[tickArgs]) error {
		if ran.Add(1) == int64(n) {
			close(done)
		}
		return nil
	})); err != nil {
		tb.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := worker.New(worker.Config{Registry: reg, SQS: client, QueueURL: st.QueueURL, DLQURL: st.DLQURL,
		Middleware: []worker.Middleware{mw}, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := poller.New(poller.Config{SQS: client, QueueURL: st.QueueURL, Handler: h, Concurrency: concurrency,
		WaitTime: time.Second, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(runCtx) }()
	select {
	case <-done:
	case <-ctx.Done():
		tb.Fatalf("%d of %d jobs ran before the deadline", ran.Load(), n)
	}
	stop()
	if err := <-stopped; err != nil {
		tb.Fatal(err)
	}
	return dials.Load()
}

// With the pool sized by IdleConnsPerHost, a poller at Concurrency 4 over the worker's default
// job concurrency dials about as many connections as it keeps busy at once, then none per job;
// with the SDK's default pool (10 per host) the same run dials hundreds, a new one for most calls
// beyond the 10th in flight (docs/BENCHMARKS.md, "Connections": 3,025 per 5,000 jobs against 52).
// The bound is twice the pool: a request that finds no idle connection dials one even when
// another comes free first, so a warm pool may overflow by a few, but never per job.
func TestSizedPoolReusesConnections(t *testing.T) {
	const concurrency, n = 4, 600
	idle := poller.IdleConnsPerHost(concurrency, worker.DefaultConcurrency)
	if idle != 48 {
		t.Errorf("IdleConnsPerHost(4, 10) = %d, want 48", idle)
	}
	sized := connRun(t, poller.HTTPClient(idle), concurrency, n)
	sdk := connRun(t, awshttp.NewBuildableClient(), concurrency, n)
	t.Logf("%d jobs: %d connections dialled with a pool of %d per host, %d with the SDK's default 10", n, sized, idle, sdk)
	if sized > int64(2*idle) {
		t.Errorf("%d connections dialled for %d jobs with a pool of %d, want at most %d", sized, n, idle, 2*idle)
	}
	if sdk <= int64(2*idle) {
		t.Errorf("the SDK's default pool dialled %d connections for %d jobs: this run is not the one that churns (want more than %d)", sdk, n, 2*idle)
	}
}

func TestHTTPClientSizesThePool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, perHost, all int }{
		{48, 48, 100}, {64, 64, 128}, {1, 10, 100}, {0, 10, 100},
	} {
		tr := poller.HTTPClient(tc.n).GetTransport()
		if tr.MaxIdleConnsPerHost != tc.perHost || tr.MaxIdleConns != tc.all {
			t.Errorf("HTTPClient(%d): %d per host, %d in all; want %d and %d", tc.n, tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tc.perHost, tc.all)
		}
		if tr.Proxy == nil || tr.TLSClientConfig == nil || tr.IdleConnTimeout == 0 {
			t.Errorf("HTTPClient(%d) lost the SDK's other defaults: %+v", tc.n, tr)
		}
	}
	if got := poller.IdleConnsPerHost(1, 1); got != 3 {
		t.Errorf("IdleConnsPerHost(1, 1) = %d, want 3", got)
	}
}

// BenchmarkConnections counts the connections a poller and its worker dial per 5,000 jobs with
// the SDK's default pool and with the pool IdleConnsPerHost sizes:
//
//	go test -run '^$' -bench Connections -benchtime 5000x ./pkg/poller
func BenchmarkConnections(b *testing.B) {
	const concurrency = 4
	idle := poller.IdleConnsPerHost(concurrency, worker.DefaultConcurrency)
	for _, tc := range []struct {
		name string
		hc   func() *awshttp.BuildableClient
	}{
		{"sdk-default-10", awshttp.NewBuildableClient},
		{fmt.Sprintf("sized-%d", idle), func() *awshttp.BuildableClient { return poller.HTTPClient(idle) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := b.N
			b.ResetTimer()
			dials := connRun(b, tc.hc(), concurrency, n)
			b.ReportMetric(float64(dials)*5000/float64(n), "conns/5000jobs")
		})
	}
}
