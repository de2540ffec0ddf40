package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DeleteMessage deletes one dead letter, the one whose SQS message id is messageID (as
// [Message.MessageID] gives it), for good: what to do with a dead letter no redrive can heal, such
// as a body that is not a job. It scans the DLQ as [DLQ.Show] does (every other message it
// receives is made visible again at once) and deletes the message by the receipt handle of that
// receive. When the body is an S3 pointer and [Config.Payload] is set, the object is deleted too,
// after the message (a failed object delete is in the error; the message is gone all the same,
// and the bucket's lifecycle rule expires the object). It returns an error wrapping ErrNotFound
// when no message of the DLQ has that id (deleted already, or held by another reader: a message
// in flight cannot be received).
func (d *DLQ) DeleteMessage(ctx context.Context, messageID string) error {
	if messageID == "" {
		return fmt.Errorf("%w: message id is empty", ErrInvalid)
	}
	var found *dead
	err := d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		if m.MessageID != messageID {
			return false, false, nil
		}
		out, err := d.cfg.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{
			QueueUrl: aws.String(d.cfg.DLQURL),
			Entries:  []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: m.raw.ReceiptHandle}},
		})
		if err == nil && len(out.Failed) > 0 {
			f := out.Failed[0]
			err = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
		if err != nil {
			// Not taken: the scan makes it visible again.
			return false, true, fmt.Errorf("dlq: delete message %s from %s: %w", messageID, QueueName(d.cfg.DLQURL), err)
		}
		found = &m
		return true, true, nil
	})
	if found == nil {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: message id %q", ErrNotFound, messageID)
	}
	var errs []error
	if err != nil {
		errs = append(errs, err) // the message is deleted; making the others visible again failed
	}
	if found.Payload != nil && d.cfg.Payload != nil {
		if perr := d.cfg.Payload.Delete(ctx, found.ptr); perr != nil {
			errs = append(errs, fmt.Errorf("dlq: deleted message %s, but not its object %s (the bucket's lifecycle rule expires it): %w",
				messageID, found.ptr, perr))
		}
	}
	return errors.Join(errs...)
}
