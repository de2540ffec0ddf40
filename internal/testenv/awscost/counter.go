// Package awscost measures what AWS calls cost: it counts the calls an SDK client makes (a
// counting HTTP client, [Counter]) and computes the DynamoDB write request units a write is
// billed ([Schema.WriteUnits], [Ledger]) from the sizes of the items before and after it and the
// indexes it touches, by DynamoDB's published rules (internal/ddbsize). It exists for the
// end-to-end benchmark (bench/e2e) and the write-unit tests, because the emulators we run do not
// report consumed capacity (kumo accepts ReturnConsumedCapacity and returns nothing).
package awscost

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Counter is an HTTP client for the AWS SDK (aws.HTTPClient: set it as the config's
// HTTPClient) that counts the requests it sends, per service and operation, as read from the
// X-Amz-Target header of the JSON protocols ("DynamoDB_20120810.PutItem" counts as
// "dynamodb.PutItem", "AmazonSQS.ReceiveMessage" as "sqs.ReceiveMessage"); requests without it
// count as "other". Every attempt counts, SDK retries included. It is safe for concurrent use.
//
// With OnWrite set, it also reads each DynamoDB PutItem, UpdateItem and DeleteItem request and
// its answer, and calls OnWrite once the answer is in, before the SDK sees it (so in the order of
// the writes of one goroutine). A TransactWriteItems request is one Write per Put, Update and
// Delete action, each marked Transactional (DynamoDB bills a transactional write twice: it
// prepares and commits every item); when DynamoDB cancels the transaction, each is reported with
// ConditionFailed set (nothing was written). That costs a copy of the request and, for errors, of
// the answer: leave it nil while timing.
type Counter struct {
	// Next sends the requests. Defaults to http.DefaultClient.
	Next aws.HTTPClient
	// OnWrite, when set, is told of every DynamoDB write (see Counter).
	OnWrite func(Write)

	mu    sync.Mutex
	calls map[string]int64
}

// Write is a DynamoDB write the Counter saw.
type Write struct {
	// Op is PutItem, UpdateItem or DeleteItem.
	Op string
	// Table is the request's TableName.
	Table string
	// Key is the request's Key (UpdateItem, DeleteItem); Item is PutItem's item.
	Key, Item map[string]types.AttributeValue
	// Status is the answer's HTTP status (0 when the request failed without one).
	Status int
	// ConditionFailed reports a ConditionalCheckFailedException (or a cancelled transaction):
	// billed, but nothing written.
	ConditionFailed bool
	// Transactional reports a write of a TransactWriteItems (Op is "Transact" + its action).
	Transactional bool
}

// Do sends req and counts it.
func (c *Counter) Do(req *http.Request) (*http.Response, error) {
	target := req.Header.Get("X-Amz-Target")
	op := opName(target)
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int64{}
	}
	c.calls[op]++
	c.mu.Unlock()
	next := c.Next
	if next == nil {
		next = http.DefaultClient
	}
	var ws []*Write
	if c.OnWrite != nil && strings.HasPrefix(op, "dynamodb.") {
		switch o := strings.TrimPrefix(op, "dynamodb."); o {
		case "PutItem", "UpdateItem", "DeleteItem":
			body, err := readBody(req)
			if err != nil {
				return nil, err
			}
			w, err := parseWrite(o, body)
			if err != nil {
				return nil, err
			}
			ws = []*Write{w}
		case "TransactWriteItems":
			body, err := readBody(req)
			if err != nil {
				return nil, err
			}
			if ws, err = parseTransaction(body); err != nil {
				return nil, err
			}
		}
	}
	resp, err := next.Do(req)
	if len(ws) == 0 {
		return resp, err
	}
	status, failed := 0, false
	if resp != nil {
		status = resp.StatusCode
		if resp.StatusCode >= 300 {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			if rerr == nil {
				failed = bytes.Contains(b, []byte("ConditionalCheckFailedException")) || bytes.Contains(b, []byte("TransactionCanceledException"))
			}
		}
	}
	for _, w := range ws {
		w.Status, w.ConditionFailed = status, failed
		c.OnWrite(*w)
	}
	return resp, err
}

// parseTransaction returns the writes of a TransactWriteItems request (ConditionCheck actions
// write nothing and are left out).
func parseTransaction(body []byte) ([]*Write, error) {
	var in struct {
		TransactItems []map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("awscost: TransactWriteItems request: %w", err)
	}
	var out []*Write
	for i, a := range in.TransactItems {
		for kind, raw := range a {
			var op string
			switch kind {
			case "Put":
				op = "PutItem"
			case "Update":
				op = "UpdateItem"
			case "Delete":
				op = "DeleteItem"
			default:
				continue
			}
			w, err := parseWrite(op, raw)
			if err != nil {
				return nil, fmt.Errorf("awscost: TransactWriteItems action %d: %w", i, err)
			}
			w.Op, w.Transactional = "Transact"+kind, true
			out = append(out, w)
		}
	}
	return out, nil
}

// readBody reads req's body and puts an equal one back.
func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("awscost: read request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return b, nil
}

// opName turns an X-Amz-Target into "service.Operation".
func opName(target string) string {
	svc, op, ok := strings.Cut(target, ".")
	if !ok {
		return "other"
	}
	switch {
	case strings.HasPrefix(svc, "DynamoDB_"):
		svc = "dynamodb"
	case svc == "AmazonSQS":
		svc = "sqs"
	default:
		svc = strings.ToLower(svc)
	}
	return svc + "." + op
}

// Calls returns the count of each "service.Operation" so far.
func (c *Counter) Calls() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.calls))
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	c.calls = nil
	c.mu.Unlock()
}

// Sum adds up the counts of the operations whose name starts with prefix ("dynamodb.", or ""
// for all).
func Sum(calls map[string]int64, prefix string) int64 {
	var n int64
	for k, v := range calls {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// Format returns the counts as "op=n op=n", sorted by name.
func Format(calls map[string]int64) string {
	names := make([]string, 0, len(calls))
	for k := range calls {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, calls[k])
	}
	return b.String()
}

func parseWrite(op string, body []byte) (*Write, error) {
	var in struct {
		TableName string
		Key, Item map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("awscost: %s request: %w", op, err)
	}
	w := &Write{Op: op, Table: in.TableName}
	var err error
	if w.Key, err = decodeItem(in.Key); err != nil {
		return nil, fmt.Errorf("awscost: %s key: %w", op, err)
	}
	if w.Item, err = decodeItem(in.Item); err != nil {
		return nil, fmt.Errorf("awscost: %s item: %w", op, err)
	}
	return w, nil
}

// decodeItem decodes an item in DynamoDB's JSON wire form.
func decodeItem(raw map[string]json.RawMessage) (map[string]types.AttributeValue, error) {
	if raw == nil {
		return nil, nil
	}
	item := make(map[string]types.AttributeValue, len(raw))
	for name, r := range raw {
		v, err := DecodeValue(r)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		item[name] = v
	}
	return item, nil
}

// DecodeValue decodes one attribute value in DynamoDB's JSON wire form ({"S":"x"}, {"N":"1"},
// {"L":[…]}, …).
func DecodeValue(raw json.RawMessage) (types.AttributeValue, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	if len(m) != 1 {
		return nil, fmt.Errorf("attribute value with %d types, want 1", len(m))
	}
	for t, v := range m {
		switch t {
		case "S":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberS{Value: s}, err
		case "N":
			var s string
			err := json.Unmarshal(v, &s)
			return &types.AttributeValueMemberN{Value: s}, err
		case "B":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return nil, err
			}
			b, err := base64.StdEncoding.DecodeString(s)
			return &types.AttributeValueMemberB{Value: b}, err
		case "BOOL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberBOOL{Value: b}, err
		case "NULL":
			var b bool
			err := json.Unmarshal(v, &b)
			return &types.AttributeValueMemberNULL{Value: b}, err
		case "SS", "NS":
			var ss []string
			if err := json.Unmarshal(v, &ss); err != nil {
				return nil, err
			}
			if t == "SS" {
				return &types.AttributeValueMemberSS{Value: ss}, nil
			}
			return &types.AttributeValueMemberNS{Value: ss}, nil
		case "BS":
			var ss []string
			if err := json.Unmarshal(v, &ss); err != nil {
				return nil, err
			}
			bs := make([][]byte, len(ss))
			for i, s := range ss {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return nil, err
				}
				bs[i] = b
			}
			return &types.AttributeValueMemberBS{Value: bs}, nil
		case "L":
			var rs []json.RawMessage
			if err := json.Unmarshal(v, &rs); err != nil {
				return nil, err
			}
			l := make([]types.AttributeValue, len(rs))
			for i, r := range rs {
				e, err := DecodeValue(r)
				if err != nil {
					return nil, err
				}
				l[i] = e
			}
			return &types.AttributeValueMemberL{Value: l}, nil
		case "M":
			var rm map[string]json.RawMessage
			if err := json.Unmarshal(v, &rm); err != nil {
				return nil, err
			}
			mm, err := decodeItem(rm)
			if mm == nil {
				mm = map[string]types.AttributeValue{}
			}
			return &types.AttributeValueMemberM{Value: mm}, err
		default:
			return nil, fmt.Errorf("unknown attribute type %q", t)
		}
	}
	panic("unreachable")
}
