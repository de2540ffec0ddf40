package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// Envelope meta keys this package writes (docs/envelope.md). A job's meta says which batch or
// chain it belongs to; the worker's Store counts it there when it finishes.
const (
	// MetaBatch names the batch a child belongs to.
	MetaBatch = "batch"
	// MetaBatchShard is the counter shard (decimal, 0-based) that counts a child of a batch of
	// more than one shard (Spec.CounterShards); absent for a batch of one.
	MetaBatchShard = "batch_shard"
	// MetaChain and MetaChainStep name the chain a step belongs to and its number (1-based).
	MetaChain     = "chain"
	MetaChainStep = "chain_step"
	// MetaChainResult carries the previous step's result (SetResult) into the next step.
	MetaChainResult = "chain_result"
	// MetaSummary carries a batch's Summary (JSON) into its callback.
	MetaSummary = "batch_summary"
)

// group is what a job's meta says it belongs to: a batch (and its counter shard, when the batch
// has several), or a chain's step.
type group struct {
	batch   string
	sharded bool // the batch has counter shards: shard counts the child
	shard   int
	chain   string
	step    int
}

func (g group) String() string {
	if g.batch != "" && g.sharded {
		return fmt.Sprintf("batch %s (counter shard %d)", g.batch, g.shard)
	}
	if g.batch != "" {
		return "batch " + g.batch
	}
	return fmt.Sprintf("chain %s step %d", g.chain, g.step)
}

// groupOf reads a job's meta. ok is false for a job in no batch or chain, and for meta that names
// one badly (it is then not counted anywhere: the worker's Store logs it).
func groupOf(meta map[string]string) (g group, ok bool, err error) {
	if b, isBatch := meta[MetaBatch]; isBatch {
		if err := ValidateID(b); err != nil {
			return group{}, false, err
		}
		raw, isSharded := meta[MetaBatchShard]
		if !isSharded {
			return group{batch: b}, true, nil
		}
		k, err := strconv.Atoi(raw)
		if err != nil || k < 0 || k >= MaxCounterShards || strconv.Itoa(k) != raw {
			return group{}, false, fmt.Errorf("%w: meta %s %q of batch %s is not a shard number", ErrInvalid, MetaBatchShard, raw, b)
		}
		return group{batch: b, sharded: true, shard: k}, true, nil
	}
	ch, isChain := meta[MetaChain]
	if !isChain {
		return group{}, false, nil
	}
	if err := ValidateID(ch); err != nil {
		return group{}, false, err
	}
	step, err := strconv.Atoi(meta[MetaChainStep])
	if err != nil || step < 1 || step > MaxChainSteps {
		return group{}, false, fmt.Errorf("%w: meta %s %q of chain %s is not a step number", ErrInvalid, MetaChainStep, meta[MetaChainStep], ch)
	}
	return group{chain: ch, step: step}, true, nil
}

// withMeta returns m with its envelope's meta extended by kv (pairs of key, value). A message
// that already belongs to a batch or chain is refused.
func withMeta(m producer.Message, kv ...string) (producer.Message, error) {
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		return m, fmt.Errorf("%w: message %s: %v", ErrInvalid, m.ID, err)
	}
	if g, ok, _ := groupOf(env.Meta); ok {
		return m, fmt.Errorf("%w: job %s (%s) already belongs to %s", ErrInvalid, env.ID, env.Kind, g)
	}
	if _, ok := env.Meta[MetaBatchShard]; ok {
		return m, fmt.Errorf("%w: job %s (%s): its meta has %s, which only a batch sets", ErrInvalid, env.ID, env.Kind, MetaBatchShard)
	}
	return setMeta(m, kv...)
}

// setMeta returns m with its envelope's meta extended by kv (pairs of key, value): the body is
// encoded again; the job's id, kind, key and args stay.
func setMeta(m producer.Message, kv ...string) (producer.Message, error) {
	env, err := jobs.ParseEnvelope(m.Body)
	if err != nil {
		return m, fmt.Errorf("%w: message %s: %v", ErrInvalid, m.ID, err)
	}
	if m.ID != "" && env.ID != m.ID {
		return m, fmt.Errorf("%w: message %s: its envelope's id is %q", ErrInvalid, m.ID, env.ID)
	}
	meta := make(map[string]string, len(env.Meta)+len(kv)/2)
	for k, v := range env.Meta {
		meta[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		meta[kv[i]] = kv[i+1]
	}
	env.Meta = meta
	m.Body = string(env.AppendJSON(make([]byte, 0, len(m.Body)+64)))
	m.ID, m.Kind, m.Key = env.ID, env.Kind, env.EffectiveKey()
	return m, nil
}

// Summary is what a batch's callback receives: how its children finished. SummaryFrom reads it
// in the callback.
type Summary struct {
	// Batch is the batch's id.
	Batch string `json:"batch"`
	// Total children, and how many succeeded, were dead-lettered and were cancelled. They add up
	// to Total when the callback is enqueued.
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Dead      int `json:"dead"`
	Cancelled int `json:"cancelled"`
	// NotSucceeded are ids of children that did not succeed (dead or cancelled), at most
	// MaxNotSucceeded of them; More counts the ones left out (Client.Get lists all children).
	NotSucceeded []string `json:"not_succeeded,omitempty"`
	More         int      `json:"more,omitempty"`
	// BatchCancelled reports that the batch was cancelled (Client.Cancel).
	BatchCancelled bool `json:"batch_cancelled,omitempty"`
	// CompletedAt is when the last child finished (or the batch was sealed, if that was later).
	CompletedAt time.Time `json:"completed_at"`
}

type summaryKey struct{}

// SummaryFrom returns the summary of the batch whose callback is running in ctx (its envelope's
// meta, MetaSummary), or false when ctx is not a batch callback's.
func SummaryFrom(ctx context.Context) (Summary, bool) {
	if s, ok := ctx.Value(summaryKey{}).(Summary); ok {
		return s, true
	}
	info, ok := jobs.InfoFromContext(ctx)
	if !ok {
		return Summary{}, false
	}
	raw, ok := info.Meta[MetaSummary]
	if !ok {
		return Summary{}, false
	}
	var s Summary
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return Summary{}, false
	}
	return s, true
}

// WithSummary returns a context whose SummaryFrom is s: for unit tests of a callback's worker.
func WithSummary(ctx context.Context, s Summary) context.Context {
	return context.WithValue(ctx, summaryKey{}, s)
}
