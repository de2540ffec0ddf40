package flow

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// The pause item (PauseKey) has one attribute per paused kind, "k_" + the kind in hex, and one
// per paused queue, "q_" + the queue's name in hex; each holds a Pause as JSON. Names in hex are
// plain identifiers whatever the kind or queue, and decode back exactly.
const (
	pauseKindPrefix  = "k_"
	pauseQueuePrefix = "q_"
)

// Limits of a pause's free text.
const (
	MaxPauseNote = 512 // bytes of Pause.Note
	MaxPauseBy   = 128 // bytes of Pause.By
)

// Pause is a paused kind or queue.
type Pause struct {
	// Kind is the paused kind, or Queue the paused queue's name (one of the two).
	Kind  string `json:"kind,omitempty"`
	Queue string `json:"queue,omitempty"`
	// At is when it was paused.
	At time.Time `json:"at"`
	// By says who paused it, and Note why (free text, shown as it was given: escape it).
	By   string `json:"by,omitempty"`
	Note string `json:"note,omitempty"`
}

// Pauses are the paused kinds and queues.
type Pauses struct {
	Kinds  []Pause
	Queues []Pause
}

// KindPaused reports whether kind is paused.
func (p Pauses) KindPaused(kind string) bool {
	for _, k := range p.Kinds {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

// QueuePaused reports whether the queue named name is paused.
func (p Pauses) QueuePaused(name string) bool {
	for _, q := range p.Queues {
		if q.Queue == name {
			return true
		}
	}
	return false
}

// queueName matches SQS queue names.
var queueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// ValidateQueueName checks an SQS queue name: 1-80 letters, digits, '-' and '_', a FIFO queue's
// ending in ".fifo" (counted).
func ValidateQueueName(name string) error {
	base := strings.TrimSuffix(name, ".fifo")
	if len(name) > 80 || !queueName.MatchString(base) {
		return fmt.Errorf("%w: queue name %q: want 1-80 letters, digits, '-' and '_' (a FIFO queue's ending in .fifo)", ErrInvalid, name)
	}
	return nil
}

// ErrInvalid is wrapped by the errors of requests with bad input (a kind, a queue name, a note).
var ErrInvalid = errors.New("flow: invalid request")

func checkText(field, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, at most %d", ErrInvalid, field, len(s), max)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, field)
	}
	return nil
}

// PauseKind pauses a kind: from the next pause check of each worker (PauseCheck, a few seconds),
// its jobs are deferred without running, without spending attempts and without counting towards
// MaxDeferral, until ResumeKind. One UpdateItem.
func (t *Table) PauseKind(ctx context.Context, p Pause) error {
	if err := jobs.ValidateKind(p.Kind); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	p.Queue = ""
	return t.setPause(ctx, pauseKindPrefix+hex.EncodeToString([]byte(p.Kind)), p)
}

// PauseQueue records a queue as paused: pollers (poller.Config.Paused with QueuePaused) stop
// receiving from it. On AWS, the Lambda event source mappings of the queue must be disabled as
// well: Control.PauseQueue does both. One UpdateItem.
func (t *Table) PauseQueue(ctx context.Context, p Pause) error {
	if err := ValidateQueueName(p.Queue); err != nil {
		return err
	}
	p.Kind = ""
	return t.setPause(ctx, pauseQueuePrefix+hex.EncodeToString([]byte(p.Queue)), p)
}

func (t *Table) setPause(ctx context.Context, attr string, p Pause) error {
	if err := errors.Join(checkText("note", p.Note, MaxPauseNote), checkText("by", p.By, MaxPauseBy)); err != nil {
		return err
	}
	if p.At.IsZero() {
		p.At = time.Now()
	}
	p.At = p.At.UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	e := newExpr()
	_, err = t.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       map[string]types.AttributeValue{idempotency.AttrPK: avS(PauseKey)},
		UpdateExpression:          aws.String("SET " + e.n(attr) + " = " + e.v(avS(string(b)))),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.valuesOrNil(),
	}, keepConnection)
	if err != nil {
		return fmt.Errorf("flow: pause: %w", err)
	}
	return nil
}

// ResumeKind resumes a paused kind and reports whether it was paused. One UpdateItem.
func (t *Table) ResumeKind(ctx context.Context, kind string) (bool, error) {
	if err := jobs.ValidateKind(kind); err != nil {
		return false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return t.clearPause(ctx, pauseKindPrefix+hex.EncodeToString([]byte(kind)))
}

// ResumeQueue clears a queue's pause record and reports whether it had one. One UpdateItem.
func (t *Table) ResumeQueue(ctx context.Context, queue string) (bool, error) {
	if err := ValidateQueueName(queue); err != nil {
		return false, err
	}
	return t.clearPause(ctx, pauseQueuePrefix+hex.EncodeToString([]byte(queue)))
}

func (t *Table) clearPause(ctx context.Context, attr string) (bool, error) {
	e := newExpr()
	a := e.n(attr)
	_, err := t.update(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(t.table),
		Key:                      map[string]types.AttributeValue{idempotency.AttrPK: avS(PauseKey)},
		UpdateExpression:         aws.String("REMOVE " + a),
		ConditionExpression:      aws.String("attribute_exists(" + a + ")"),
		ExpressionAttributeNames: e.names,
	}, keepConnection)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("flow: resume: %w", err)
	}
	return true, nil
}

// Pauses reads the paused kinds and queues: one strongly consistent GetItem (1 read unit while
// the item is under 4 KB: about 25 pauses).
func (t *Table) Pauses(ctx context.Context) (Pauses, error) {
	out, err := t.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.table),
		Key:            map[string]types.AttributeValue{idempotency.AttrPK: avS(PauseKey)},
		ConsistentRead: aws.Bool(true),
	}, keepConnection)
	if err != nil {
		return Pauses{}, fmt.Errorf("flow: read the pauses: %w", err)
	}
	return pausesFromItem(out.Item), nil
}

func pausesFromItem(item map[string]types.AttributeValue) Pauses {
	var ps Pauses
	for name, av := range item {
		s, ok := av.(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		var p Pause
		if json.Unmarshal([]byte(s.Value), &p) != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, pauseKindPrefix):
			k, err := hex.DecodeString(strings.TrimPrefix(name, pauseKindPrefix))
			if err != nil {
				continue
			}
			p.Kind, p.Queue = string(k), ""
			ps.Kinds = append(ps.Kinds, p)
		case strings.HasPrefix(name, pauseQueuePrefix):
			q, err := hex.DecodeString(strings.TrimPrefix(name, pauseQueuePrefix))
			if err != nil {
				continue
			}
			p.Queue, p.Kind = string(q), ""
			ps.Queues = append(ps.Queues, p)
		}
	}
	sort.Slice(ps.Kinds, func(i, j int) bool { return ps.Kinds[i].Kind < ps.Kinds[j].Kind })
	sort.Slice(ps.Queues, func(i, j int) bool { return ps.Queues[i].Queue < ps.Queues[j].Queue })
	return ps
}

// PauseReader reads the pauses (*Table implements it).
type PauseReader interface {
	Pauses(ctx context.Context) (Pauses, error)
}

// pauseCache reads the pauses at most once per ttl; concurrent callers share one read. When a
// read fails the last pauses read stay in force (none before the first success), the caller that
// made the read gets the error, and the read is tried again after ttl.
type pauseCache struct {
	src PauseReader
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	pauses  Pauses
	readAt  time.Time     // when the cached value (or the last failure) was read
	reading chan struct{} // closed when the read under way ends
}

// get returns the pauses, reading them when the cached ones are older than ttl.
func (c *pauseCache) get(ctx context.Context) (Pauses, error) {
	c.mu.Lock()
	for {
		if !c.readAt.IsZero() && c.now().Sub(c.readAt) < c.ttl {
			p := c.pauses
			c.mu.Unlock()
			return p, nil // a failed read was reported to the caller that made it
		}
		if c.reading == nil {
			break
		}
		wait := c.reading
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			c.mu.Lock()
			p := c.pauses
			c.mu.Unlock()
			return p, ctx.Err()
		}
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.reading = done
	c.mu.Unlock()

	p, err := c.src.Pauses(ctx)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.reading = nil
	close(done)
	c.readAt = c.now()
	if err == nil {
		c.pauses = p
	}
	return c.pauses, err
}

// QueueGate returns a function for poller.Config.Paused: it reports whether the queue named queue
// is paused (Table.PauseQueue), reading the pauses at most once per every (defaults to 5 s when
// 0). A failed read keeps the last answer (not paused before the first success).
func QueueGate(src PauseReader, queue string, every time.Duration) func(ctx context.Context) bool {
	if every <= 0 {
		every = DefaultPauseCheck
	}
	c := &pauseCache{src: src, ttl: every, now: time.Now}
	return func(ctx context.Context) bool {
		p, _ := c.get(ctx)
		return p.QueuePaused(queue)
	}
}
