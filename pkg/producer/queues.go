package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// QueueScheduler is a JobScheduler that can send a job to any queue: a producer of several queues
// (Config.Queues) schedules the delayed jobs of its queues other than the default through it.
// *schedule.Client implements it.
type QueueScheduler interface {
	JobScheduler
	// ScheduleJobOn is ScheduleJob with the target queue given by its ARN.
	ScheduleJobOn(ctx context.Context, queueARN string, env jobs.Envelope, runAt time.Time, groupID string) (string, error)
}

// laneScheduler schedules a queue's delayed jobs through a QueueScheduler.
type laneScheduler struct {
	QueueScheduler
	arn string
}

func (s laneScheduler) ScheduleJob(ctx context.Context, env jobs.Envelope, runAt time.Time, groupID string) (string, error) {
	return s.ScheduleJobOn(ctx, s.arn, env, runAt, groupID)
}

// newRouted builds a producer of several queues: one producer per queue of cfg.Queues (a lane,
// with cfg's settings), and the router in front of them.
func newRouted(cfg Config) (*Producer, error) {
	set := cfg.Queues
	if set == nil {
		return nil, errors.New("producer: Config.Routes needs Config.Queues: routes name queues of a set")
	}
	def := set.Default()
	if cfg.QueueURL != "" && cfg.QueueURL != def.URL {
		return nil, fmt.Errorf("producer: Config.QueueURL %s is not the default queue of Config.Queues (%s, %s): leave QueueURL empty", cfg.QueueURL, def.Name, def.URL)
	}
	if err := set.CheckRoutes(cfg.Routes); err != nil {
		return nil, fmt.Errorf("producer: Config.Routes: %w", err)
	}
	p := &Producer{set: set, routes: cfg.Routes, lanes: make(map[string]*Producer, set.Len())}
	for _, q := range set.All() {
		lc := cfg
		lc.Queues, lc.Routes, lc.QueueURL = nil, nil, q.URL
		if q.Name != def.Name {
			lc.Scheduler, lc.Groups = nil, nil // Cancel is the default queue's producer's
			if qs, ok := cfg.Scheduler.(QueueScheduler); ok && q.ARN != "" {
				lc.Scheduler = laneScheduler{QueueScheduler: qs, arn: q.ARN}
			}
		}
		lane, err := New(lc)
		if err != nil {
			return nil, fmt.Errorf("producer: queue %s: %w", q.Name, err)
		}
		lane.name = q.Name
		p.lanes[q.Name] = lane
		p.order = append(p.order, lane)
	}
	top := *p.lanes[def.Name] // QueueURL, FIFO, Cancel: the default queue's
	top.set, top.routes, top.lanes, top.order = p.set, p.routes, p.lanes, p.order
	return &top, nil
}

// Queues returns the producer's queue set: Config.Queues, or the one queue of Config.QueueURL
// as a set whose only queue is the default.
func (p *Producer) Queues() *queues.Set {
	if p.set != nil {
		return p.set
	}
	s, err := queues.New(queues.Queue{Name: p.name, URL: p.queueURL})
	if err != nil {
		return nil // New checked the URL
	}
	return s
}

// ForQueue returns the producer of one queue of the set (by name; "" for the default): it sends
// every job to that queue, whatever the job's kind. A producer of one queue returns itself for
// its own name.
func (p *Producer) ForQueue(name string) (*Producer, error) {
	if name == "" {
		name = queues.DefaultName
	}
	if p.lanes == nil {
		if name != p.name {
			return nil, fmt.Errorf("producer: %w: %q (this producer sends to one queue, %s)", queues.ErrUnknownQueue, name, p.queueName())
		}
		return p, nil
	}
	if _, err := p.set.Get(name); err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return p.lanes[name], nil
}

// PerQueue returns one producer per queue of the set, the default queue's first, then the
// others in the set's order (a producer of one queue: itself): what outbox.RelayConfig.Producers
// takes, so that a relay sends each job to the queue it was prepared for (and a job without a
// queue to the default).
func (p *Producer) PerQueue() []*Producer {
	if p.lanes == nil {
		return []*Producer{p}
	}
	def := p.lanes[p.set.Default().Name]
	out := []*Producer{def}
	for _, l := range p.order {
		if l != def {
			out = append(out, l)
		}
	}
	return out
}

// route returns the lane of a job of kind with options opts.
func (p *Producer) route(kind string, opts []Option) (*Producer, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	q, err := p.set.Route(p.routes, kind, o.queue)
	if err != nil {
		return nil, &validationError{msg: err.Error(), also: err}
	}
	return p.lanes[q.Name], nil
}

func (p *Producer) enqueueRouted(ctx context.Context, args jobs.Args, opts []Option) (Result, error) {
	kind := kindOf(args)
	if jobs.ValidateKind(kind) != nil {
		return p.lanes[p.set.Default().Name].Enqueue(ctx, args, opts...) // rejected there, as on one queue
	}
	lane, err := p.route(kind, opts)
	if err != nil {
		res := Result{Kind: kind, Err: fmt.Errorf("producer: enqueue %s: %w", kind, err)}
		return res, res.Err
	}
	return lane.Enqueue(ctx, args, opts...)
}

func (p *Producer) prepareRouted(ctx context.Context, args jobs.Args, opts []Option) (Message, error) {
	kind := kindOf(args)
	if jobs.ValidateKind(kind) != nil {
		return p.lanes[p.set.Default().Name].Prepare(ctx, args, opts...)
	}
	lane, err := p.route(kind, opts)
	if err != nil {
		return Message{}, fmt.Errorf("producer: prepare %s: %w", kind, err)
	}
	return lane.Prepare(ctx, args, opts...)
}

// share is one lane's part of a call on several queues.
type share[T any] struct {
	lane  *Producer
	items []T
	at    []int // the items' positions in the caller's slice
}

// split groups items by lane, keeping their order within each lane, with lanes in the order of
// their first item.
func split[T any](lanes []*Producer, laneOf []*Producer, items []T) []*share[T] {
	var out []*share[T]
	byLane := make(map[*Producer]*share[T], len(lanes))
	for i, l := range laneOf {
		if l == nil {
			continue
		}
		s := byLane[l]
		if s == nil {
			s = &share[T]{lane: l}
			byLane[l] = s
			out = append(out, s)
		}
		s.items = append(s.items, items[i])
		s.at = append(s.at, i)
	}
	return out
}

// enqueueBatchRouted is EnqueueBatch on several queues: each queue's jobs go in EnqueueBatch calls
// of their queue's producer (one Observer call per queue), in the order given.
func (p *Producer) enqueueBatchRouted(ctx context.Context, reqs []Request) ([]Result, error) {
	results := make([]Result, len(reqs))
	laneOf := make([]*Producer, len(reqs))
	def := p.lanes[p.set.Default().Name]
	for i := range reqs {
		kind := kindOf(reqs[i].Args)
		if jobs.ValidateKind(kind) != nil {
			laneOf[i] = def // rejected there, with the usual error
			continue
		}
		lane, err := p.route(kind, reqs[i].Options)
		if err != nil {
			results[i] = Result{Kind: kind, Err: fmt.Errorf("producer: job %d (%s): %w", i, kind, err)}
			continue
		}
		laneOf[i] = lane
	}
	var firstErr error
	for _, s := range split(p.order, laneOf, reqs) {
		var res []Result
		var err error
		if s.lane.observer == nil {
			res, err = s.lane.enqueueBatch(ctx, s.items, s.at)
		} else {
			call := Call{Operation: OpEnqueueBatch, QueueURL: s.lane.queueURL, Jobs: len(s.items)}
			octx := s.lane.observer.Start(ctx, call)
			res, err = s.lane.enqueueBatch(octx, s.items, s.at)
			s.lane.observer.End(octx, call, res)
		}
		for k, i := range s.at {
			results[i] = res[k]
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return results, noneSent(results, firstErr)
}

// noneSent returns err when no result was sent or scheduled (what EnqueueBatch and Send return
// when requests were made and none succeeded), else nil.
func noneSent(results []Result, err error) error {
	if err == nil {
		return nil
	}
	for i := range results {
		if results[i].MessageID != "" || results[i].Schedule != "" {
			return nil
		}
	}
	return err
}

// sendRouted is Send on several queues: each message goes to the queue it was prepared for (its
// QueueURL; empty: the default queue), each queue's messages in a Send call of its producer, so
// that a FIFO group's order (a group lives in one queue) is kept.
func (p *Producer) sendRouted(ctx context.Context, msgs []Message) ([]Result, error) {
	results := make([]Result, len(msgs))
	laneOf := make([]*Producer, len(msgs))
	own := msgs
	for i := range msgs {
		u := msgs[i].QueueURL
		if u == "" {
			laneOf[i] = p.lanes[p.set.Default().Name]
			continue
		}
		q, ok := p.set.Find(u)
		if !ok {
			results[i] = Result{ID: msgs[i].ID, Kind: msgs[i].Kind, Key: msgs[i].Key, Err: fmt.Errorf("producer: message %d (%s, id %s): %w", i, msgs[i].Kind, msgs[i].ID,
				&validationError{msg: fmt.Sprintf("the message is for queue %s, which is not one of this producer's queues (%v)", u, p.set.Names()), also: queues.ErrUnknownQueue})}
			continue
		}
		lane := p.lanes[q.Name]
		if u != lane.queueURL { // the same queue under another endpoint's URL
			if &own[0] == &msgs[0] {
				own = append([]Message(nil), msgs...)
			}
			own[i].QueueURL = lane.queueURL
		}
		laneOf[i] = lane
	}
	var firstErr error
	for _, s := range split(p.order, laneOf, own) {
		var res []Result
		var err error
		if s.lane.observer == nil {
			res, err = s.lane.send(ctx, s.items, s.at)
		} else {
			call := Call{Operation: OpSend, QueueURL: s.lane.queueURL, Jobs: len(s.items)}
			octx := s.lane.observer.Start(ctx, call)
			res, err = s.lane.send(octx, s.items, s.at)
			s.lane.observer.End(octx, call, res)
		}
		for k, i := range s.at {
			results[i] = res[k]
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return results, noneSent(results, firstErr)
}
