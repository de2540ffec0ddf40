package status

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqsworker/sqsworker/pkg/idempotency"
)

// A redrive of a continued job that died (its continuations or run time used up) resets those
// budgets with its runs, and keeps its cursor, so that it goes on from its last checkpoint;
// keepRuns keeps them all. Get returns them.
func TestResetForRedriveOfAContinuedJob(t *testing.T) {
	t.Parallel()
	tbl, client, name := emulatorTable(t)
	for _, keep := range []bool{false, true} {
		key := map[bool]string{false: "reset", true: "keep"}[keep]
		rec := idempotency.Record{Kind: "export.run", Key: key, JobID: "job-" + key, State: idempotency.StateDead, Runs: 1,
			Reason: "exhausted", LastError: "jobs: the job was continued 1000 times", UpdatedAt: testNow.Add(-time.Hour),
			ExpiresAt: testNow.Add(time.Hour), Continuations: 1000, RunTime: 5 * time.Hour,
			Cursor: idempotency.Cursor{Value: `{"after":"k9"}`, Bytes: 14, Seq: 812, At: testNow.Add(-2 * time.Hour)}}
		if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(name),
			Item: idempotency.ItemFromRecord(rec, idempotency.DefaultShards)}); err != nil {
			t.Fatal(err)
		}
		if err := tbl.ResetForRedrive(context.Background(), "export.run", key, keep); err != nil {
			t.Fatal(err)
		}
		j, err := tbl.Get(context.Background(), "export.run", key)
		if err != nil {
			t.Fatal(err)
		}
		wantConts, wantRun := 0, time.Duration(0)
		if keep {
			wantConts, wantRun = 1000, 5*time.Hour
		}
		if j.State != idempotency.StateRetrying || j.Continuations != wantConts || j.RunTime != wantRun || j.Cursor != rec.Cursor {
			t.Errorf("keepRuns %v: %+v; want retrying, continuations %d, run time %s, the cursor kept", keep, j.Record, wantConts, wantRun)
		}
	}
}
