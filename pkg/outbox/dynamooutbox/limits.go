package dynamooutbox

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/internal/ddbsize"
	"github.com/sqsworker/sqsworker/pkg/outbox"
)

// DynamoDB's limits on one TransactWriteItems call and on an item.
const (
	// MaxTransactionActions is the most actions one TransactWriteItems takes.
	MaxTransactionActions = 100
	// MaxTransactionSize is the most the items of one transaction may add up to: 4 MB.
	MaxTransactionSize = 4 << 20
	// MaxItemSize is the largest DynamoDB item: 400 KB.
	MaxItemSize = 400 << 10
)

// ErrLimit wraps every rejection of a transaction or a job that DynamoDB would refuse for its
// size or its number of actions; it also wraps outbox.ErrInvalid.
var ErrLimit = errors.New("over a DynamoDB limit")

// ItemSize returns the size of an item as DynamoDB counts it against its 400 KB limit
// (internal/ddbsize's rules, which the benchmark also bills writes by).
func ItemSize(item map[string]types.AttributeValue) int { return ddbsize.ItemSize(item) }

// checkTransaction implements Outbox.CheckTransaction; outboxTable is the outbox's table, whose
// item keys it knows.
func checkTransaction(actions []types.TransactWriteItem, outboxTable string) error {
	if len(actions) == 0 {
		return fmt.Errorf("%w: the transaction has no actions", outbox.ErrInvalid)
	}
	if len(actions) > MaxTransactionActions {
		return limitErr("the transaction has %d actions, DynamoDB takes at most %d in one TransactWriteItems: enqueue fewer jobs per transaction",
			len(actions), MaxTransactionActions)
	}
	total := 0
	seen := map[string]int{}
	for i, a := range actions {
		table, k, size, err := describeAction(a, outboxTable)
		if err != nil {
			return fmt.Errorf("%w: action %d: %v", outbox.ErrInvalid, i, err)
		}
		if a.Put != nil && size > MaxItemSize {
			what := "item"
			if table == outboxTable {
				what = "outbox item of job " + outboxID(a.Put.Item)
			}
			return limitErr("action %d: the %s is %d bytes, above DynamoDB's item limit of %d bytes (400 KB)", i, what, size, MaxItemSize)
		}
		total += size
		if k != "" {
			id := table + "\x00" + k
			if j, dup := seen[id]; dup {
				return fmt.Errorf("%w: actions %d and %d both write item %s of table %s: DynamoDB refuses two actions on one item in a transaction",
					outbox.ErrInvalid, j, i, k, table)
			}
			seen[id] = i
		}
	}
	if total > MaxTransactionSize {
		return limitErr("the transaction's items add up to %d bytes, above DynamoDB's limit of %d bytes (4 MB) per TransactWriteItems", total, MaxTransactionSize)
	}
	return nil
}

func limitErr(format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{outbox.ErrInvalid, ErrLimit}, args...)...)
}

// describeAction returns an action's table, its item's key as text ("" when unknown) and its
// size.
func describeAction(a types.TransactWriteItem, outboxTable string) (table, k string, size int, err error) {
	n := 0
	for _, set := range []bool{a.Put != nil, a.Update != nil, a.Delete != nil, a.ConditionCheck != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return "", "", 0, errors.New("want exactly one of Put, Update, Delete and ConditionCheck")
	}
	switch {
	case a.Put != nil:
		table, size = aws.ToString(a.Put.TableName), ItemSize(a.Put.Item)
		if table == outboxTable {
			k = keyText(map[string]types.AttributeValue{AttrPK: a.Put.Item[AttrPK], AttrSK: a.Put.Item[AttrSK]})
		}
	case a.Update != nil:
		table, k, size = aws.ToString(a.Update.TableName), keyText(a.Update.Key), ItemSize(a.Update.Key)+valuesSize(a.Update.ExpressionAttributeValues)
	case a.Delete != nil:
		table, k, size = aws.ToString(a.Delete.TableName), keyText(a.Delete.Key), ItemSize(a.Delete.Key)
	default:
		table, k, size = aws.ToString(a.ConditionCheck.TableName), keyText(a.ConditionCheck.Key), ItemSize(a.ConditionCheck.Key)
	}
	if table == "" {
		return "", "", 0, errors.New("no TableName")
	}
	return table, k, size, nil
}

func valuesSize(values map[string]types.AttributeValue) int {
	n := 0
	for _, v := range values {
		n += ddbsize.ValueSize(v)
	}
	return n
}

// keyText renders a key map deterministically ("" for none).
func keyText(k map[string]types.AttributeValue) string {
	if len(k) == 0 {
		return ""
	}
	names := make([]string, 0, len(k))
	for name := range k {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%s", name, attrText(k[name]))
	}
	return b.String()
}

// outboxID returns the job id of an outbox item, "" when it is not one.
func outboxID(item map[string]types.AttributeValue) string {
	e, _, err := decodeItem(item)
	if err != nil {
		return ""
	}
	return e.ID()
}
