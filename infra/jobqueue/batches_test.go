package jobqueue

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

var withBatches synth

// batchesStack synthesizes a stack with the outbox and batches.
func batchesStack(t *testing.T) (assertions.Template, *JobQueue) {
	return withBatches.get(t, Props{Name: "albums", Outbox: &OutboxProps{RelayAsset: assetPath}, Batches: true})
}

// TestBatchesWorker: with Batches the worker gets the outbox table in SQSWORKER_BATCHES_OUTBOX_TABLE
// and PutItem on that table for the outbox's own keys (job#…, fifo#…), nothing more on it; its job
// table grants stay GetItem, PutItem and UpdateItem (the batch's and chain's items are updated
// in the same transactions).
func TestBatchesWorker(t *testing.T) {
	tmpl, _ := batchesStack(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				EnvBatchesOutbox: map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("OutboxTable"))},
			})},
		})
	})
	b, _ := json.Marshal(policyStatements(t, tmpl, "WorkerRole"))
	got := string(b)
	want := `"Action":"dynamodb:PutItem","Condition":{"ForAllValues:StringLike":{"dynamodb:LeadingKeys":["job#*","fifo#*"]}},"Effect":"Allow","Resource":{"Fn::GetAtt":["JobsOutboxTable`
	if !strings.Contains(got, want) {
		t.Errorf("the worker's policy lacks the outbox PutItem for outbox keys:\n%s", got)
	}
	if n := strings.Count(got, "OutboxTable"); n != 1 {
		t.Errorf("the worker's policy names the outbox table %d times, want 1 (PutItem only):\n%s", n, got)
	}
	for _, banned := range []string{"dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:*"} {
		if strings.Contains(got, banned) {
			t.Errorf("the worker's policy allows %s:\n%s", banned, got)
		}
	}
}

// TestBatchesOffByDefault: without Batches the worker has no outbox variable and no grant on the
// outbox table, even with the outbox.
func TestBatchesOffByDefault(t *testing.T) {
	tmpl, _ := outboxStack(t)
	b, _ := json.Marshal(policyStatements(t, tmpl, "WorkerRole"))
	if strings.Contains(string(b), "OutboxTable") {
		t.Errorf("the worker may write to the outbox without Batches:\n%s", b)
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{EnvBatchesOutbox: assertions.Match_Absent()})},
		})
	})
}

// TestBatchesNeedTheOutbox: Batches without Outbox is refused by Validate, before anything is built.
func TestBatchesNeedTheOutbox(t *testing.T) {
	err := Props{Name: "t", WorkerAsset: assetPath, Batches: true}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Batches needs Outbox") {
		t.Errorf("Validate of Batches without Outbox = %v", err)
	}
}

// TestNagBatches: the AwsSolutions pack over a stack with batches: no error, and no suppression
// beyond the outbox's (the worker's PutItem names its table and key prefixes).
func TestNagBatches(t *testing.T) {
	nagCheck(t, 3, func(_ awscdk.Stack, p *Props) { p.Outbox = &OutboxProps{RelayAsset: assetPath}; p.Batches = true })
}
