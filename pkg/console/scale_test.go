package console_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqsworker/sqsworker/pkg/awslocal"
	"github.com/sqsworker/sqsworker/pkg/awslocal/awslocaltest"
	"github.com/sqsworker/sqsworker/pkg/console"
	"github.com/sqsworker/sqsworker/pkg/idempotency"
	"github.com/sqsworker/sqsworker/pkg/status"
)

var jobIDCell = regexp.MustCompile(`<td class="id"><a href="[^"]*"(?: title="[^"]*")?>([^<]+)</a></td>`)

// TestJobsPageAtScale: with 1,200 dead jobs in the table, the Jobs page pages through all of
// them, newest first, without a repeat or a gap. Their update times are distinct: the embedded
// emulator returns equal sort keys of one index partition in random order (docs/ARCHITECTURE.md
// §6), which DynamoDB does not.
func TestJobsPageAtScale(t *testing.T) {
	ctx := context.Background()
	b := awslocaltest.Backend(t)
	ddb := b.DynamoDB()
	tbl, err := awslocal.ProvisionTable(ctx, ddb, awslocal.UniqueName("console-scale"))
	if err != nil {
		t.Fatal(err)
	}
	const n = 1200
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	var want []string // newest first
	var batch []ddbtypes.WriteRequest
	flush := func() {
		t.Helper()
		for len(batch) > 0 {
			out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{tbl: batch}})
			if err != nil {
				t.Fatal(err)
			}
			batch = out.UnprocessedItems[tbl]
		}
	}
	for i := range n {
		id := fmt.Sprintf("scale-%04d", i)
		upd := base.Add(time.Duration(i) * 5 * time.Second)
		rec := idempotency.Record{Kind: "image.resize", Key: "k-" + id, JobID: id, State: idempotency.StateDead, Runs: 3,
			Reason: "exhausted", LastError: "corrupt image " + id, UpdatedAt: upd, ExpiresAt: time.Now().Add(24 * time.Hour),
			FirstAttemptAt: upd.Add(-time.Minute), LastAttemptAt: upd}
		batch = append(batch, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: idempotency.ItemFromRecord(rec, idempotency.DefaultShards)}})
		if len(batch) == 25 {
			flush()
		}
		want = append([]string{id}, want...)
	}
	flush()
	table, err := status.New(status.Config{Client: ddb, Table: tbl})
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Config{Status: table, Token: token, PageSize: 100, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cl := newClient(t, c)
	var got []string
	path, pages := "/jobs?state=dead", 0
	for path != "" {
		code, body := cl.get(path)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, code, body)
		}
		pages++
		rows := jobIDCell.FindAllStringSubmatch(body, -1)
		if len(rows) > 100 {
			t.Errorf("page %d has %d rows, want at most 100", pages, len(rows))
		}
		for _, m := range rows {
			got = append(got, m[1])
		}
		path = ""
		if i := strings.Index(body, `id="next"`); i >= 0 {
			j := strings.LastIndex(body[:i], `href="`)
			p := body[j+len(`href="`):]
			path = html.UnescapeString(p[:strings.IndexByte(p, '"')])
		}
		if pages > 20 {
			t.Fatal("the pages never end")
		}
	}
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("job %s listed %d times", id, k)
		}
	}
	if len(seen) != n {
		t.Errorf("walked %d distinct jobs in %d pages, want all %d", len(seen), pages, n)
	}
	if len(got) == len(want) {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("position %d: %s, want %s (newest first)", i, got[i], want[i])
				break
			}
		}
	}
	if pages < 12 || pages > 13 {
		t.Errorf("%d pages of 100 for 1,200 jobs, want 12 (or 13 with an empty last one)", pages)
	}
}
