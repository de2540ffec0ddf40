package jobs

import (
	"time"
)

// Reasons of flow control (pkg/flow), as written in a dead letter's sqsworker.failure attribute.
const (
	// ReasonDeferredTooLong: the job waited for a concurrency slot or a rate token longer than
	// its bound (flow.Config.MaxDeferral) and was dead-lettered instead of waiting on.
	ReasonDeferredTooLong = "deferred_too_long"
	// ReasonFlowKey: a flow limit's key function panicked, returned an error or returned an
	// empty key for the job, so the job could not be placed under its limit.
	ReasonFlowKey = "flow_key"
)

// Meta keys with a meaning to sqsworker, beside MetaTraceParent.
const (
	// MetaDeferredSince carries, on a copy the worker re-sent for a deferred job, when the job's
	// deferral began (RFC 3339, TimeLayout), so that the next worker can bound the wait
	// (DeferredSince). Set by the worker from DeferError.Since; not meant for producers.
	MetaDeferredSince = "sqsworker.deferred_since"
	// MetaTenant names the tenant a job belongs to (producer.WithTenant sets it along with the
	// message group of an SQS fair queue). Flow limits keyed by tenant read it (flow.TenantKey).
	MetaTenant = "tenant"
)

// DeferredSince returns when the job's current deferral began, as carried by a re-sent copy
// (MetaDeferredSince), and whether the job carries one. A value that does not parse, or that lies
// in the future of now, is ignored (the meta is the producer's to write, too).
func DeferredSince(info *Info, now time.Time) (time.Time, bool) {
	if info == nil || info.Meta == nil {
		return time.Time{}, false
	}
	v, ok := info.Meta[MetaDeferredSince]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.After(now) {
		return time.Time{}, false
	}
	return t, true
}

// DeferUntilSince is Defer with the start of the job's deferral: when the worker re-sends the
// job instead of hiding it again (from its third receive, so that deferrals do not use up the
// queue's maxReceiveCount), the copy carries since in its meta (MetaDeferredSince) and the next
// receiver reads it with DeferredSince to bound the wait. A zero since leaves the job's meta as it
// is.
func DeferUntilSince(d time.Duration, since time.Time, err error) error {
	if d < 0 {
		d = 0
	}
	return &DeferError{Delay: d, Err: err, Since: since}
}
