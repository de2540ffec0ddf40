// Package heartbeat is the seam between a consumer that keeps extending the visibility of the
// messages it handed to a handler (pkg/poller's heartbeat) and a handler that sets some of those
// messages' visibility itself (pkg/worker, when it schedules a retry or an immediate
// redelivery). Before the handler changes a message's visibility it calls Stop: the consumer
// stops extending that message and waits for an extension already sent, so that a late
// extension cannot overwrite the handler's retry delay. Without a consumer in the context (on
// Lambda, whose event source mapping extends nothing), Stop does nothing.
package heartbeat

import "context"

// Stopper stops the visibility extensions of messages, named by receipt handle. Stop returns
// once no extension of them is in flight and none will be sent again.
type Stopper interface {
	Stop(receiptHandles []string)
}

type ctxKey struct{}

// NewContext returns ctx carrying s, for the handler to find with Stop.
func NewContext(ctx context.Context, s Stopper) context.Context {
	return context.WithValue(ctx, ctxKey{}, s)
}

// Stop stops the extensions of the messages with these receipt handles, when ctx carries a
// Stopper; otherwise it does nothing.
func Stop(ctx context.Context, receiptHandles []string) {
	if len(receiptHandles) == 0 {
		return
	}
	if s, ok := ctx.Value(ctxKey{}).(Stopper); ok {
		s.Stop(receiptHandles)
	}
}
