package dedup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
	"github.com/sqsworker/sqsworker/pkg/schedule"
)

// Debounce delays a job until no enqueue of its key has arrived for Period: each enqueue of
// the key moves the one job's time to Period after it and gives it its args (the last args
// win), and MaxWait after the first enqueue the job runs whatever arrives, so that a steady
// stream still runs. An enqueue after the job's schedule fired (or when it may fire any
// moment: less than the scheduler's precision plus Config.FireMargin is left) starts the next
// job. Each debounced job is a new job with its own id and key.
//
// On AWS the job waits in one EventBridge Scheduler one-time schedule per key, moved with
// UpdateSchedule on every enqueue; locally the schedule.Dispatcher fires it. The schedule sends
// the job to the queue the producer prepared it for: a kind routed to a named queue
// (producer.Config.Routes, producer.WithQueue) is debounced onto that queue through a
// [QueueScheduler], and a later enqueue that the producer prepares for another queue moves the
// job there, as its args (the last enqueue wins).
type Debounce struct {
	// Key is the debounce key, scoped by kind: at most MaxKeyLength bytes of UTF-8. Empty:
	// derived from the Fields listed, or, without Fields, the kind alone (every job of the kind
	// is one debounced job).
	Key string
	// Fields, with Key empty, are the top-level args fields the derived key covers
	// (["document_id"]: one debounced job per document).
	Fields []string
	// Period is the quiet time after the last enqueue before the job runs: at least 1 s, and on
	// AWS at least a minute plus Config.FireMargin (EventBridge Scheduler fires within the
	// minute of a schedule's time). Required.
	Period time.Duration
	// MaxWait is the longest a job waits after its first enqueue, at least Period. Defaults to
	// 10 × Period.
	MaxWait time.Duration
}

// debounceState is a debounced key's item, as read or written.
type debounceState struct {
	job             string
	first, last, dl time.Time // first enqueue, latest enqueue, deadline (first + MaxWait)
	seq             int64
	env             string
	group           string
	queue           string // the ARN of the job's queue, "" for the default (the scheduler's own)
}

func debounceStateOf(item map[string]types.AttributeValue) debounceState {
	return debounceState{
		job: getS(item, attrDJob), first: time.UnixMilli(getN(item, attrDFirst)), last: time.UnixMilli(getN(item, attrDLast)),
		dl: time.UnixMilli(getN(item, attrDDeadline)), seq: getN(item, attrDSeq), env: getS(item, attrDEnv), group: getS(item, attrDGroup),
		queue: getS(item, attrDQueue),
	}
}

// runAt is when the job is due: Period after the latest enqueue, at its deadline at the latest.
func (s debounceState) runAt(period time.Duration) time.Time {
	t := s.last.Add(period)
	if s.dl.Before(t) {
		return s.dl
	}
	return t
}

// envelope is the job the schedule sends: the latest enqueue's envelope under the job's id.
func (s debounceState) envelope() (jobs.Envelope, error) {
	env, err := jobs.ParseEnvelope(s.env)
	if err != nil {
		return env, fmt.Errorf("the key's item holds no envelope: %w", err)
	}
	env.ID, env.Key = s.job, ""
	return env, nil
}

// margin is how long before a schedule's time it may fire, plus FireMargin: a job whose schedule
// is due within it is not moved any more.
func (e *Enqueuer) margin() time.Duration {
	if e.local {
		return e.fireMargin
	}
	return SchedulerPrecision + e.fireMargin
}

func (e *Enqueuer) checkDebounce(d *Debounce, m producer.Message) error {
	if d.MaxWait == 0 {
		d.MaxWait = 10 * d.Period
	}
	switch {
	case e.sched == nil:
		return &ruleError{msg: "dedup: Debounce needs Config.Scheduler (a *schedule.Client): a debounced job waits in a one-time schedule", also: ErrNeedsScheduler}
	case d.Period <= 0:
		return invalid("Debounce.Period %v: a debounce needs the quiet time after which the job runs (two minutes, say)", d.Period)
	case d.Period < time.Second:
		return invalid("Debounce.Period %v is below 1 s, the schedules' precision", d.Period)
	case d.MaxWait < d.Period:
		return invalid("Debounce.Period %v is longer than Debounce.MaxWait %v: the job would always run at the maximum wait; make it at least the period", d.Period, d.MaxWait)
	case d.Period <= e.margin() && e.local:
		return invalid("Debounce.Period %v is not above Config.FireMargin %v: a job whose schedule is due within the margin is not moved any more, "+
			"and every enqueue would start a job of its own", d.Period, e.margin())
	case d.Period <= e.margin():
		return invalid("Debounce.Period %v is not above %v: EventBridge Scheduler fires within the minute of a schedule's time, so a job whose schedule is due within a minute plus Config.FireMargin "+
			"is not moved any more, and every enqueue would start a job of its own. Use a longer period (or Config.LocalScheduler with the local dispatcher)", d.Period, e.margin())
	case d.Key != "" && len(d.Fields) > 0:
		return invalid("Debounce.Key and Debounce.Fields are both set: give the key, or the args fields to derive it from")
	case !m.RunAt.IsZero():
		return invalid("Debounce with a delay (producer.WithDelay or WithRunAt): the debounce decides when the job runs")
	case m.Key != m.ID && !e.fifo(m):
		return invalid("Debounce with producer.WithKey %q: every debounced job is a job of its own, and one key for all of them would make the worker skip each after the first", m.Key)
	case len(m.Attributes) > 0:
		return invalid("Debounce with message attributes (producer.WithAttributes): a debounced job is sent by EventBridge Scheduler, whose target cannot set them")
	case len(m.Body) > schedule.MaxInputBytes:
		return invalid("Debounce of a job whose envelope is %d bytes: EventBridge Scheduler's target input takes at most %d", len(m.Body), schedule.MaxInputBytes)
	}
	if err := checkKey("Debounce", d.Key); err != nil {
		return err
	}
	if err := checkFields("Debounce", d.Fields); err != nil {
		return err
	}
	return e.checkFIFO("Debounce", m)
}

func (e *Enqueuer) debounce(ctx context.Context, args jobs.Args, d Debounce, opts []producer.Option) (Result, error) {
	res := Result{}
	m, env, err := e.prepare(ctx, args, opts)
	res.Kind = m.Kind
	if err == nil {
		err = e.checkDebounce(&d, m)
	}
	key := d.Key
	if err == nil && key == "" && len(d.Fields) > 0 {
		key, err = argsKey(m.Kind, env.Args, d.Fields)
	}
	var queue string
	if err == nil {
		queue, err = e.jobQueue(m)
	}
	if err != nil {
		res.Err = err
		return res, err
	}
	res.RuleKey = key
	pk := itemPK(DebounceKeyPrefix, m.Kind, key)
	st, name, err := e.gather(ctx, pk, m, queue, d)
	if err != nil {
		res.Err = fmt.Errorf("dedup: debounce %s key %q: %w", m.Kind, key, err)
		return res, res.Err
	}
	res.Outcome, res.ID, res.Key, res.Schedule = Debounced, st.job, st.job, name
	res.RunAt, res.Events = st.runAt(d.Period), int(st.seq)
	return res, nil
}

// openCondition is the condition of a write that joins the key's open job: its schedule is not
// due within the margin (Period after the latest enqueue, nor the deadline).
const openCondition = "attribute_exists(#pk) AND #last > :lastCut AND #dl > :dlCut"

// gather adds the enqueue m, for the queue of ARN queue ("" for the default), to its key's
// job: it joins the open job (one conditional UpdateItem, then the schedule moved) or starts a
// new one (its schedule created first, then the item written), and returns the job's state and
// its schedule's name.
func (e *Enqueuer) gather(ctx context.Context, pk string, m producer.Message, queue string, d Debounce) (debounceState, string, error) {
	for range maxRounds {
		now := e.now()
		values := map[string]types.AttributeValue{
			":lastCut": avN(now.Add(e.margin() - d.Period).UnixMilli()),
			":dlCut":   avN(now.Add(e.margin()).UnixMilli()),
			":now":     avN(now.UnixMilli()),
			":env":     avS(m.Body),
			":one":     avN(1),
		}
		names := map[string]string{"#pk": attrPK, "#last": attrDLast, "#dl": attrDDeadline, "#env": attrDEnv, "#seq": attrDSeq, "#grp": attrDGroup, "#q": attrDQueue}
		update := "SET #last = :now, #env = :env"
		var remove []string
		if m.GroupID != "" {
			values[":grp"] = avS(m.GroupID)
			update += ", #grp = :grp"
		} else {
			remove = append(remove, "#grp")
		}
		if queue != "" {
			values[":q"] = avS(queue)
			update += ", #q = :q"
		} else {
			remove = append(remove, "#q")
		}
		if len(remove) > 0 {
			update += " REMOVE " + strings.Join(remove, ", ")
		}
		update += " ADD #seq :one"
		out, _, refused, err := e.updateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(e.table),
			Key:                       e.key(pk),
			UpdateExpression:          aws.String(update),
			ConditionExpression:       aws.String(openCondition),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
			ReturnValues:              types.ReturnValueAllNew,
		})
		if err != nil {
			return debounceState{}, "", err
		}
		if !refused {
			return e.follow(ctx, pk, debounceStateOf(out.Attributes), d)
		}
		st, name, started, err := e.start(ctx, pk, m, queue, d, now)
		if err != nil || started {
			return st, name, err
		}
		// Another enqueue started the key's job at the same moment: join it.
	}
	return debounceState{}, "", fmt.Errorf("the key's item kept changing (%d attempts)", maxRounds)
}

// start begins a new job for the key with the enqueue m, for the queue of ARN queue ("" for the
// default): its schedule first, so that a process
// stopping before the item is written leaves a job that runs (with m's args) rather than an
// item naming a job that never will; then the item, conditioned on the key having no open job.
// When another enqueue opened one meanwhile, the schedule is deleted again and started is
// false.
func (e *Enqueuer) start(ctx context.Context, pk string, m producer.Message, queue string, d Debounce, now time.Time) (debounceState, string, bool, error) {
	st := debounceState{job: m.ID, first: now, last: now, dl: now.Add(d.MaxWait), seq: 1, env: m.Body, group: m.GroupID, queue: queue}
	env, err := st.envelope()
	if err != nil {
		return st, "", false, err
	}
	name, err := e.scheduleJob(ctx, st, env, st.runAt(d.Period))
	if err != nil {
		return st, "", false, fmt.Errorf("create the job's schedule: %w", err)
	}
	item := map[string]types.AttributeValue{
		attrPK:        avS(pk),
		attrDJob:      avS(st.job),
		attrDFirst:    avN(now.UnixMilli()),
		attrDLast:     avN(now.UnixMilli()),
		attrDDeadline: avN(st.dl.UnixMilli()),
		attrDSeq:      avN(1),
		attrDEnv:      avS(m.Body),
		attrExp:       avN(expSeconds(st.dl.Add(time.Hour))),
	}
	if st.group != "" {
		item[attrDGroup] = avS(st.group)
	}
	if st.queue != "" {
		item[attrDQueue] = avS(st.queue)
	}
	_, refused, err := e.putItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(e.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR #last <= :lastCut OR #dl <= :dlCut"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#last": attrDLast, "#dl": attrDDeadline},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":lastCut": avN(now.Add(e.margin() - d.Period).UnixMilli()),
			":dlCut":   avN(now.Add(e.margin()).UnixMilli()),
		},
	})
	if err == nil && !refused {
		return st, name, true, nil
	}
	if cerr := e.cancelSchedule(ctx, m.ID); cerr != nil {
		err = errors.Join(err, fmt.Errorf("delete the schedule of job %s, which lost the race to start the key's job: %w (it runs with this enqueue's args)", m.ID, cerr))
	}
	return st, "", false, err
}

// jobQueue returns the ARN of the queue a debounced job m goes to when it is not the default
// queue (the scheduler's own), or "" for the default: the queue the producer prepared it for
// (m.QueueURL), found in the producer's queue set. A job of another queue needs its ARN and a
// QueueScheduler; without either it is refused before anything is written.
func (e *Enqueuer) jobQueue(m producer.Message) (string, error) {
	ql, ok := e.prod.(queueLister)
	if !ok || m.QueueURL == "" {
		return "", nil // a producer of one queue: the scheduler's
	}
	set := ql.Queues()
	if set.Len() < 2 {
		return "", nil
	}
	q, ok := set.Find(m.QueueURL)
	switch {
	case !ok:
		return "", invalid("Debounce of %s: the producer prepared the job for queue %s, which is not one of its queues (%s)", m.Kind, m.QueueURL, strings.Join(set.Names(), ", "))
	case q.Name == set.Default().Name:
		return "", nil
	case q.ARN == "":
		return "", invalid("Debounce of %s, which goes to queue %q: the queue's ARN is unknown (%s is not an AWS queue URL to derive it from), and its schedule sends the job there by ARN: "+
			"give queues.Queue.ARN in producer.Config.Queues", m.Kind, q.Name, q.URL)
	}
	if _, ok := e.sched.(QueueScheduler); !ok {
		return "", &ruleError{msg: fmt.Sprintf("dedup: Debounce of %s, which goes to queue %q: Config.Scheduler (%T) sends only to its own queue, the default; "+
			"a debounced job of another queue needs a dedup.QueueScheduler (ScheduleJobOn and RescheduleJobOn: *schedule.Client)", m.Kind, q.Name, e.sched), also: ErrNeedsScheduler}
	}
	return q.ARN, nil
}

// scheduleJob creates the schedule of the job of state st, sending env at at to the job's queue.
func (e *Enqueuer) scheduleJob(ctx context.Context, st debounceState, env jobs.Envelope, at time.Time) (string, error) {
	if st.queue == "" {
		return e.sched.ScheduleJob(ctx, env, at, st.group)
	}
	qs, err := e.queueScheduler(st)
	if err != nil {
		return "", err
	}
	return qs.ScheduleJobOn(ctx, st.queue, env, at, st.group)
}

// rescheduleJob moves the schedule of the job of state st to at, sending env to the job's queue.
func (e *Enqueuer) rescheduleJob(ctx context.Context, st debounceState, env jobs.Envelope, at time.Time) (string, error) {
	if st.queue == "" {
		return e.sched.RescheduleJob(ctx, env, at, st.group)
	}
	qs, err := e.queueScheduler(st)
	if err != nil {
		return "", err
	}
	return qs.RescheduleJobOn(ctx, st.queue, env, at, st.group)
}

// queueScheduler returns the scheduler of a job of another queue than the default (jobQueue
// checked it for this enqueue's queue; an item written by another process may name one).
func (e *Enqueuer) queueScheduler(st debounceState) (QueueScheduler, error) {
	qs, ok := e.sched.(QueueScheduler)
	if !ok {
		return nil, fmt.Errorf("job %s goes to queue %s, and Config.Scheduler (%T) sends only to its own queue: it needs ScheduleJobOn and RescheduleJobOn (*schedule.Client)", st.job, st.queue, e.sched)
	}
	return qs, nil
}

// cancelSchedule deletes a job's schedule when the scheduler can (*schedule.Client can).
func (e *Enqueuer) cancelSchedule(ctx context.Context, jobID string) error {
	c, ok := e.sched.(interface {
		CancelJob(ctx context.Context, jobID string) error
	})
	if !ok {
		return errors.New("Config.Scheduler cannot delete schedules (no CancelJob method)")
	}
	return c.CancelJob(context.WithoutCancel(ctx), jobID)
}

// maxFollowRounds bounds follow's rounds while other enqueues of the key keep writing.
const maxFollowRounds = 8

// follow moves the job's schedule to the state st the enqueue wrote, then reads the item again:
// when a later enqueue wrote meanwhile, its UpdateSchedule may have landed before this one, so
// the schedule is moved again to what the item now says, until the item has not changed across
// a move. The last writer's args and time are what the schedule carries.
func (e *Enqueuer) follow(ctx context.Context, pk string, st debounceState, d Debounce) (debounceState, string, error) {
	var name string
	for range maxFollowRounds {
		env, err := st.envelope()
		if err != nil {
			return st, "", err
		}
		runAt := st.runAt(d.Period)
		name, err = e.rescheduleJob(ctx, st, env, runAt)
		if errors.Is(err, schedule.ErrNotFound) {
			if !runAt.After(e.now().Add(e.margin())) {
				return st, schedule.ScheduleName(st.job), nil // it fired (or is firing) with what it had
			}
			// Not created yet: the enqueue that started the job creates it before writing the
			// item, so this is one that stopped in between, or a schedule deleted by hand.
			if name, err = e.scheduleJob(ctx, st, env, runAt); err != nil {
				return st, "", fmt.Errorf("create the job's schedule: %w", err)
			}
			continue // ScheduleJob keeps a schedule created meanwhile as it is: move it
		}
		if err != nil {
			return st, "", fmt.Errorf("move the job's schedule: %w", err)
		}
		cur, err := e.getItem(ctx, pk)
		if err != nil {
			return st, name, fmt.Errorf("read the key's item after moving its schedule: %w", err)
		}
		if cur == nil {
			return st, name, nil
		}
		now := debounceStateOf(cur)
		if now.job != st.job || now.seq == st.seq {
			return st, name, nil // unchanged, or a new job (its own enqueue schedules it)
		}
		st = now
	}
	return st, name, fmt.Errorf("the key's item kept changing (%d moves)", maxFollowRounds)
}
