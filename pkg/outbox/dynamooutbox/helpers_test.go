package dynamooutbox_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/outbox"
	"github.com/sqsworker/sqsworker/pkg/outbox/dynamooutbox"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTable creates a fresh outbox table on the shared emulator and returns its name.
func newTable(t testing.TB, ddb *dynamodb.Client) string {
	t.Helper()
	name := awslocal.UniqueName("outbox")
	if _, err := dynamooutbox.CreateTable(context.Background(), ddb, name); err != nil {
		t.Fatalf("create table: %v", err)
	}
	return name
}

// newOutbox returns an Outbox on a fresh table; cfg's Client and Table are filled in.
func newOutbox(t testing.TB, cfg dynamooutbox.Config) (*dynamooutbox.Outbox, *dynamodb.Client) {
	t.Helper()
	ddb := awslocaltest.Backend(t).DynamoDB()
	if cfg.Client == nil {
		cfg.Client = ddb
	}
	cfg.Table = newTable(t, ddb)
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	o, err := dynamooutbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o, ddb
}

// insert writes entries as one transaction, the way Prepare and Transact do.
func insert(ctx context.Context, o *dynamooutbox.Outbox, entries []outbox.Entry) error {
	jobs := make([]dynamooutbox.Job, len(entries))
	for i, e := range entries {
		j, err := o.EntryJob(e)
		if err != nil {
			return err
		}
		jobs[i] = j
	}
	_, err := o.Transact(ctx, nil, jobs...)
	return err
}

func gzipWriter(w io.Writer) *gzip.Writer { return gzip.NewWriter(w) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
