package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqsworker/sqsworker/pkg/flow"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// FlowAPI is the part of *flow.Control the Flow page uses: pauses and limits.
type FlowAPI interface {
	Pauses(ctx context.Context) (flow.Pauses, error)
	List(ctx context.Context, q flow.ListQuery) (flow.LimitPage, error)
	PauseKind(ctx context.Context, p flow.Pause) error
	ResumeKind(ctx context.Context, kind string) (bool, error)
	PauseQueue(ctx context.Context, q flow.QueueRef, p flow.Pause) (flow.QueueResult, error)
	ResumeQueue(ctx context.Context, q flow.QueueRef) (flow.QueueResult, error)
}

var _ FlowAPI = (*flow.Control)(nil)

// flowPause is a paused kind or queue, for display.
type flowPause struct {
	Name, Since, By, Note string
}

// flowHolder is a job holding a slot.
type flowHolder struct {
	JobID, Href, Until string
	Expired            bool
}

// flowLimit is a limit item, for display.
type flowLimit struct {
	Type, Name, Key, Use, Detail string
	Holders                      []flowHolder
}

// flowQueue is a queue of the stack's set (Config.Queues) with its pause, for display.
type flowQueue struct {
	Name, SQSName string
	Paused        *flowPause
}

type flowData struct {
	Kinds       []flowPause
	Queue       string // the console's queue ("" without one, or with Queues)
	QueuePaused *flowPause
	// Queues are the stack's queues, each with its pause and actions (Config.Queues); Other are
	// paused queues recorded in the table that the console does not serve.
	Queues    []flowQueue
	Other     []flowPause
	Limits    []flowLimit
	Truncated bool
	ListError string
	FormKind  string
	FormNote  string
}

// flowLimitsShown bounds the items of each type on the page.
const flowLimitsShown = 200

// flowPage shows the paused kinds and queue, with their actions, and the limits with their
// holders.
func (c *Console) flowPage(w http.ResponseWriter, r *http.Request) {
	c.renderFlow(w, r, http.StatusOK, "", "", "")
}

func (c *Console) renderFlow(w http.ResponseWriter, r *http.Request, code int, formKind, formNote, formErr string) {
	v := c.newView(r, "flow", "Flow control")
	if c.cfg.Flow == nil {
		v.Error = "This console has no flow control (give Config.Flow: a *flow.Control on the job table; `sqsworker ui` does when the stack has a table)."
		v.Data = flowData{}
		c.render(w, r, http.StatusOK, v)
		return
	}
	if formErr != "" {
		v.Error = formErr
	}
	ctx := r.Context()
	data := flowData{Queue: c.queueName, FormKind: clip(formKind, 128), FormNote: clip(formNote, 512)}
	pauses, err := c.cfg.Flow.Pauses(ctx)
	if err != nil {
		v.Error, code = "Reading the pauses failed: "+clean(err.Error()), http.StatusBadGateway
	}
	for _, k := range pauses.Kinds {
		data.Kinds = append(data.Kinds, flowPause{Name: clip(k.Kind, 128), Since: showTime(k.At), By: visible(k.By, 128), Note: visible(k.Note, 300)})
	}
	shown := func(q flow.Pause) *flowPause {
		return &flowPause{Name: clip(q.Queue, 80), Since: showTime(q.At), By: visible(q.By, 128), Note: visible(q.Note, 300)}
	}
	if set := c.cfg.Queues; set != nil && set.Len() > 0 {
		// A stack of several queues: a row per queue, each paused and resumed on its own.
		data.Queue = ""
		inSet := map[string]bool{}
		for _, q := range set.All() {
			fq := flowQueue{Name: clip(q.Name, 80), SQSName: clip(q.SQSName(), 80)}
			inSet[q.SQSName()] = true
			for _, p := range pauses.Queues {
				if p.Queue == q.SQSName() {
					fq.Paused = shown(p)
				}
			}
			data.Queues = append(data.Queues, fq)
		}
		for _, p := range pauses.Queues {
			if !inSet[p.Queue] {
				data.Other = append(data.Other, *shown(p))
			}
		}
	} else {
		for _, q := range pauses.Queues {
			if q.Queue == c.queueName {
				data.QueuePaused = shown(q)
			} else {
				data.Other = append(data.Other, *shown(q))
			}
		}
	}
	now := c.cfg.Now()
	for _, typ := range []string{flow.TypeConcurrency, flow.TypeRate} {
		page, err := c.cfg.Flow.List(ctx, flow.ListQuery{Type: typ, Limit: flowLimitsShown, Now: now})
		if err != nil {
			data.ListError = "Listing the limits failed: " + clean(err.Error())
			break
		}
		data.Truncated = data.Truncated || page.NextPageToken != ""
		for _, l := range page.Limits {
			data.Limits = append(data.Limits, c.flowLimitRow(l))
		}
	}
	v.Data = data
	c.render(w, r, code, v)
}

func (c *Console) flowLimitRow(l flow.LimitState) flowLimit {
	row := flowLimit{Type: l.Type, Name: clip(l.Name, 128), Key: "(all)"}
	if l.Key != "" {
		row.Key = visible(l.Key, 80)
	}
	if l.Type == flow.TypeConcurrency {
		live := 0
		for _, h := range l.Holders {
			fh := flowHolder{JobID: h.JobID, Until: showTime(h.LeaseUntil), Expired: h.Expired}
			if h.JobID == "" {
				fh.JobID = "(hashed id)"
			} else if c.cfg.Status != nil {
				fh.Href = c.jobIDHref(h.JobID)
			}
			if !h.Expired {
				live++
			}
			row.Holders = append(row.Holders, fh)
		}
		row.Use = fmt.Sprintf("%d of %d", live, l.Limit)
		return row
	}
	row.Use = fmt.Sprintf("%d of %d free", l.Available, l.Burst)
	row.Detail = fmt.Sprintf("%d per %s, burst %d", l.Limit, l.Period, l.Burst)
	if l.Available == 0 && !l.NextAt.IsZero() {
		row.Detail += ", next at " + showTime(l.NextAt)
	}
	return row
}

// visible returns text from outside (keys, notes) for display: clip escapes control and bidi
// characters and cuts to n runes.
func visible(s string, n int) string { return clip(s, n) }

// flowWho names who acted, for the pause record.
func (c *Console) flowWho(r *http.Request) string {
	who := "console: " + c.who(r, true)
	if len(who) > flow.MaxPauseBy {
		who = who[:flow.MaxPauseBy]
	}
	return who
}

func (c *Console) pauseKindAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	kind, note := strings.TrimSpace(r.PostFormValue("kind")), r.PostFormValue("note")
	al.add("kind", clip(kind, 128))
	if c.cfg.Flow == nil {
		al.fail(errors.New("no flow control"))
		c.refuse(w, r, http.StatusNotFound, "This console has no flow control.")
		return
	}
	err := c.cfg.Flow.PauseKind(r.Context(), flow.Pause{Kind: kind, Note: note, By: c.flowWho(r), At: c.cfg.Now()})
	if err != nil {
		al.fail(err)
		code := http.StatusBadGateway
		msg := "Pausing failed: " + clean(err.Error())
		if errors.Is(err, flow.ErrInvalid) {
			code, msg = http.StatusBadRequest, clean(strings.TrimPrefix(err.Error(), flow.ErrInvalid.Error()+": "))
		}
		c.renderFlow(w, r, code, kind, note, msg)
		return
	}
	c.done(w, r, "/flow", nil, "kind-paused", "Paused kind "+clip(kind, 128)+": workers defer its jobs from their next pause check (within seconds).")
}

func (c *Console) resumeKindAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	kind := strings.TrimSpace(r.PostFormValue("kind"))
	al.add("kind", clip(kind, 128))
	if c.cfg.Flow == nil {
		al.fail(errors.New("no flow control"))
		c.refuse(w, r, http.StatusNotFound, "This console has no flow control.")
		return
	}
	was, err := c.cfg.Flow.ResumeKind(r.Context(), kind)
	switch {
	case errors.Is(err, flow.ErrInvalid):
		al.fail(err)
		c.refuse(w, r, http.StatusBadRequest, clean(strings.TrimPrefix(err.Error(), flow.ErrInvalid.Error()+": ")))
		return
	case err != nil:
		al.fail(err)
		c.refuse(w, r, http.StatusBadGateway, "Resuming failed: "+clean(err.Error()))
		return
	}
	if !was {
		c.done(w, r, "/flow", nil, "kind-not-paused", "Kind "+clip(kind, 128)+" was not paused.")
		return
	}
	c.done(w, r, "/flow", nil, "kind-resumed", "Resumed kind "+clip(kind, 128)+".")
}

func (c *Console) pauseQueueAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	c.setQueuePaused(w, r, al, true)
}

func (c *Console) resumeQueueAction(w http.ResponseWriter, r *http.Request, al *actionLog) {
	c.setQueuePaused(w, r, al, false)
}

// setQueuePaused pauses or resumes a queue (its pause record, under its SQS name, and its Lambda
// event source mappings when the flow control has them): the form's queue, by its name in
// Config.Queues, or without one the console's queue (QueueURL).
func (c *Console) setQueuePaused(w http.ResponseWriter, r *http.Request, al *actionLog, pause bool) {
	name := strings.TrimSpace(r.PostFormValue("queue"))
	queueURL, sqsName, arn := c.cfg.QueueURL, c.queueName, ""
	if name != "" {
		var q queues.Queue
		err := errors.New("no queue set")
		if c.cfg.Queues != nil {
			q, err = c.cfg.Queues.Get(name)
		}
		if err != nil {
			al.add("queue", clip(name, 80))
			al.fail(errors.New("no such queue"))
			c.refuse(w, r, http.StatusBadRequest, "This console has no queue named "+clip(name, 80)+".")
			return
		}
		queueURL, sqsName, arn = q.URL, q.SQSName(), q.ARN
	}
	al.add("queue", clip(sqsName, 80))
	if c.cfg.Flow == nil || sqsName == "" {
		al.fail(errors.New("no flow control or no queue"))
		c.refuse(w, r, http.StatusNotFound, "This console has no flow control, or no queue.")
		return
	}
	ctx := r.Context()
	q := flow.QueueRef{Name: sqsName, ARN: arn}
	if q.ARN == "" && c.cfg.SQS != nil {
		out, err := c.cfg.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			al.fail(err)
			c.refuse(w, r, http.StatusBadGateway, "Reading the queue's ARN failed: "+clean(err.Error()))
			return
		}
		q.ARN = out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	var res flow.QueueResult
	var err error
	if pause {
		res, err = c.cfg.Flow.PauseQueue(ctx, q, flow.Pause{Note: r.PostFormValue("note"), By: c.flowWho(r), At: c.cfg.Now()})
	} else {
		res, err = c.cfg.Flow.ResumeQueue(ctx, q)
	}
	al.add("event_source_mappings", len(res.Mappings))
	if err != nil {
		al.fail(err)
		msg := "The queue's pause failed: " + clean(err.Error())
		if pause && res.Recorded {
			msg = "The pause is recorded (pollers stop), but the Lambda event source mappings could not all be disabled: " + clean(err.Error())
		}
		c.refuse(w, r, http.StatusBadGateway, msg)
		return
	}
	if pause {
		c.done(w, r, "/flow", nil, "queue-paused", "Paused queue "+clip(sqsName, 80)+": nothing is received until it is resumed.")
		return
	}
	c.done(w, r, "/flow", nil, "queue-resumed", "Resumed queue "+clip(sqsName, 80)+".")
}
