package flow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// LambdaAPI is the part of the Lambda client Control uses to pause a queue's consumers on AWS.
type LambdaAPI interface {
	ListEventSourceMappings(context.Context, *lambda.ListEventSourceMappingsInput, ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
	UpdateEventSourceMapping(context.Context, *lambda.UpdateEventSourceMappingInput, ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

// Control is what operators do with flow control: pause and resume kinds and queues, and list
// the limits with their holders. The CLI (sqsworker pause, resume, limits) and the console call
// it.
type Control struct {
	// Table is the job table's flow state. Required.
	Table *Table
	// Lambda, when set, disables and enables the Lambda event source mappings of a paused
	// queue (on AWS: the worker function stops receiving). Without it (an emulator, containers)
	// a queue's pause is only recorded, and pollers that check it (poller.Config.Paused with
	// QueueGate) stop receiving.
	Lambda LambdaAPI
	// Function, when set, limits the mappings changed to those of this function (name or ARN);
	// otherwise every mapping of the queue is.
	Function string
}

// QueueRef names a queue: its name (the pause record) and its ARN (its event source mappings).
type QueueRef struct {
	Name string
	ARN  string
}

// EventSource is a Lambda event source mapping changed by PauseQueue or ResumeQueue.
type EventSource struct {
	UUID        string
	FunctionARN string
	// State is the mapping's state as Lambda answered the update ("Disabling", "Enabling", …).
	State string
}

// QueueResult is what PauseQueue and ResumeQueue did.
type QueueResult struct {
	// Recorded reports the pause record changed (set, or cleared when it existed).
	Recorded bool
	// Mappings are the event source mappings updated.
	Mappings []EventSource
}

// PauseQueue pauses a queue: records the pause (pollers stop receiving from it within their
// PauseCheck), then, with Lambda set, disables the queue's event source mappings (Lambda stops
// polling it; messages in flight finish). An error after the record was written says which
// mappings could not be disabled; run it again.
func (c *Control) PauseQueue(ctx context.Context, q QueueRef, p Pause) (QueueResult, error) {
	p.Queue = q.Name
	if err := c.Table.PauseQueue(ctx, p); err != nil {
		return QueueResult{}, err
	}
	res := QueueResult{Recorded: true}
	var err error
	res.Mappings, err = c.setMappings(ctx, q, false)
	return res, err
}

// ResumeQueue resumes a queue: with Lambda set, enables its event source mappings first, then
// clears the pause record.
func (c *Control) ResumeQueue(ctx context.Context, q QueueRef) (QueueResult, error) {
	var res QueueResult
	var err error
	if res.Mappings, err = c.setMappings(ctx, q, true); err != nil {
		return res, err
	}
	res.Recorded, err = c.Table.ResumeQueue(ctx, q.Name)
	return res, err
}

// PauseKind and ResumeKind pause and resume a kind (Table.PauseKind, Table.ResumeKind).
func (c *Control) PauseKind(ctx context.Context, p Pause) error { return c.Table.PauseKind(ctx, p) }

// ResumeKind resumes a kind and reports whether it was paused.
func (c *Control) ResumeKind(ctx context.Context, kind string) (bool, error) {
	return c.Table.ResumeKind(ctx, kind)
}

// Pauses returns the paused kinds and queues.
func (c *Control) Pauses(ctx context.Context) (Pauses, error) { return c.Table.Pauses(ctx) }

// List lists limit items (Table.List).
func (c *Control) List(ctx context.Context, q ListQuery) (LimitPage, error) {
	return c.Table.List(ctx, q)
}

// setMappings enables or disables the queue's event source mappings (those of Function, when
// set). ListEventSourceMappings by the queue's ARN finds them.
func (c *Control) setMappings(ctx context.Context, q QueueRef, enabled bool) ([]EventSource, error) {
	if c.Lambda == nil {
		return nil, nil
	}
	if q.ARN == "" {
		return nil, fmt.Errorf("%w: queue %s: its ARN is needed to find its event source mappings", ErrInvalid, q.Name)
	}
	in := &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(q.ARN)}
	if c.Function != "" {
		in.FunctionName = aws.String(c.Function)
	}
	var found []lambdatypes.EventSourceMappingConfiguration
	for {
		out, err := c.Lambda.ListEventSourceMappings(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("flow: list the event source mappings of %s: %w", q.ARN, err)
		}
		found = append(found, out.EventSourceMappings...)
		if aws.ToString(out.NextMarker) == "" {
			break
		}
		in.Marker = out.NextMarker
	}
	var changed []EventSource
	var errs []error
	for _, m := range found {
		state := aws.ToString(m.State)
		if (enabled && (state == "Enabled" || state == "Enabling")) || (!enabled && (state == "Disabled" || state == "Disabling")) {
			changed = append(changed, EventSource{UUID: aws.ToString(m.UUID), FunctionARN: aws.ToString(m.FunctionArn), State: state})
			continue // already so
		}
		out, err := c.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: m.UUID, Enabled: aws.Bool(enabled)})
		if err != nil {
			errs = append(errs, fmt.Errorf("mapping %s: %w", aws.ToString(m.UUID), err))
			continue
		}
		changed = append(changed, EventSource{UUID: aws.ToString(out.UUID), FunctionARN: aws.ToString(out.FunctionArn), State: aws.ToString(out.State)})
	}
	if len(errs) > 0 {
		verb := "disable"
		if enabled {
			verb = "enable"
		}
		return changed, fmt.Errorf("flow: %s the event source mappings of %s: %w", verb, q.ARN, errors.Join(errs...))
	}
	return changed, nil
}

// QueueNameFromARN returns the queue name an SQS queue ARN ends with.
func QueueNameFromARN(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}
