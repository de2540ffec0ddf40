package producer

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrInvalid is wrapped by every error that rejects a job before it is sent: a bad kind,
	// args, key, option, attribute, delay, group or size.
	ErrInvalid = errors.New("invalid job")
	// ErrTooLarge is wrapped (with ErrInvalid) when a job's body and attributes exceed
	// MaxMessageSize.
	ErrTooLarge = errors.New("job too large")
	// ErrNeedsScheduler is wrapped (with ErrInvalid) when a job asks for a delay SQS cannot
	// express (beyond 15 minutes, or any delay on a FIFO queue) and Config.Scheduler is nil:
	// such delays need EventBridge Scheduler.
	ErrNeedsScheduler = errors.New("delay needs the scheduler")
)

// validationError is a rejection with a message of its own; it matches ErrInvalid and, when
// set, a more specific sentinel.
type validationError struct {
	msg  string
	also error
}

func (e *validationError) Error() string { return e.msg }

func (e *validationError) Is(target error) bool {
	return target == ErrInvalid || (e.also != nil && errors.Is(e.also, target))
}

func invalid(format string, args ...any) error {
	return &validationError{msg: fmt.Sprintf(format, args...)}
}

func tooLarge(format string, args ...any) error {
	return &validationError{msg: fmt.Sprintf(format, args...), also: ErrTooLarge}
}

func needsScheduler(format string, args ...any) error {
	return &validationError{msg: fmt.Sprintf(format, args...), also: ErrNeedsScheduler}
}

// EntryError is a job that SQS rejected inside a SendMessageBatch response
// (a BatchResultErrorEntry). Retryable codes (throttling, server faults) were retried first;
// Attempts says how many times the entry was sent.
type EntryError struct {
	// Code is SQS's error code, such as "InvalidParameterValue" or "RequestThrottled".
	Code string
	// Message is SQS's explanation, if any.
	Message string
	// SenderFault reports whether SQS blamed the request rather than itself.
	SenderFault bool
	// Attempts is how many times the entry was sent.
	Attempts int
}

func (e *EntryError) Error() string {
	b := make([]byte, 0, 64+len(e.Code)+len(e.Message))
	b = append(b, "SQS rejected the message: "...)
	b = append(b, e.Code...)
	if e.Message != "" {
		b = append(b, ": "...)
		b = append(b, e.Message...)
	}
	if e.SenderFault {
		b = append(b, " (sender fault, "...)
	} else {
		b = append(b, " (server fault, "...)
	}
	b = strconv.AppendInt(append(b, "after "...), int64(e.Attempts), 10)
	if e.Attempts == 1 {
		b = append(b, " attempt)"...)
	} else {
		b = append(b, " attempts)"...)
	}
	return string(b)
}

// Retryable reports whether SQS may accept the entry if it is sent again: throttling and
// server-side faults.
func (e *EntryError) Retryable() bool { return retryableCode(e.Code, e.SenderFault) }

func retryableCode(code string, senderFault bool) bool {
	// Codes may come qualified ("AWS.SimpleQueueService.RequestThrottled", "KMS.ThrottlingException").
	for i := len(code) - 1; i >= 0; i-- {
		if code[i] == '.' {
			code = code[i+1:]
			break
		}
	}
	switch code {
	case "RequestThrottled", "ThrottlingException", "Throttling", "ThrottledException",
		"KmsThrottled", "InternalError", "InternalFailure", "ServiceUnavailable":
		return true
	}
	return !senderFault
}
