package dedup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbretry"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// Partition key prefixes of this package's items in the job table. A job's item is
// "kind#key" or "#id", and a kind starts with a letter or digit, so "$" keeps these apart from
// every job (as pkg/flow's "$limit#" and "$rate#").
const (
	UniqueKeyPrefix   = "$uniq#"
	DebounceKeyPrefix = "$debounce#"
	ThrottleKeyPrefix = "$throttle#"
)

// MaxKeyLength is the longest rule key (Unique.Key, Debounce.Key, Throttle.Key), in bytes, as a
// job's idempotency key.
const MaxKeyLength = 1024

// Attribute names of this package's items. None is a job record's: the items carry no kind,
// state or job_id, so no index, listing or console count of jobs sees them.
const (
	attrUJob   = "u_job"   // S: the unique key's job id
	attrUKey   = "u_key"   // S: that job's own key, when it is not its id
	attrUAt    = "u_at"    // N: unix ms of the reservation
	attrULease = "u_lease" // N: unix ms: end of the reservation's lease

	attrDJob      = "d_job"      // S: the debounced job's id
	attrDFirst    = "d_first"    // N: unix ms of the first enqueue of the job
	attrDLast     = "d_last"     // N: unix ms of the latest enqueue
	attrDDeadline = "d_deadline" // N: unix ms: first + MaxWait
	attrDSeq      = "d_seq"      // N: enqueues gathered
	attrDEnv      = "d_env"      // S: the latest enqueue's envelope (its own id: d_job replaces it)
	attrDGroup    = "d_group"    // S: the FIFO message group, if any
	attrDQueue    = "d_queue"    // S: the ARN of the job's queue when it is not the default queue

	attrTCount = "t_count" // N: enqueues accepted in the period

	attrExp = idempotency.AttrExpires // N: unix seconds, the table's TTL attribute
	attrPK  = idempotency.AttrPK
)

// itemPK returns prefix + kind + "#" + key, or, when that would exceed idempotency's
// MaxItemKeyBytes, prefix + kind + "#sha256:" + the key's hex SHA-256.
func itemPK(prefix, kind, key string) string {
	if len(prefix)+len(kind)+1+len(key) <= idempotency.MaxItemKeyBytes {
		return prefix + kind + "#" + key
	}
	sum := sha256.Sum256([]byte(key))
	return prefix + kind + "#sha256:" + hex.EncodeToString(sum[:])
}

// checkKey validates a rule key given by the caller.
func checkKey(rule, key string) error {
	switch {
	case len(key) > MaxKeyLength:
		return invalid("%s.Key %.32q… is %d bytes long, the limit is %d", rule, key, len(key), MaxKeyLength)
	case !utf8.ValidString(key):
		return invalid("%s.Key %q is not valid UTF-8", rule, key)
	}
	return nil
}

// ArgsKey returns the rule key a rule without Key derives from a job's args: "args:" + the hex
// SHA-256 of the kind and the canonical JSON of the args (object keys sorted, whitespace
// dropped), or of the object made of the listed top-level fields only (fields the args lack are
// left out). A gateway that scopes keys by caller (functions/api) derives the key with it and
// passes it, scoped, as the rule's Key.
func ArgsKey(kind string, args json.RawMessage, fields []string) (string, error) {
	if err := checkFields("Fields", fields); err != nil {
		return "", err
	}
	return argsKey(kind, args, fields)
}

func argsKey(kind string, args json.RawMessage, fields []string) (string, error) {
	sub := []byte(args)
	if len(fields) > 0 {
		var all map[string]json.RawMessage
		if err := json.Unmarshal(args, &all); err != nil {
			return "", fmt.Errorf("dedup: the args are not a JSON object: %w", err)
		}
		picked := make(map[string]json.RawMessage, len(fields))
		for _, f := range fields {
			if v, ok := all[f]; ok {
				picked[f] = v
			}
		}
		if len(picked) == 0 {
			// Every job of the kind would share one key: a typo in Fields would make the whole
			// kind unique (or throttled, or debounced) as one.
			return "", invalid("none of the fields %q is in the job's args: the key would be the same for every job of %s", fields, kind)
		}
		var err error
		if sub, err = json.Marshal(picked); err != nil {
			return "", err
		}
	}
	h, err := jobs.PayloadHash(kind, sub)
	if err != nil {
		return "", fmt.Errorf("dedup: %w", err)
	}
	return "args:" + h, nil
}

func checkFields(rule string, fields []string) error {
	seen := make(map[string]bool, len(fields))
	for _, f := range fields {
		switch {
		case f == "":
			return invalid("%s.Fields has an empty field name", rule)
		case seen[f]:
			return invalid("%s.Fields lists %q twice", rule, f)
		}
		seen[f] = true
	}
	return nil
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func getS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, name string) int64 {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err == nil {
			return n
		}
	}
	return 0
}

// expSeconds is t in unix seconds rounded up, so that an item never expires before it was asked
// to (pkg/status does the same).
func expSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}

func (e *Enqueuer) key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: avS(pk)}
}

// getItem reads an item with a strongly consistent read; nil when there is none.
func (e *Enqueuer) getItem(ctx context.Context, pk string) (map[string]types.AttributeValue, error) {
	out, err := e.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: e.key(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// putItem runs a PutItem, sent again while a transaction conflict refuses it (internal/ddbretry).
// A refused condition returns the item that refused it (ALL_OLD when the request asks for it;
// nil from backends that do not return it) and refused true.
func (e *Enqueuer) putItem(ctx context.Context, in *dynamodb.PutItemInput) (old map[string]types.AttributeValue, refused bool, err error) {
	_, err = ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.PutItemOutput, error) {
		return e.ddb.PutItem(ctx, in)
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true, nil
	}
	return nil, false, err
}

// updateItem runs an UpdateItem as putItem runs a PutItem.
func (e *Enqueuer) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (out *dynamodb.UpdateItemOutput, old map[string]types.AttributeValue, refused bool, err error) {
	out, err = ddbretry.Call(ctx, ddbretry.Policy{}, func(ctx context.Context) (*dynamodb.UpdateItemOutput, error) {
		return e.ddb.UpdateItem(ctx, in)
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, ccf.Item, true, nil
	}
	return out, nil, false, err
}
