package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
	"github.com/sqsworker/sqsworker/pkg/payload"
	"github.com/sqsworker/sqsworker/pkg/producer"
)

// ChainSpec describes a new chain.
type ChainSpec struct {
	// ID names the chain: 1 to MaxIDLength characters of [A-Za-z0-9._-]. Empty: a new ULID. An id
	// in use is refused with ErrExists.
	ID string
	// Description is shown by listings (at most 256 bytes).
	Description string
}

// PrepareChain returns the actions that create a chain of steps (messages prepared with the
// producers of their queues) and put its first step into the DynamoDB outbox, for a transaction
// of the caller's (StartChain runs them alone). Step k+1 is enqueued, through the outbox, by the
// transaction that records step k's success, with step k's result (SetResult) in its meta; a step
// that is dead-lettered or cancelled stops the chain, which says so (ChainFailed,
// ChainCancelled). A chain has 1 to MaxChainSteps steps; a step of a kind Config.Registry does not
// know is refused with ErrUnknownKind. Nothing is written.
func (c *Client) PrepareChain(spec ChainSpec, steps ...producer.Message) (Tx, error) {
	if spec.ID == "" {
		spec.ID = jobs.NewID()
	}
	if err := ValidateID(spec.ID); err != nil {
		return Tx{}, err
	}
	switch {
	case len(steps) == 0:
		return Tx{}, fmt.Errorf("%w: a chain needs at least one step", ErrInvalid)
	case len(steps) > MaxChainSteps:
		return Tx{}, fmt.Errorf("%w: %d steps, a chain has at most %d (chain the last step's job to a new chain for more)", ErrTooLarge, len(steps), MaxChainSteps)
	case len(spec.Description) > 256:
		return Tx{}, fmt.Errorf("%w: ChainSpec.Description is %d bytes, at most 256", ErrInvalid, len(spec.Description))
	}
	now := c.cfg.Now()
	exp := avN(expSeconds(now.Add(c.cfg.TTL)))
	tagged := make([]producer.Message, len(steps))
	seen := map[string]bool{}
	var items []types.TransactWriteItem
	for i, m := range steps {
		k := i + 1
		if m.QueueURL == "" {
			return Tx{}, fmt.Errorf("%w: step %d (%s) has no queue URL (prepare it with the producer of its queue)", ErrInvalid, k, m.ID)
		}
		t, err := withMeta(m, MetaChain, spec.ID, MetaChainStep, strconv.Itoa(k))
		if err != nil {
			return Tx{}, fmt.Errorf("step %d: %w", k, err)
		}
		if seen[t.ID] {
			return Tx{}, fmt.Errorf("%w: step %d: job %s is a step twice", ErrInvalid, k, t.ID)
		}
		seen[t.ID] = true
		if err := c.checkKind(fmt.Sprintf("step %d", k), t.Kind); err != nil {
			return Tx{}, err
		}
		tagged[i] = t
		item := map[string]types.AttributeValue{
			idempotency.AttrPK: avS(stepKey(spec.ID, k)), attrJob: avS(t.ID), attrKind: avS(t.Kind),
			idempotency.AttrKey: avS(t.Key), idempotency.AttrExpires: exp,
		}
		if err := storedMessage(&t, item); err != nil {
			return Tx{}, fmt.Errorf("step %d: %w", k, err)
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(c.cfg.Table), Item: item}})
	}
	pk := chainKey(spec.ID)
	chain := map[string]types.AttributeValue{
		idempotency.AttrPK: avS(pk), attrVersion: avN(1), idempotency.AttrState: avS(ChainRunning),
		attrCount: avN(int64(len(steps))), attrCurrent: avN(1), attrJob: avS(tagged[0].ID),
		attrCreated: avN(now.UnixMilli()), idempotency.AttrGSI1PK: avS(listPartition(chainPrefix, pk)),
		idempotency.AttrGSI1SK: avN(now.UnixMilli()), idempotency.AttrExpires: exp,
	}
	if spec.Description != "" {
		chain[attrDesc] = avS(spec.Description)
	}
	first, err := c.cfg.Outbox.PrepareMessage(tagged[0])
	if err != nil {
		return Tx{}, fmt.Errorf("batch: chain %s step 1: %w", spec.ID, err)
	}
	items = append([]types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(c.cfg.Table), Item: chain,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": idempotency.AttrPK},
	}}}, items...)
	items = append(items, first.Items...)
	if putBytes(items) > maxTxBytes {
		return Tx{}, fmt.Errorf("%w: the chain's steps take %d bytes, more than one transaction holds: keep large data in S3 and pass references", ErrTooLarge, putBytes(items))
	}
	return Tx{ID: spec.ID, Items: items, what: "chain", pk: pk}, nil
}

// StartChain creates a chain and enqueues its first step, in one transaction (through the
// outbox: a crash leaves the chain with its first step enqueued, or nothing). It returns the
// chain's id. See PrepareChain.
func (c *Client) StartChain(ctx context.Context, spec ChainSpec, steps ...producer.Message) (string, error) {
	tx, err := c.PrepareChain(spec, steps...)
	if err != nil {
		return "", err
	}
	if err := c.Transact(ctx, &noBusiness, tx); err != nil {
		return "", err
	}
	return tx.ID, nil
}

// resultRef is what SetResult keeps in place of a result too large for the job's record.
type resultRef struct {
	S3    json.RawMessage `json:"sqsworker_result_s3"`
	Bytes int             `json:"bytes"`
}

// SetResult stores v (JSON) as the job's result (idempotency.SetResult): a chain passes it to the
// next step (PreviousResult), and status lookups show it. A result larger than a job record keeps
// (idempotency.MaxResultBytes, 16 KiB) is written to S3 through store (the payload store, its key
// the job's payload key + ".result"), and the record keeps a reference; store may be nil when
// results stay small.
func SetResult(ctx context.Context, store *payload.Store, v []byte) error {
	if !json.Valid(v) {
		return fmt.Errorf("%w: the result is not valid JSON", ErrInvalid)
	}
	if len(v) <= idempotency.MaxResultBytes {
		return idempotency.SetResult(ctx, v)
	}
	info, ok := jobs.InfoFromContext(ctx)
	if !ok {
		return errors.New("batch: SetResult outside a job")
	}
	if store == nil {
		return fmt.Errorf("%w: a result of %d bytes needs a payload store (results above %d bytes go to S3)", ErrTooLarge, len(v), idempotency.MaxResultBytes)
	}
	p, err := store.Put(ctx, store.Key(info.ID)+".result", v)
	if err != nil {
		return fmt.Errorf("batch: store the result of %s: %w", info.ID, err)
	}
	ref, err := json.Marshal(resultRef{S3: json.RawMessage(p.Body()), Bytes: len(v)})
	if err != nil {
		return err
	}
	return idempotency.SetResult(ctx, ref)
}

// PreviousResult returns the result the previous step of the chain stored (SetResult), read from
// S3 through store when it was stored there. ok is false when the job running in ctx is a chain's
// first step, is in no chain, or follows a step that stored no result.
func PreviousResult(ctx context.Context, store *payload.Store) (result []byte, ok bool, err error) {
	info, found := jobs.InfoFromContext(ctx)
	if !found {
		return nil, false, nil
	}
	raw, found := info.Meta[MetaChainResult]
	if !found {
		return nil, false, nil
	}
	var ref resultRef
	if json.Unmarshal([]byte(raw), &ref) != nil || len(ref.S3) == 0 {
		return []byte(raw), true, nil
	}
	if store == nil {
		return nil, true, fmt.Errorf("%w: the previous result (%d bytes) is in S3: pass the payload store", ErrInvalid, ref.Bytes)
	}
	p, err := payload.ParsePointer(string(ref.S3))
	if err != nil {
		return nil, true, fmt.Errorf("batch: the previous result's reference: %w", err)
	}
	b, err := store.Get(ctx, p)
	if err != nil {
		return nil, true, fmt.Errorf("batch: read the previous result: %w", err)
	}
	return b, true, nil
}
