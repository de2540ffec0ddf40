package dynamooutbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/streamimage"
	"github.com/sqsworker/sqsworker/pkg/outbox"
)

// StreamFilterPattern is the event source mapping's filter (FilterCriteria): inserts only. Every
// item of the outbox table is an outbox item, and a job enters the table once, as an INSERT; the
// relay's own writes (claims, write-backs, deletes) are MODIFY and REMOVE records the filter
// drops before they cost an invocation.
const StreamFilterPattern = `{"eventName":["INSERT"]}`

// Defaults of StreamRelayConfig.
const DefaultMaxPerGroup = 100

// StreamRelayConfig configures a [StreamRelay]. Outbox and Relay are required.
type StreamRelayConfig struct {
	// Outbox is the outbox whose table's stream feeds the relay. Required.
	Outbox *Outbox
	// Relay sends what the stream relay claimed (Relay.Publish) and writes the outcomes back;
	// its ID is the claims' owner. Build it on the same Outbox. Required.
	Relay *outbox.Relay
	// Lease is how long a claim lasts (a crash leaves the jobs to the sweeper once it ended).
	// Relay sends a claimed job only while at least half of its own lease (RelayConfig.Lease) is
	// left, so keep the two equal. Defaults to Relay.Lease().
	Lease time.Duration
	// MaxPerGroup bounds the jobs of one FIFO group claimed for one batch (from the group's
	// oldest unsent job on, whatever records the batch has of it). Defaults to 100.
	MaxPerGroup int
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives a line per batch whose write-back failed. Defaults to slog.Default().
	Logger *slog.Logger
	// OnBatch, when set, receives what each batch did (metrics).
	OnBatch func(outbox.Stats)
}

// StreamRelay is the stream half of the DynamoDB outbox: a handler of DynamoDB Streams batches
// (an event source mapping of the outbox table's stream in AWS, or the local stream poller)
// that claims the jobs the batch's INSERT records name, with a conditional write each, and
// publishes them (outbox.Relay.Publish). A job already claimed by the sweeper is skipped: the
// claim decides which of the two sends it. It is safe for concurrent use.
//
// For a job of a FIFO group the relay claims the group from its oldest unsent job on (a strongly
// consistent read of the group), so a record never lets a job overtake an earlier one.
//
// A record is reported failed (events.DynamoDBBatchItemFailure, by its sequence number) only
// when its job could not be read or claimed because of an error (throttling, a timeout): the
// event source mapping then retries from it. Send failures are not record failures: they are
// retried from the table, with backoff, by the sweeper, and a failed write-back leaves the jobs
// claimed until their lease ends, when the sweeper sends them again.
type StreamRelay struct {
	cfg StreamRelayConfig
}

// NewStreamRelay checks cfg and returns a StreamRelay.
func NewStreamRelay(cfg StreamRelayConfig) (*StreamRelay, error) {
	switch {
	case cfg.Outbox == nil:
		return nil, fmt.Errorf("%w: StreamRelayConfig.Outbox is nil", outbox.ErrInvalid)
	case cfg.Relay == nil:
		return nil, fmt.Errorf("%w: StreamRelayConfig.Relay is nil", outbox.ErrInvalid)
	case cfg.Lease < 0 || cfg.MaxPerGroup < 0:
		return nil, fmt.Errorf("%w: StreamRelayConfig.Lease and MaxPerGroup must not be negative", outbox.ErrInvalid)
	}
	if cfg.Lease == 0 {
		cfg.Lease = cfg.Relay.Lease()
	}
	if cfg.MaxPerGroup == 0 {
		cfg.MaxPerGroup = DefaultMaxPerGroup
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &StreamRelay{cfg: cfg}, nil
}

// HandleDynamoDB handles one batch of stream records (the event of a DynamoDB Streams event
// source mapping with ReportBatchItemFailures). It returns an error only when the batch could
// not be judged at all.
func (s *StreamRelay) HandleDynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var resp events.DynamoDBEventResponse
	started := time.Now()
	now := s.cfg.Now()
	claim := outbox.Claim{Owner: s.cfg.Relay.ID(), Now: now, Until: now.Add(s.cfg.Lease)}
	var cands []candidate
	seqOf := map[string][]string{} // partition key → the sequence numbers of its records
	groups := map[string]bool{}
	for i := range ev.Records {
		r := &ev.Records[i]
		if r.EventName != string(events.DynamoDBOperationTypeInsert) {
			continue
		}
		item, err := FromStreamImage(r.Change.NewImage)
		if err != nil {
			continue // not an item this package wrote
		}
		e, k, err := decodeItem(item)
		if err != nil || e.State != outbox.StatePending {
			continue
		}
		seqOf[k.pk] = append(seqOf[k.pk], r.Change.SequenceNumber)
		cd := candidate{k: k, ord: ordOfItem(item)}
		if bad := stateProblem(item, stateAttrs...); bad != "" && !k.fifo() {
			cd.bad, cd.item = bad, item // made dead, not claimed (a FIFO group's read finds it)
		}
		if k.fifo() {
			if groups[k.pk] {
				continue
			}
			groups[k.pk] = true
			claim.Max += s.cfg.MaxPerGroup
		} else {
			claim.Max++
		}
		cands = append(cands, cd)
	}
	if len(cands) == 0 {
		return resp, nil
	}
	entries, failures := s.cfg.Outbox.claimCandidates(ctx, claim, started, cands, modeStream, s.cfg.MaxPerGroup)
	for pk, err := range failures {
		s.cfg.Logger.WarnContext(ctx, "outbox stream relay: claim failed; the record is retried", "pk", pk, "error", err)
		for _, seq := range seqOf[pk] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
		}
	}
	if len(failures) > 0 && len(failures) == len(seqOf) && len(entries) == 0 {
		// Nothing could be claimed: every record is reported failed. The mapping then retries
		// from the lowest sequence number returned (here the batch's first record) under its
		// retry policy; with BisectBatchOnFunctionError it splits a partial response at that
		// sequence number and retries only the records from it on, as it would for a function
		// error (AWS Lambda: "Configuring partial batch response with DynamoDB and Lambda").
		var errs []error
		for _, err := range failures {
			errs = append(errs, err)
		}
		s.cfg.Logger.ErrorContext(ctx, "outbox stream relay: no record of the batch could be claimed", "records", len(ev.Records), "error", errors.Join(errs...))
	}
	st, err := s.cfg.Relay.Publish(ctx, entries)
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "outbox stream relay: the write-back failed; the sweeper sends those jobs again once their lease ends", "entries", len(entries), "error", err)
	}
	if s.cfg.OnBatch != nil {
		s.cfg.OnBatch(st)
	}
	return resp, nil
}

func ordOfItem(item map[string]types.AttributeValue) string {
	s, _ := getS(item, AttrOrd)
	return s
}

// FromStreamImage converts a stream record's image (as a Lambda event carries it) into
// DynamoDB attribute values (internal/streamimage).
func FromStreamImage(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if len(img) == 0 {
		return nil, errors.New("no image")
	}
	return streamimage.ToItem(img)
}

// ToStreamImage converts an item into a stream record's image, as a Lambda event carries it: the
// inverse of FromStreamImage (for tests and tools that build stream events).
func ToStreamImage(item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	return streamimage.FromItem(item)
}
