// Package esm pauses and resumes the Lambda event source mappings of a queue, for
// flow.Control: `sqsworker pause --queue` on AWS disables the mapping through the Lambda API
// (UpdateEventSourceMapping, Enabled false), so that Lambda stops polling the queue; messages
// already in flight finish, and the queue keeps the rest until the mapping is enabled again.
//
// It is a package of its own so that the worker, which imports pkg/flow, does not link the
// Lambda API client (half a megabyte of its bootstrap).
package esm

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sqsworker/sqsworker/pkg/flow"
)

// LambdaAPI is the part of the Lambda client Switch uses.
type LambdaAPI interface {
	ListEventSourceMappings(context.Context, *lambda.ListEventSourceMappingsInput, ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
	UpdateEventSourceMapping(context.Context, *lambda.UpdateEventSourceMappingInput, ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

// Switch enables and disables a queue's event source mappings. It implements
// flow.EventSources. The caller needs lambda:ListEventSourceMappings (which takes no resource)
// and lambda:UpdateEventSourceMapping on the mappings.
type Switch struct {
	// Lambda is the client. Required.
	Lambda LambdaAPI
	// Function, when set, limits the mappings changed to those of this function (name or ARN);
	// otherwise every mapping of the queue is.
	Function string
}

var _ flow.EventSources = (*Switch)(nil)

// SetEnabled enables or disables the event source mappings of the queue (found with
// ListEventSourceMappings by the queue's ARN, and by Function when set). A mapping already in
// the state asked for is left as it is. It returns the mappings found, in the state Lambda
// answered ("Disabling", "Enabling", …); an error names those that could not be changed.
func (s *Switch) SetEnabled(ctx context.Context, queueARN string, enabled bool) ([]flow.EventSource, error) {
	if s.Lambda == nil {
		return nil, errors.New("esm: Switch.Lambda is required")
	}
	in := &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(queueARN)}
	if s.Function != "" {
		in.FunctionName = aws.String(s.Function)
	}
	var found []lambdatypes.EventSourceMappingConfiguration
	for {
		out, err := s.Lambda.ListEventSourceMappings(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("esm: list the event source mappings of %s: %w", queueARN, err)
		}
		found = append(found, out.EventSourceMappings...)
		if aws.ToString(out.NextMarker) == "" {
			break
		}
		in.Marker = out.NextMarker
	}
	var changed []flow.EventSource
	var errs []error
	for _, m := range found {
		state := aws.ToString(m.State)
		if (enabled && (state == "Enabled" || state == "Enabling")) || (!enabled && (state == "Disabled" || state == "Disabling")) {
			changed = append(changed, flow.EventSource{UUID: aws.ToString(m.UUID), FunctionARN: aws.ToString(m.FunctionArn), State: state})
			continue // already so
		}
		out, err := s.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: m.UUID, Enabled: aws.Bool(enabled)})
		if err != nil {
			errs = append(errs, fmt.Errorf("mapping %s: %w", aws.ToString(m.UUID), err))
			continue
		}
		changed = append(changed, flow.EventSource{UUID: aws.ToString(out.UUID), FunctionARN: aws.ToString(out.FunctionArn), State: aws.ToString(out.State)})
	}
	if len(errs) > 0 {
		verb := "disable"
		if enabled {
			verb = "enable"
		}
		return changed, fmt.Errorf("esm: %s the event source mappings of %s: %w", verb, queueARN, errors.Join(errs...))
	}
	return changed, nil
}
