package dynamooutbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/sqsworker/sqsworker/pkg/ddbstream"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// RunnerConfig configures a [Runner]. Outbox and Producers are required.
type RunnerConfig struct {
	// Outbox is the outbox to relay. Required.
	Outbox *Outbox
	// Producers send the jobs (outbox.RelayConfig.Producers). Required.
	Producers []*producer.Producer
	// Streams and StreamARN, when both set, run the stream relay on the table's stream with our
	// own poller (ddbstream: inserts only, partial failures, bisect, 3 retries), beside the
	// sweeper. Defaults to none: the sweeper alone.
	Streams   ddbstream.StreamsAPI
	StreamARN string
	// StartingPosition is the stream's (ddbstream.Config.StartingPosition). Defaults to
	// ddbstream.Latest: what the sweeper would find anyway is not read again.
	StartingPosition types.ShardIteratorType
	// Relay holds the relays' settings (Lease, MaxAttempts, Backoff, PollInterval, BatchSize,
	// OnPass); its Store, Producers and ID are filled in. Defaults to outbox's defaults.
	Relay outbox.RelayConfig
	// ID names the runner's relays ("<ID>-stream", "<ID>-sweep"). Defaults to
	// "<hostname>-<pid>".
	ID string
	// Logger receives the relays' and the poller's warnings. Defaults to slog.Default().
	Logger *slog.Logger
}

// Runner is the relay of a long-running process (a container, `sqsworker run`, the demo): the
// sweeper (outbox.Relay.Run over the Outbox) and, when a stream is given, the stream relay fed by
// a ddbstream.Poller, the event source mapping's stand-in. The claim decides which of them sends
// a job.
type Runner struct {
	stream  *ddbstream.Poller
	sweeper *outbox.Relay
}

// NewRunner checks cfg and returns a Runner.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if cfg.Outbox == nil || len(cfg.Producers) == 0 {
		return nil, fmt.Errorf("%w: RunnerConfig needs an Outbox and Producers", outbox.ErrInvalid)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ID == "" {
		host, _ := os.Hostname()
		cfg.ID = host + "-" + strconv.Itoa(os.Getpid())
	}
	mk := func(suffix string) (*outbox.Relay, error) {
		rc := cfg.Relay
		rc.Store, rc.Producers, rc.ID = cfg.Outbox, cfg.Producers, cfg.ID+"-"+suffix
		if rc.Logger == nil {
			rc.Logger = cfg.Logger
		}
		return outbox.NewRelay(rc)
	}
	r := &Runner{}
	var err error
	if r.sweeper, err = mk("sweep"); err != nil {
		return nil, err
	}
	if cfg.Streams == nil || cfg.StreamARN == "" {
		return r, nil
	}
	streamRelay, err := mk("stream")
	if err != nil {
		return nil, err
	}
	sr, err := NewStreamRelay(StreamRelayConfig{Outbox: cfg.Outbox, Relay: streamRelay, Lease: cfg.Relay.Lease, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	pos := cfg.StartingPosition
	if pos == "" {
		pos = ddbstream.Latest
	}
	r.stream, err = ddbstream.New(ddbstream.Config{Streams: cfg.Streams, StreamARN: cfg.StreamARN, Handler: sr, Filter: ddbstream.InsertsOnly,
		StartingPosition: pos, ReportBatchItemFailures: true, BisectBatchOnFunctionError: true, MaximumRetryAttempts: 3,
		Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Stream returns the stream poller, or nil when the runner sweeps only.
func (r *Runner) Stream() *ddbstream.Poller { return r.stream }

// Run runs the relays until ctx is done, and returns nil then.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	if r.stream != nil {
		wg.Go(func() { _ = r.stream.Run(ctx) })
	}
	wg.Go(func() { _ = r.sweeper.Run(ctx) })
	wg.Wait()
	return nil
}
