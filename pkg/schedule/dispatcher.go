package schedule

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// DispatcherSchedulerAPI is the part of the EventBridge Scheduler client the Dispatcher uses;
// *scheduler.Client implements it.
type DispatcherSchedulerAPI interface {
	ListSchedules(ctx context.Context, in *scheduler.ListSchedulesInput, optFns ...func(*scheduler.Options)) (*scheduler.ListSchedulesOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// DispatcherSQSAPI is the part of the SQS client the Dispatcher uses; *sqs.Client implements it.
type DispatcherSQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
}

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// Scheduler lists, reads and deletes the schedules. Required.
	Scheduler DispatcherSchedulerAPI
	// SQS sends the firings to the target queues. Required.
	SQS DispatcherSQSAPI
	// Group is the schedule group to dispatch. Defaults to "default".
	Group string
	// Interval is how often Run looks at the schedules. Defaults to 5 s. Scheduler's own
	// precision is 60 s; the Dispatcher fires up to one Interval late, never early. Keep it under
	// a minute (the shortest rate): when several occurrences of a schedule fall due in one look,
	// only the latest fires (see Dispatcher).
	Interval time.Duration
	// State keeps the last fired occurrence of each schedule. Defaults to MemoryState(); use
	// FileState(path) to keep it across restarts.
	State StateStore
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Logger receives one line per firing, skip and failure. Defaults to slog.Default().
	Logger *slog.Logger
}

// Dispatcher fires EventBridge Scheduler schedules whose target is an SQS queue, for backends
// that store schedules but never fire them (the embedded emulator, LocalStack). It follows
// Scheduler's rules:
//
//   - DISABLED schedules do not fire; occurrences that fell while a schedule was disabled are
//     not fired when it is enabled again.
//   - A one-time schedule, at(...), fires once when due, even if it fell due while the
//     Dispatcher was stopped, so a delayed job is never lost (StartDate and EndDate are ignored,
//     as Scheduler ignores them) and, with ActionAfterCompletion DELETE, is then deleted. The state
//     records the firing before the delete, so a failed delete is retried on the next Tick
//     without firing again.
//   - Recurring schedules (rate, cron) fire their occurrences at or after StartDate and before
//     EndDate, evaluated in ScheduleExpressionTimezone; a rate counts from StartDate, else from
//     the schedule's CreationDate. With ActionAfterCompletion DELETE a recurring schedule is
//     deleted once it has no occurrence left.
//   - FlexibleTimeWindow is not randomised: the Dispatcher fires at the start of the window,
//     which the window allows.
//
// Catching up: every occurrence due since the last fired one is fired, except that when several
// are due at once (the Dispatcher was stopped, or fell behind by a whole period) only the latest
// fires and the others are logged as skipped, as Scheduler itself does not replay invocations
// missed while it could not deliver. No occurrence before the schedule was first seen (or its
// StartDate, when later) is ever fired, so a new or restarted Dispatcher without state does not
// replay history.
//
// Each firing sends Target.Input, with the context attributes expanded by ExpandInput (the
// schedule's ARN, the occurrence's scheduled time, a fresh execution id, and the attempt number:
// 1, or more when a failed send of the same occurrence is retried), to the queue named by
// Target.Arn. The state advances only after the send succeeded, so a failed send is retried on
// the next Tick, and an occurrence recorded as sent is never sent again. A crash between the send
// and the state write can repeat that one occurrence (at-least-once, as Scheduler is).
//
// FIFO targets get Target.SqsParameters.MessageGroupId and a deduplication id derived from the
// group, name and scheduled time of the occurrence. Scheduler itself cannot set a deduplication
// id, which is why a FIFO target must have content-based deduplication there; an explicit id
// takes precedence over the content hash on such a queue and also works on a queue without
// content-based deduplication, and it makes SQS drop a repeated send of the same occurrence
// within its 5-minute deduplication interval.
//
// Targets that are not SQS queue ARNs (other services, universal targets) are skipped with a
// log line. The queue is looked up by name and owner account with GetQueueUrl, through the SQS
// client's own region, and the URL is cached.
type Dispatcher struct {
	cfg DispatcherConfig
	log *slog.Logger

	mu       sync.Mutex // serialises Tick; guards the fields below
	queues   map[string]dispatchQueue
	attempts map[StateKey]dispatchAttempt
	warned   map[StateKey]string
}

type dispatchQueue struct {
	url  string
	fifo bool
}

// dispatchAttempt counts failed sends of one occurrence, for <aws.scheduler.attempt-number>.
type dispatchAttempt struct {
	occurrence time.Time
	failures   int
}

// NewDispatcher returns a Dispatcher.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	if cfg.Scheduler == nil {
		return nil, errors.New("schedule: DispatcherConfig.Scheduler is required")
	}
	if cfg.SQS == nil {
		return nil, errors.New("schedule: DispatcherConfig.SQS is required")
	}
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("schedule: DispatcherConfig.Interval %v is negative", cfg.Interval)
	}
	if cfg.Group == "" {
		cfg.Group = "default"
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.State == nil {
		cfg.State = MemoryState()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "schedule.dispatcher", "group", cfg.Group),
		queues:   make(map[string]dispatchQueue),
		attempts: make(map[StateKey]dispatchAttempt),
		warned:   make(map[StateKey]string),
	}, nil
}

// Run calls Tick at once and then every Interval until ctx is done, and returns ctx's error.
// Tick errors are logged, and what failed is retried on the next Tick.
func (d *Dispatcher) Run(ctx context.Context) error {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := d.Tick(ctx); err != nil && ctx.Err() == nil {
			d.log.WarnContext(ctx, "schedule dispatch failed; retrying on the next tick", "error", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Tick makes one pass: it lists the group's schedules, reads each, fires the occurrences due
// at Now, and records them. It returns how many messages it sent, and the failures joined (a
// failure of one schedule does not stop the others). Concurrent calls run one after another.
func (d *Dispatcher) Tick(ctx context.Context) (fired int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.cfg.Now()
	summaries, err := d.list(ctx)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, s := range summaries {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		key := StateKey{Group: d.cfg.Group, Name: aws.ToString(s.Name)}
		var n int
		if s.State == schedtypes.ScheduleStateDisabled {
			err = d.pause(ctx, key)
		} else {
			n, err = d.dispatch(ctx, key, now)
		}
		fired += n
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", key, err))
		}
	}
	return fired, errors.Join(errs...)
}

// list returns the summaries of the group's schedules, all pages.
func (d *Dispatcher) list(ctx context.Context) ([]schedtypes.ScheduleSummary, error) {
	var out []schedtypes.ScheduleSummary
	var token *string
	for {
		page, err := d.cfg.Scheduler.ListSchedules(ctx, &scheduler.ListSchedulesInput{
			GroupName: aws.String(d.cfg.Group),
			NextToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("schedule: list schedules of group %s: %w", d.cfg.Group, err)
		}
		for _, s := range page.Schedules {
			// Filter here too: a backend may ignore the group filter (kumo does).
			if s.GroupName != nil && *s.GroupName != d.cfg.Group || aws.ToString(s.Name) == "" {
				continue
			}
			out = append(out, s)
		}
		if aws.ToString(page.NextToken) == "" {
			return out, nil
		}
		token = page.NextToken
	}
}

// pause records that a schedule is disabled, so that when it is enabled again it starts afresh
// (occurrences that fell while it was disabled are not fired).
func (d *Dispatcher) pause(ctx context.Context, key StateKey) error {
	st, ok, err := d.cfg.State.Get(ctx, key)
	if err != nil || !ok || st.FirstSeen.IsZero() {
		return err
	}
	st.FirstSeen = time.Time{} // reset at the next sighting as ENABLED
	return d.cfg.State.Put(ctx, key, st)
}

// dispatch handles one enabled schedule.
func (d *Dispatcher) dispatch(ctx context.Context, key StateKey, now time.Time) (int, error) {
	s, err := d.cfg.Scheduler.GetSchedule(ctx, &scheduler.GetScheduleInput{
		Name:      aws.String(key.Name),
		GroupName: aws.String(key.Group),
	})
	if err != nil {
		if dispatchNotFound(err) { // deleted since the listing
			return 0, d.cfg.State.Delete(ctx, key)
		}
		return 0, fmt.Errorf("get: %w", err)
	}
	if s.State == schedtypes.ScheduleStateDisabled {
		return 0, d.pause(ctx, key)
	}
	exprText := aws.ToString(s.ScheduleExpression)
	expr, err := Parse(exprText)
	if err != nil {
		return 0, err
	}
	loc := time.UTC
	if tz := aws.ToString(s.ScheduleExpressionTimezone); tz != "" {
		if loc, err = time.LoadLocation(tz); err != nil {
			return 0, fmt.Errorf("time zone: %w", err)
		}
	}
	created := aws.ToTime(s.CreationDate)
	anchor := created
	if s.StartDate != nil {
		anchor = *s.StartDate
	}

	st, ok, err := d.cfg.State.Get(ctx, key)
	if err != nil {
		return 0, fmt.Errorf("state: %w", err)
	}
	dirty := false
	switch {
	case !ok || !st.Created.Equal(created):
		st, dirty = ScheduleState{Created: created, Expression: exprText, FirstSeen: now}, true
	case st.Expression != exprText:
		st.Expression, st.FirstSeen, st.Completed, dirty = exprText, now, false, true
	case st.FirstSeen.IsZero(): // enabled again after a pause
		st.FirstSeen, dirty = now, true
	}
	save := func() error {
		if !dirty {
			return nil
		}
		if err := d.cfg.State.Put(ctx, key, st); err != nil {
			return fmt.Errorf("state: %w", err)
		}
		return nil
	}
	deleteAfter := s.ActionAfterCompletion == schedtypes.ActionAfterCompletionDelete

	if expr.Kind() == KindAt {
		if st.Completed {
			return 0, d.complete(ctx, key, deleteAfter)
		}
		occ, ok := expr.Next(time.Time{}, loc, anchor)
		if !ok || occ.After(now) {
			return 0, save()
		}
		n, err := d.fire(ctx, key, s, occ)
		if err != nil || n == 0 {
			return 0, errors.Join(err, save())
		}
		st.LastFired, st.Completed, dirty = occ, true, true
		if err := save(); err != nil {
			return n, err
		}
		return n, d.complete(ctx, key, deleteAfter)
	}

	// Recurring: the occurrences in (after, now], before EndDate.
	bound := st.FirstSeen
	if s.StartDate != nil && s.StartDate.After(bound) {
		bound = *s.StartDate
	}
	after := bound.Add(-time.Nanosecond) // an occurrence at the bound itself counts
	if !st.LastFired.IsZero() && !st.LastFired.Before(bound) {
		after = st.LastFired
	}
	limit := now
	if s.EndDate != nil && !s.EndDate.After(limit) {
		limit = s.EndDate.Add(-time.Nanosecond) // EndDate: before which the schedule may fire
	}
	n := 0
	if occ, skipped, ok := dispatchLatest(expr, loc, anchor, after, limit); ok {
		if !skipped.IsZero() {
			d.log.WarnContext(ctx, "missed occurrences skipped: only the latest fires",
				"schedule", key.Name, "first_skipped", skipped, "firing", occ)
		}
		n, err = d.fire(ctx, key, s, occ)
		if err != nil || n == 0 {
			return 0, errors.Join(err, save())
		}
		st.LastFired, dirty = occ, true
	}
	if err := save(); err != nil {
		return n, err
	}
	if deleteAfter {
		next, ok := expr.Next(now, loc, anchor)
		if !ok || s.EndDate != nil && !next.Before(*s.EndDate) {
			return n, d.complete(ctx, key, true)
		}
	}
	return n, nil
}

// dispatchLatest returns the latest occurrence in (after, limit]; skipped is the first of the
// earlier ones in that range (zero when there are none). It does not walk a long stop
// occurrence by occurrence: it widens a window back from limit until the window holds one.
func dispatchLatest(expr Expression, loc *time.Location, anchor, after, limit time.Time) (latest, skipped time.Time, ok bool) {
	first, ok := expr.Next(after, loc, anchor)
	if !ok || first.After(limit) {
		return time.Time{}, time.Time{}, false
	}
	for w := time.Minute; ; w *= 2 {
		from := limit.Add(-w)
		if !from.After(after) || w > 200*365*24*time.Hour {
			from = after
		}
		t, ok := expr.Next(from, loc, anchor)
		if ok && !t.After(limit) {
			for {
				n, ok := expr.Next(t, loc, anchor)
				if !ok || n.After(limit) || !n.After(t) {
					break
				}
				t = n
			}
			if t.Equal(first) {
				return t, time.Time{}, true
			}
			return t, first, true
		}
		if from.Equal(after) { // cannot happen: first is in range
			return first, time.Time{}, true
		}
	}
}

// complete applies ActionAfterCompletion to a schedule that has no occurrence left: with
// DELETE it deletes the schedule (and then forgets its state); a failed delete is returned and
// retried on the next Tick.
func (d *Dispatcher) complete(ctx context.Context, key StateKey, deleteAfter bool) error {
	if !deleteAfter {
		return nil
	}
	_, err := d.cfg.Scheduler.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{
		Name:      aws.String(key.Name),
		GroupName: aws.String(key.Group),
	})
	if err != nil && !dispatchNotFound(err) {
		return fmt.Errorf("delete after completion (retried on the next tick): %w", err)
	}
	d.log.InfoContext(ctx, "schedule completed and deleted", "schedule", key.Name)
	delete(d.warned, key)
	return d.cfg.State.Delete(ctx, key)
}

// fire sends one occurrence. It returns 0 and no error when the target is skipped.
func (d *Dispatcher) fire(ctx context.Context, key StateKey, s *scheduler.GetScheduleOutput, occ time.Time) (int, error) {
	if s.Target == nil {
		d.warnOnce(ctx, key, "", "schedule has no target; skipped")
		return 0, nil
	}
	arn := aws.ToString(s.Target.Arn)
	q, isSQS, err := d.queue(ctx, arn)
	if !isSQS {
		d.warnOnce(ctx, key, arn, "target is not an SQS queue; skipped")
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(q.url)}
	if q.fifo {
		var group string
		if s.Target.SqsParameters != nil {
			group = aws.ToString(s.Target.SqsParameters.MessageGroupId)
		}
		if group == "" {
			return 0, fmt.Errorf("FIFO target %s has no SqsParameters.MessageGroupId", arn)
		}
		in.MessageGroupId = aws.String(group)
		in.MessageDeduplicationId = aws.String(dispatchDedupID(key, occ))
	}
	attempt := 1
	if a, ok := d.attempts[key]; ok && a.occurrence.Equal(occ) {
		attempt = a.failures + 1
	}
	input := aws.ToString(s.Target.Input)
	if input == "" {
		input = "{}" // SQS rejects an empty body
	}
	in.MessageBody = aws.String(ExpandInput(input, aws.ToString(s.Arn), occ, dispatchExecutionID(), attempt))
	if _, err := d.cfg.SQS.SendMessage(ctx, in); err != nil {
		d.attempts[key] = dispatchAttempt{occurrence: occ, failures: attempt}
		delete(d.queues, arn) // look the queue up again: it may have been recreated
		return 0, fmt.Errorf("send occurrence %s (attempt %d; retried on the next tick): %w",
			occ.UTC().Format(time.RFC3339), attempt, err)
	}
	delete(d.attempts, key)
	d.log.InfoContext(ctx, "schedule fired", "schedule", key.Name,
		"scheduled_time", occ.UTC().Format(time.RFC3339), "attempt", attempt, "queue", q.url)
	return 1, nil
}

func (d *Dispatcher) warnOnce(ctx context.Context, key StateKey, arn, msg string) {
	if prev, ok := d.warned[key]; ok && prev == arn {
		return
	}
	d.warned[key] = arn
	d.log.WarnContext(ctx, msg, "schedule", key.Name, "target", arn)
}

// queue resolves an SQS queue ARN (arn:partition:sqs:region:account:name) to its URL. isSQS is
// false for any other ARN.
func (d *Dispatcher) queue(ctx context.Context, arn string) (q dispatchQueue, isSQS bool, err error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" || parts[5] == "" || strings.ContainsAny(parts[5], ":/") {
		return dispatchQueue{}, false, nil
	}
	if q, ok := d.queues[arn]; ok {
		return q, true, nil
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5])}
	if parts[4] != "" {
		in.QueueOwnerAWSAccountId = aws.String(parts[4])
	}
	out, err := d.cfg.SQS.GetQueueUrl(ctx, in)
	if err != nil {
		return dispatchQueue{}, true, fmt.Errorf("queue of %s: %w", arn, err)
	}
	q = dispatchQueue{url: aws.ToString(out.QueueUrl), fifo: strings.HasSuffix(parts[5], ".fifo")}
	d.queues[arn] = q
	return q, true, nil
}

// dispatchDedupID is the FIFO deduplication id of one occurrence: a hash (64 hex characters,
// within SQS's 128) of the schedule's group, name and scheduled time.
func dispatchDedupID(key StateKey, occ time.Time) string {
	sum := sha256.Sum256([]byte(key.String() + "@" + occ.UTC().Format(time.RFC3339Nano)))
	return hex.EncodeToString(sum[:])
}

// dispatchExecutionID returns a random (version 4) UUID.
func dispatchExecutionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func dispatchNotFound(err error) bool {
	var nf *schedtypes.ResourceNotFoundException
	return errors.As(err, &nf)
}
