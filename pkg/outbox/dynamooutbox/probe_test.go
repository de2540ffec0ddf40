package dynamooutbox_test

import (
	"context"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/internal/sdkhttp"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

// probeDDB wraps a DynamoDB client: it records, per operation, the calls made and those made
// without the per-call option that holds the HTTP connection (sdkhttp.KeepConnection), and it
// can fail chosen calls before they reach DynamoDB (fail returns the error, or nil to pass).
type probeDDB struct {
	next dynamooutbox.DynamoDBAPI
	fail func(op string, in any) error

	mu        sync.Mutex
	calls     map[string]int
	unwrapped map[string]int
}

func newProbe(next dynamooutbox.DynamoDBAPI) *probeDDB {
	return &probeDDB{next: next, calls: map[string]int{}, unwrapped: map[string]int{}}
}

// keeps reports whether opts wrap the client's HTTP client with sdkhttp.KeepConnection.
func keeps(opts []func(*dynamodb.Options)) bool {
	o := dynamodb.Options{HTTPClient: &http.Client{}}
	for _, f := range opts {
		f(&o)
	}
	_, plain := o.HTTPClient.(*http.Client)
	return !plain && sdkhttp.KeepConnection(o.HTTPClient) == o.HTTPClient
}

func (p *probeDDB) before(op string, in any, opts []func(*dynamodb.Options)) error {
	p.mu.Lock()
	p.calls[op]++
	if !keeps(opts) {
		p.unwrapped[op]++
	}
	fail := p.fail
	p.mu.Unlock()
	if fail != nil {
		return fail(op, in)
	}
	return nil
}

func (p *probeDDB) counts() (calls, unwrapped map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls, unwrapped = map[string]int{}, map[string]int{}
	for k, v := range p.calls {
		calls[k] = v
	}
	for k, v := range p.unwrapped {
		unwrapped[k] = v
	}
	return calls, unwrapped
}

func (p *probeDDB) setFail(f func(op string, in any) error) {
	p.mu.Lock()
	p.fail = f
	p.mu.Unlock()
}

func (p *probeDDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if err := p.before("TransactWriteItems", in, opts); err != nil {
		return nil, err
	}
	return p.next.TransactWriteItems(ctx, in, opts...)
}

func (p *probeDDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := p.before("GetItem", in, opts); err != nil {
		return nil, err
	}
	return p.next.GetItem(ctx, in, opts...)
}

func (p *probeDDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if err := p.before("BatchGetItem", in, opts); err != nil {
		return nil, err
	}
	return p.next.BatchGetItem(ctx, in, opts...)
}

func (p *probeDDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := p.before("Query", in, opts); err != nil {
		return nil, err
	}
	return p.next.Query(ctx, in, opts...)
}

func (p *probeDDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := p.before("UpdateItem", in, opts); err != nil {
		return nil, err
	}
	return p.next.UpdateItem(ctx, in, opts...)
}

func (p *probeDDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := p.before("DeleteItem", in, opts); err != nil {
		return nil, err
	}
	return p.next.DeleteItem(ctx, in, opts...)
}

// tableProbe is probeDDB's counterpart for CreateTable.
type tableProbe struct {
	dynamooutbox.TableAPI
	*probeDDB
}

func (p tableProbe) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if err := p.before("CreateTable", in, opts); err != nil {
		return nil, err
	}
	return p.TableAPI.CreateTable(ctx, in, opts...)
}

func (p tableProbe) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if err := p.before("DescribeTable", in, opts); err != nil {
		return nil, err
	}
	return p.TableAPI.DescribeTable(ctx, in, opts...)
}
