package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/sqsworker/sqsworker/pkg/dlq"
	"github.com/sqsworker/sqsworker/pkg/queues"
)

// dlqTarget is one dead-letter queue the console works on (Config.DLQ, or one of
// Config.QueueDLQs), with what belongs to that queue alone: its peeks, its purge, its redrive.
// A purge or a redrive of one queue's DLQ forgets that queue's peeks only.
type dlqTarget struct {
	// queue is the queue's name in Config.Queues ("bulk"); "" for the DLQ of a console
	// without a queue set.
	queue string
	// isDefault marks Config.DLQ, the queue the Dead letters page opens on; its links carry no
	// queue parameter.
	isDefault bool
	api       DLQAPI
	url       string
	name      string // the DLQ's SQS name: it confirms a purge
	source    string // the SQS name of the queue a redrive sends to

	redrive  redriveRunner
	snaps    snapshots
	peeks    memo[struct{}, *snapshot]
	purgedAt atomic.Int64 // when this console last purged the DLQ (Unix ns), 0 never
	lastScan atomic.Int64 // when the job page last scanned the DLQ (Unix ns), 0 never
}

// param is the value of the "queue" parameter that names t in links and forms: "" for the
// default queue's DLQ, which needs none.
func (t *dlqTarget) param() string {
	if t.isDefault {
		return ""
	}
	return t.queue
}

// label names t for a person: its queue's name in the set, else its SQS name.
func (t *dlqTarget) label() string {
	if t.queue != "" {
		return t.queue
	}
	return t.name
}

// newDLQTargets builds the DLQs of cfg: Config.DLQ (the default), then one per entry of
// Config.QueueDLQs, in the order of the queue set.
func newDLQTargets(cfg Config, dlqName, queueName string) ([]*dlqTarget, error) {
	if len(cfg.QueueDLQs) > 0 {
		if cfg.Queues == nil {
			return nil, fmt.Errorf("%w: QueueDLQs needs Queues (the queue set that names their queues)", ErrConfig)
		}
		if cfg.DLQ == nil {
			return nil, fmt.Errorf("%w: QueueDLQs needs DLQ (the default queue's, where the Dead letters page opens)", ErrConfig)
		}
	}
	if cfg.DLQ == nil {
		return nil, nil
	}
	def := &dlqTarget{isDefault: true, api: cfg.DLQ, url: cfg.DLQURL, name: dlqName, source: queueName}
	if set := cfg.Queues; set != nil && set.Len() > 0 {
		for _, q := range set.All() {
			if q.DLQURL != "" && queues.NameOf(q.DLQURL) == dlqName {
				def.queue = q.Name
			}
		}
	}
	for name, api := range cfg.QueueDLQs {
		q, err := cfg.Queues.Get(name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w: QueueDLQs[%q]: the queue set has no such queue (its queues: %s)", ErrConfig, name, strings.Join(cfg.Queues.Names(), ", "))
		case api == nil:
			return nil, fmt.Errorf("%w: QueueDLQs[%q] is nil", ErrConfig, name)
		case q.DLQURL == "":
			return nil, fmt.Errorf("%w: QueueDLQs[%q]: the queue has no DLQ in the queue set", ErrConfig, name)
		case queues.NameOf(q.DLQURL) == dlqName:
			return nil, fmt.Errorf("%w: QueueDLQs[%q]: its DLQ is Config.DLQ's; leave it out of QueueDLQs", ErrConfig, name)
		}
	}
	if cfg.Queues == nil || len(cfg.QueueDLQs) == 0 {
		return []*dlqTarget{def}, nil
	}
	var out []*dlqTarget
	seenDef := false
	for _, q := range cfg.Queues.All() {
		if q.Name == def.queue && def.queue != "" {
			out, seenDef = append(out, def), true
			continue
		}
		if api, ok := cfg.QueueDLQs[q.Name]; ok {
			out = append(out, &dlqTarget{queue: q.Name, api: api, url: q.DLQURL, name: queues.NameOf(q.DLQURL), source: q.SQSName()})
		}
	}
	if !seenDef {
		out = append([]*dlqTarget{def}, out...)
	}
	return out, nil
}

// dlqFor returns the DLQ named by a "queue" parameter: the default one for "", else the DLQ of
// that queue of the set; nil when the console has no such DLQ.
func (c *Console) dlqFor(name string) *dlqTarget {
	if name == "" {
		return c.dlq
	}
	for _, t := range c.dlqs {
		if t.queue == name {
			return t
		}
	}
	return nil
}

// dlqOf returns the DLQ a request names with its "queue" parameter (a page's query, an
// action's form), the default queue's without one. A name the console has no DLQ for is
// refused with 404 and never falls back to the default queue: then ok is false and the answer
// is written.
func (c *Console) dlqOf(w http.ResponseWriter, r *http.Request, name string, al *actionLog) (*dlqTarget, bool) {
	if c.dlq == nil {
		if al != nil {
			al.fail(errNoDLQ)
		}
		c.refuse(w, r, http.StatusNotFound, "This console has no dead-letter queue (give Config.DLQ).")
		return nil, false
	}
	t := c.dlqFor(name)
	if t == nil {
		if al != nil {
			al.add("queue", clip(name, 80))
			al.fail(fmt.Errorf("no DLQ for queue %q", clip(name, 80)))
		}
		c.refuse(w, r, http.StatusNotFound, fmt.Sprintf("This console has no dead-letter queue for a queue named %q: nothing was done. Its queues with a DLQ: %s.",
			clip(clean(name), 80), strings.Join(c.dlqLabels(), ", ")))
		return nil, false
	}
	return t, true
}

// dlqLabels names the console's DLQs by their queues.
func (c *Console) dlqLabels() []string {
	var out []string
	for _, t := range c.dlqs {
		out = append(out, clean(t.label()))
	}
	return out
}

// dlqLink returns the console path p with the query and t's queue parameter.
func (c *Console) dlqLink(t *dlqTarget, p string, q url.Values) string {
	if t.param() != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("queue", t.param())
	}
	return c.link(p, q)
}

// deadJobHref is the job page of a dead letter of t: it looks for the dead letter in t.
func (c *Console) deadJobHref(t *dlqTarget, id string) string {
	return c.dlqLink(t, "/job", url.Values{"id": {id}})
}

// queueLink is one queue of the Dead letters page's queue selector.
type queueLink struct {
	Name, DLQ, Href string
	Current         bool
}

// dlqSelector returns the links to every DLQ's Dead letters page, cur marked; none when the
// console has one DLQ.
func (c *Console) dlqSelector(cur *dlqTarget, p string) []queueLink {
	if len(c.dlqs) < 2 {
		return nil
	}
	out := make([]queueLink, 0, len(c.dlqs))
	for _, t := range c.dlqs {
		out = append(out, queueLink{Name: clean(t.label()), DLQ: clean(t.name), Href: c.dlqLink(t, p, nil), Current: t == cur})
	}
	return out
}

// dlqByURL returns the console's DLQ whose queue is url's, or nil.
func (c *Console) dlqByURL(u string) *dlqTarget {
	name := dlq.QueueName(u)
	for _, t := range c.dlqs {
		if t.name == name {
			return t
		}
	}
	return nil
}
