package poller

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// maxPayload is where gathering stops: Lambda's synchronous invocation payload limit.
const maxPayload = 6 * 1024 * 1024

// callTimeout bounds each AWS call made outside the receive loop (deletes, heartbeats), which
// run with a context that shutdown does not cancel.
const callTimeout = 30 * time.Second

// Poller consumes one SQS queue with the semantics of Lambda's SQS event source mapping, or several
// queues by priority (Config.Queues, Priority). Create it with New and start it with Run.
type Poller struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	running atomic.Bool

	queueURL *string // cfg.QueueURL, shared by every request

	// multi is the state of a Poller of several queues (Config.Queues), nil for one queue.
	multi *multi

	// Resolved by Run from the queue's attributes.
	queueARN   string
	region     string
	visibility time.Duration
	// receiveWait is the queue's ReceiveMessageWaitTimeSeconds: the wait of a receive that
	// sends no WaitTimeSeconds (0: a short poll, which answers at once).
	receiveWait time.Duration
}

// New validates cfg, fills in its defaults and returns a Poller. Every problem is reported, each
// wrapping ErrInvalidConfig.
func New(cfg Config) (*Poller, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(cfg.Queues) == 1 { // one queue: the plain Poller
		cfg.QueueURL, cfg.Queues = cfg.Queues[0].URL, nil
	}
	if len(cfg.Queues) > 1 {
		m, err := newMulti(cfg)
		if err != nil {
			return nil, err
		}
		return &Poller{cfg: cfg, log: cfg.Logger, now: time.Now, multi: m}, nil
	}
	return &Poller{
		cfg:      cfg,
		log:      cfg.Logger.With(slog.String("queue_url", cfg.QueueURL)),
		now:      time.Now,
		queueURL: aws.String(cfg.QueueURL),
	}, nil
}

// Run reads the queue's ARN (and visibility timeout, unless configured) once, then polls and
// handles batches until ctx is cancelled. On cancellation it stops receiving at once, lets the
// batches already received finish (their handlers' contexts are not cancelled by it; a batch
// still being gathered is handed over as it stands), deletes their successes and returns nil.
//
// Run returns an error only when it cannot start: the queue's attributes cannot be read, the
// queue's visibility timeout is 0, or the Poller is already running. Errors while running are
// logged and retried.
func (p *Poller) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer p.running.Store(false)
	if p.multi != nil {
		return p.runQueues(ctx)
	}
	if err := p.resolveQueue(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	p.log.Info("poller started",
		slog.String("queue_arn", p.queueARN),
		slog.Int("batch_size", p.cfg.BatchSize),
		slog.Duration("batch_window", p.cfg.BatchWindow),
		slog.Int("concurrency", p.cfg.Concurrency),
		slog.Duration("visibility_timeout", p.visibility),
		slog.Bool("heartbeat", !p.cfg.DisableHeartbeat))

	var wg sync.WaitGroup
	for range p.cfg.Concurrency {
		wg.Go(func() { p.loop(ctx) })
	}
	wg.Wait()
	p.log.Info("poller stopped")
	return nil
}

// resolveQueue reads the queue ARN and, unless configured, the visibility timeout.
func (p *Poller) resolveQueue(ctx context.Context) error {
	out, err := p.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(p.cfg.QueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameQueueArn,
			sqstypes.QueueAttributeNameVisibilityTimeout,
			sqstypes.QueueAttributeNameReceiveMessageWaitTimeSeconds,
		},
	}, keepConnection)
	if err != nil {
		return fmt.Errorf("poller: read attributes of %s: %w", p.cfg.QueueURL, err)
	}
	p.queueARN = out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	if p.queueARN == "" {
		return fmt.Errorf("poller: queue %s has no QueueArn attribute", p.cfg.QueueURL)
	}
	p.region = p.cfg.Region
	if p.region == "" {
		// arn:partition:sqs:region:account:name
		parts := strings.SplitN(p.queueARN, ":", 6)
		if len(parts) < 6 || parts[3] == "" {
			return fmt.Errorf("poller: no region in queue ARN %q; set Config.Region", p.queueARN)
		}
		p.region = parts[3]
	}
	if secs, err := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameReceiveMessageWaitTimeSeconds)]); err == nil && secs > 0 {
		p.receiveWait = time.Duration(secs) * time.Second
	}
	p.visibility = p.cfg.VisibilityTimeout
	if p.visibility == 0 {
		raw := out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)]
		secs, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("poller: queue %s: bad VisibilityTimeout attribute %q", p.cfg.QueueURL, raw)
		}
		if secs <= 0 {
			return fmt.Errorf("poller: queue %s has a visibility timeout of 0, which would redeliver every message at once; set Config.VisibilityTimeout", p.cfg.QueueURL)
		}
		p.visibility = time.Duration(secs) * time.Second
	}
	if need := p.cfg.InvocationTimeout + p.cfg.BatchWindow; p.cfg.DisableHeartbeat && p.visibility < need {
		p.log.Warn("the heartbeat is disabled and the visibility timeout is shorter than InvocationTimeout + BatchWindow: messages may be redelivered while their handler runs",
			slog.Duration("visibility_timeout", p.visibility), slog.Duration("needed", need))
	}
	return nil
}

// loop is one concurrency slot: gather a batch, handle it, repeat until ctx is done.
func (p *Poller) loop(ctx context.Context) {
	failures := 0
	paused := false
	for ctx.Err() == nil {
		if p.cfg.Paused != nil {
			now := p.cfg.Paused(ctx)
			if now != paused {
				paused = now
				p.log.Info("queue pause changed; receiving stopped while paused", slog.Bool("paused", paused))
			}
			if paused {
				if !sleep(ctx, p.cfg.PausedPoll) {
					return
				}
				continue
			}
		}
		b, err := p.gather(ctx, p.cfg.WaitTime, false)
		if b != nil {
			p.process(ctx, b)
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		pause := p.cfg.Backoff(failures)
		if answeredButUnread(err) {
			p.log.Error("SQS answered a receive but the answer could not be read: the messages in it, if any, stay invisible until their visibility timeout; backing off",
				slog.Any("error", err), slog.Int("consecutive_failures", failures), slog.Duration("backoff", pause))
		} else {
			p.log.Warn("receive failed; backing off", slog.Any("error", err),
				slog.Int("consecutive_failures", failures), slog.Duration("backoff", pause))
		}
		if !sleep(ctx, pause) {
			return
		}
	}
}

// gather receives one batch, as Lambda's poller does: up to BatchSize messages within BatchWindow
// of the first one, or what the first receive returned when there is no window. It returns a nil
// batch when nothing arrived, and the receive error (if any) after handing over what it got.
// Each receive waits up to firstWait for the first messages; once, it returns a nil batch after
// one empty receive instead of polling again (several queues: a probe).
func (p *Poller) gather(ctx context.Context, firstWait time.Duration, once bool) (*batch, error) {
	var (
		b   *batch
		end time.Time
	)
	for {
		n := p.cfg.BatchSize
		wait := firstWait
		if b != nil {
			n -= len(b.msgs)
			if n <= 0 || b.bytes >= maxPayload || p.cfg.BatchWindow == 0 || ctx.Err() != nil {
				return b, nil
			}
			remaining := end.Sub(p.now())
			if remaining <= 0 {
				return b, nil
			}
			// WaitTimeSeconds is whole seconds: round the rest of the window up (a long poll
			// returns as soon as messages arrive, so this only lengthens an idle window, by less
			// than a second).
			wait = min((remaining + time.Second - 1).Truncate(time.Second), p.cfg.WaitTime)
		}
		start := p.now()
		out, err := p.receive(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    p.queueURL,
			MaxNumberOfMessages:         int32(min(n, maxReceive)),
			WaitTimeSeconds:             int32(wait / time.Second),
			VisibilityTimeout:           int32(p.visibility / time.Second),
			MessageSystemAttributeNames: allSystemAttributes,
			MessageAttributeNames:       allMessageAttributes,
		})
		if err != nil {
			if ctx.Err() != nil {
				err = nil // shutting down: not a failure
			}
			return b, err
		}
		if msgs := p.checkBodies(out.Messages); len(msgs) > 0 {
			if b == nil {
				b = p.newBatch()
				end = p.now().Add(p.cfg.BatchWindow)
			}
			b.add(msgs, start)
		}
		if b == nil && (ctx.Err() != nil || once) {
			return nil, nil
		}
		// Otherwise an empty long poll (poll again), or more to gather.
	}
}

// Every receive asks for all attributes, as Lambda's event carries them (shared, never changed).
var (
	allSystemAttributes  = []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}
	allMessageAttributes = []string{"All"}
)

// sleep waits for d or until ctx is done; it reports whether d elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
