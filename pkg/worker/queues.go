package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queueURLFor returns the source queue's URL: the configured one, or the URL of the event source
// ARN (looked up once). A configured QueueURL is the source of events that name no queue or name
// that queue; a record from another queue (a handler fed by several, misconfigured with one
// QueueURL) is settled on its own queue, not on the configured one: its receipt handle is valid
// only there, and its re-sends belong there.
func (h *Handler) queueURLFor(ctx context.Context, arn string) (string, error) {
	if h.configuredSource(arn) {
		return h.cfg.QueueURL, nil
	}
	h.mu.Lock()
	url, ok := h.queueURL[arn]
	h.mu.Unlock()
	if ok {
		return url, nil
	}
	url, err := h.urlOfARN(ctx, arn)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	h.queueURL[arn] = url
	h.mu.Unlock()
	return url, nil
}

// dlqURLFor returns the DLQ's URL: the configured one, or the target of the source queue's
// redrive policy (looked up once).
func (h *Handler) dlqURLFor(ctx context.Context, arn string) (string, error) {
	if h.cfg.DLQURL != "" && (h.cfg.QueueURL == "" || h.configuredSource(arn)) {
		return h.cfg.DLQURL, nil // the DLQ of the configured queue, or of every queue when none is configured
	}
	h.mu.Lock()
	url, ok := h.dlqURL[arn]
	h.mu.Unlock()
	if ok {
		return url, nil
	}
	src, err := h.queueURLFor(ctx, arn)
	if err != nil {
		return "", err
	}
	out, err := h.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(src),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy},
	}, keepConnection)
	if err != nil {
		return "", fmt.Errorf("worker: read the redrive policy of %s: %w", src, err)
	}
	policy := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]
	if policy == "" {
		return "", fmt.Errorf("worker: queue %s has no redrive policy and no DLQURL is configured", src)
	}
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(policy), &rp); err != nil || rp.DeadLetterTargetArn == "" {
		return "", fmt.Errorf("worker: queue %s has an unreadable redrive policy %q", src, policy)
	}
	url, err = h.urlOfARN(ctx, rp.DeadLetterTargetArn)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	h.dlqURL[arn] = url
	h.mu.Unlock()
	return url, nil
}

var errNoARN = errors.New("worker: the event has no eventSourceARN and no QueueURL is configured")

// configuredSource reports whether Config.QueueURL is set and is the queue of a record from arn:
// arn is empty, or names the queue the URL's last path segment names.
func (h *Handler) configuredSource(arn string) bool {
	if h.cfg.QueueURL == "" {
		return false
	}
	if arn == "" {
		return true
	}
	name := arn[strings.LastIndexByte(arn, ':')+1:]
	if name == h.cfg.QueueURL[strings.LastIndexByte(h.cfg.QueueURL, '/')+1:] {
		return true
	}
	h.foreignQueue.Do(func() {
		h.cfg.Logger.Warn("sqsworker: a record came from a queue other than Config.QueueURL; it is settled on its own queue (leave QueueURL unset for a handler fed by several queues)",
			"queue_url", h.cfg.QueueURL, "event_source_arn", arn)
	})
	return false
}

// urlOfARN looks up a queue's URL from its ARN (arn:aws:sqs:region:account:name).
func (h *Handler) urlOfARN(ctx context.Context, arn string) (string, error) {
	if arn == "" {
		return "", errNoARN
	}
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" {
		return "", fmt.Errorf("worker: %q is not an SQS queue ARN", arn)
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5])}
	if parts[4] != "" {
		in.QueueOwnerAWSAccountId = aws.String(parts[4])
	}
	out, err := h.cfg.SQS.GetQueueUrl(ctx, in, keepConnection)
	if err != nil {
		return "", fmt.Errorf("worker: look up the URL of %s: %w", arn, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// Preflight reads the source queue's redrive policy and warns (one log line per kind) when a
// kind's MaxAttempts comes close to its maxReceiveCount: receive counts also grow for deliveries
// that never ran (FIFO tails, deadline skips, deferrals, throttles), so the redrive policy would
// move such jobs to the DLQ without the reason before their attempts are spent. The rule is
// maxReceiveCount ≥ 3 × the largest MaxAttempts (docs/ARCHITECTURE.md §4). Call it at cold start; it returns the kinds it
// warned about. queueURL defaults to Config.QueueURL.
func (h *Handler) Preflight(ctx context.Context, queueURL string) ([]string, error) {
	if queueURL == "" {
		queueURL = h.cfg.QueueURL
	}
	if queueURL == "" {
		return nil, errors.New("worker: Preflight needs a queue URL")
	}
	out, err := h.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy},
	}, keepConnection)
	if err != nil {
		return nil, fmt.Errorf("worker: read the redrive policy of %s: %w", queueURL, err)
	}
	policy := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]
	if policy == "" {
		h.cfg.Logger.WarnContext(ctx, "sqsworker: the queue has no redrive policy: messages of crashed or timed-out invocations are retried forever", "queue", queueURL)
		return nil, nil
	}
	var rp struct {
		MaxReceiveCount json.Number `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(policy), &rp); err != nil {
		return nil, fmt.Errorf("worker: queue %s has an unreadable redrive policy %q", queueURL, policy)
	}
	maxReceive, err := rp.MaxReceiveCount.Int64()
	if err != nil {
		return nil, fmt.Errorf("worker: queue %s: redrive maxReceiveCount %q: %w", queueURL, rp.MaxReceiveCount, err)
	}
	var warned []string
	for _, k := range h.cfg.Registry.Kinds() {
		if n := int64(k.Options().MaxAttempts); 3*n > maxReceive {
			warned = append(warned, k.Name())
			h.cfg.Logger.WarnContext(ctx, "sqsworker: a kind's MaxAttempts is close to the queue's maxReceiveCount; SQS may dead-letter its jobs (without the reason) before their attempts are spent",
				"kind", k.Name(), "max_attempts", n, "max_receive_count", maxReceive, "want_at_least", 3*n)
		}
	}
	return warned, nil
}
