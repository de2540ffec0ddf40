package status

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// The job table is pkg/idempotency's (docs/TABLE.md): this package uses its attribute and index
// names, its shard function and its item decoder, and adds attributes of its own.
const (
	// attrRunAt (N, unix ms) is when a scheduled job is due, written by RecordScheduled.
	attrRunAt = "run_at"
	// attrRequestHash (S) is the hash of the request that reserved the job (QueuedJob.RequestHash),
	// written by ReserveQueued.
	attrRequestHash = "req_hash"
	// attrSentAt (N, unix ms) is when a queued job's message was marked sent (MarkSent).
	attrSentAt = "sent_at"
)

// MaxShards bounds Config.Shards, as the idempotency store bounds its own.
const MaxShards = 1000

// shardPartition returns the by_status partition key of a state's shard: what
// idempotency.StatusPartition gives the items of that shard.
func shardPartition(state idempotency.State, shard int) string {
	return string(state) + "#" + strconv.Itoa(shard)
}

// The stores keep times to the millisecond (truncated) and expiries to the second (rounded up,
// so that a record never expires before it was asked to).
func unixMs(t time.Time) int64 { return t.UnixMilli() }

func expSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func attrS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func attrN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// getS returns a string attribute ("" when absent).
func getS(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name]
	if !ok {
		return "", nil
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s is %T, want a string", name, v)
	}
	return s.Value, nil
}

// getN returns an integer attribute (0, false when absent).
func getN(item map[string]types.AttributeValue, name string) (int64, bool, error) {
	v, ok := item[name]
	if !ok {
		return 0, false, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, fmt.Errorf("attribute %s is %T, want a number", name, v)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("attribute %s: %w", name, err)
	}
	return i, true, nil
}

// jobFromItem decodes a table item.
func jobFromItem(item map[string]types.AttributeValue, now time.Time) (Job, error) {
	rec, err := idempotency.RecordFromItem(item)
	if err != nil {
		return Job{}, fmt.Errorf("status: %w", err)
	}
	pk, _ := getS(item, idempotency.AttrPK)
	// A record under a job's id may have no kind: a dead-lettered message that named a job id
	// but no valid kind (idempotency.DeadMark).
	if rec.Kind == "" && !strings.HasPrefix(pk, idempotency.IDKeyPrefix) || rec.State == "" {
		return Job{}, fmt.Errorf("status: malformed item %q: no kind or state", pk)
	}
	j := Job{Record: rec, Expired: rec.Expired(now)}
	if ms, ok, err := getN(item, attrRunAt); err != nil {
		return Job{}, fmt.Errorf("status: malformed item %q: %w", idempotency.ItemKey(rec.Kind, rec.Key), err)
	} else if ok {
		j.RunAt = time.UnixMilli(ms).UTC()
	}
	if ms, ok, err := getN(item, attrSentAt); err != nil {
		return Job{}, fmt.Errorf("status: malformed item %q: %w", idempotency.ItemKey(rec.Kind, rec.Key), err)
	} else if ok {
		j.SentAt = time.UnixMilli(ms).UTC()
	}
	j.RequestHash, _ = getS(item, attrRequestHash)
	return j, nil
}
