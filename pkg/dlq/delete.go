package dlq

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// DeleteOptions tunes [DLQ.DeleteMessage].
type DeleteOptions struct {
	// DeletePayload also deletes the S3 object of a dead letter whose job is kept there; it needs
	// Config.Payload. By default the object is left for the bucket's lifecycle rule to expire
	// (another copy of the job may point to it).
	DeletePayload bool
}

// DeleteMessage deletes, for good, the one dead letter whose SQS message id is messageID (as
// Message.MessageID reports it), and returns it. It finds it by scanning the DLQ as Peek does:
// every other message it receives is made visible again at once, and the one it deletes is
// deleted with the receipt handle of that receive (DeleteMessageBatch with one entry). A dead
// letter of any kind can be deleted this way, one whose body is not an envelope included. It
// returns a *NotFoundError (wrapping ErrNotFound) when no dead letter has that message id; when
// the delete fails, the message is made visible again and the error says why. When the message
// was deleted but something after it failed (making the other messages visible again, or deleting
// the object), the deleted message is returned together with the error.
//
// With opts.DeletePayload, the S3 object of a dead letter whose job is kept there is deleted
// after the message; a failure to delete it is returned with the deleted message.
func (d *DLQ) DeleteMessage(ctx context.Context, messageID string, opts DeleteOptions) (Message, error) {
	switch {
	case messageID == "":
		return Message{}, fmt.Errorf("%w: message id is empty", ErrInvalid)
	case opts.DeletePayload && d.cfg.Payload == nil:
		return Message{}, fmt.Errorf("%w: DeleteOptions.DeletePayload needs Config.Payload", ErrInvalid)
	}
	var found *dead
	err := d.scan(ctx, d.cfg.DLQURL, holdVisibility, maxBatch, func(m dead) (bool, bool, error) {
		if m.MessageID != messageID {
			return false, false, nil
		}
		d.identify(ctx, &m) // the job it held, for the caller to say what it deleted
		out, err := d.cfg.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{
			QueueUrl: aws.String(d.cfg.DLQURL),
			Entries:  []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: m.raw.ReceiptHandle}},
		})
		if err == nil && len(out.Failed) > 0 {
			f := out.Failed[0]
			err = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
		if err != nil {
			return false, true, fmt.Errorf("dlq: delete message %s from %s: %w", messageID, QueueName(d.cfg.DLQURL), err)
		}
		found = &m
		return true, true, nil
	})
	if found == nil {
		if err != nil {
			return Message{}, err
		}
		return Message{}, &NotFoundError{MessageID: messageID}
	}
	// The message is deleted; err, if any, says the others could not all be made visible again
	// (they come back when their visibility ends).
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if opts.DeletePayload && found.Payload != nil {
		if perr := d.cfg.Payload.Delete(ctx, found.ptr); perr != nil {
			errs = append(errs, fmt.Errorf("dlq: deleted message %s, but not its job's object %s (the bucket's lifecycle rule expires it): %w",
				messageID, found.ptr, perr))
		}
	}
	return found.Message, errors.Join(errs...)
}
