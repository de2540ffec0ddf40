package jobqueue

import (
	"encoding/json"
	"fmt"
	"github.com/sqsworker/sqsworker/infra/internal/cfnread"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
)

// render and list are cfnread's (shared by the infra tests).
var (
	render = cfnread.Render
	list   = cfnread.List
)

// statement is one Allow statement of an identity policy, rendered.
type statement struct {
	Actions   []string
	Resources []string
	Condition string // rendered JSON of the Condition block ("" when none)
}

// roleStatements returns the statements of every AWS::IAM::Policy attached to a role whose
// logical id starts with role (e.g. "JobsWorkerRole", "Producer").
func roleStatements(t *testing.T, tmpl assertions.Template, role string) []statement {
	t.Helper()
	var out []statement
	for _, p := range *tmpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
		props := (*p)["Properties"].(map[string]any)
		attached := false
		for _, r := range props["Roles"].([]any) {
			if render(r) == role {
				attached = true
			}
		}
		if !attached {
			continue
		}
		for _, s := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			if st["Effect"] != "Allow" {
				t.Errorf("%s: a %v statement: %v", role, st["Effect"], st)
			}
			var stmt statement
			for _, a := range list(st["Action"]) {
				stmt.Actions = append(stmt.Actions, a.(string))
			}
			for _, r := range list(st["Resource"]) {
				stmt.Resources = append(stmt.Resources, render(r))
			}
			if c, ok := st["Condition"]; ok {
				b, _ := json.Marshal(c)
				stmt.Condition = string(b)
			}
			out = append(out, stmt)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no policy statements for role %s", role)
	}
	return out
}

// grants maps each resource of the role's policies to the sorted actions allowed on it.
func grants(t *testing.T, tmpl assertions.Template, role string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, st := range roleStatements(t, tmpl, role) {
		for _, r := range st.Resources {
			for _, a := range st.Actions {
				if !slices.Contains(m[r], a) {
					m[r] = append(m[r], a)
				}
			}
		}
	}
	for r := range m {
		slices.Sort(m[r])
	}
	return m
}

// checkGrants compares a role's grants with want, resource by resource and action by action.
func checkGrants(t *testing.T, role string, got, want map[string][]string) {
	t.Helper()
	for _, r := range slices.Sorted(maps.Keys(want)) {
		w := slices.Sorted(slices.Values(want[r]))
		if !slices.Equal(got[r], w) {
			t.Errorf("%s on %s:\n got  %v\n want %v", role, r, got[r], w)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[r]; !ok {
			t.Errorf("%s has unexpected grants on %s: %v", role, r, got[r])
		}
	}
}

const (
	logsArn     = "JobsWorkerLogs.Arn"
	queueArn    = "JobsQueue.Arn"
	dlqArn      = "JobsDLQ.Arn"
	tableArn    = "JobsTable.Arn"
	schedDLQArn = "JobsSchedulerDLQ.Arn"
	schedRole   = "JobsSchedulerRole.Arn"
)

var (
	consume = []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
	// send is CDK's GrantSendMessages: sending and the look-ups of a principal that may look the
	// queue up (GrantEnqueue's producers, such as the CLI; the worker on its queue and DLQ).
	send = []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"}
	// sendOnly is what a principal that only sends gets (the scheduler role, the API, the relays:
	// their producer calls SendMessage and SendMessageBatch, authorized by sqs:SendMessage).
	sendOnly = []string{"sqs:SendMessage"}
	// The DynamoDB calls of the Lambda worker (functions/worker): pkg/idempotency's DynamoDBStore
	// calls UpdateItem (claim, finish), GetItem (a refused claim, when the backend does not
	// return the old item) and PutItem (replacing an expired record); pkg/flow's middleware
	// (pauses, limits) calls GetItem and UpdateItem only (its TestMiddlewareCallsOnlyGetAndUpdate),
	// so flow control adds no grant; all on the table itself. pkg/worker makes no DynamoDB call.
	workerTable = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
	schedules   = []string{"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule", "scheduler:ListSchedules", "scheduler:UpdateSchedule"}
)

func union(a ...[]string) []string {
	var out []string
	for _, l := range a {
		for _, s := range l {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

func schedulesOf(group string) string {
	return fmt.Sprintf("arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/%s/*", group)
}

// TestWorkerGrants checks the worker role's policy action by action and resource by resource:
// it consumes and re-sends to its own queue (pkg/worker re-sends a job whose RetryAfter is
// beyond the visibility cap, and a job waiting for its run_at), sends to the DLQ, writes its
// logs, and calls exactly GetItem, PutItem and UpdateItem on the table (no index, no Scan, no
// DeleteItem, no batch writes).
func TestWorkerGrants(t *testing.T) {
	tmpl := std(t)
	checkGrants(t, "JobsWorkerRole", grants(t, tmpl, "JobsWorkerRole"), map[string][]string{
		logsArn:  {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn: union(consume, send),
		dlqArn:   send,
		tableArn: workerTable,
	})
}

// TestWorkerGrantsEnqueuing: with WorkerEnqueues and scheduling, the worker also gets what a
// producer gets, on this stack's queue, group and scheduler role only.
func TestWorkerGrantsEnqueuing(t *testing.T) {
	tmpl, _ := enqueuing.get(t, Props{Name: "chain", WorkerEnqueues: true})
	checkGrants(t, "JobsWorkerRole", grants(t, tmpl, "JobsWorkerRole"), map[string][]string{
		logsArn:                   {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                  union(consume, send),
		dlqArn:                    send,
		tableArn:                  workerTable,
		schedulesOf("chain-jobs"): schedules,
		schedRole:                 {"iam:PassRole"},
	})
	tmpl, _ = enqueuingNoSchedule.get(t, Props{Name: "chain2", WorkerEnqueues: true, DisableScheduling: true})
	checkGrants(t, "JobsWorkerRole", grants(t, tmpl, "JobsWorkerRole"), map[string][]string{
		logsArn:  {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn: union(consume, send),
		dlqArn:   send,
		tableArn: workerTable,
	})
}

// TestProducerAndSchedulerGrants checks GrantEnqueue and the scheduler role exactly: the
// scheduler role only sends (EventBridge Scheduler's SQS target and its dead-letter delivery need
// sqs:SendMessage alone), a producer may also look the queue up (the CLI does).
func TestProducerAndSchedulerGrants(t *testing.T) {
	tmpl := std(t)
	checkGrants(t, "Producer", grants(t, tmpl, "Producer"), map[string][]string{
		queueArn:                 send,
		schedulesOf("demo-jobs"): schedules,
		schedRole:                {"iam:PassRole"},
	})
	checkGrants(t, "JobsSchedulerRole", grants(t, tmpl, "JobsSchedulerRole"), map[string][]string{
		queueArn:    sendOnly,
		schedDLQArn: sendOnly,
	})
}

// TestPassRoleCondition: every iam:PassRole statement (the producer's, and the worker's with
// WorkerEnqueues) may pass the scheduler role to EventBridge Scheduler only.
func TestPassRoleCondition(t *testing.T) {
	tmpl, _ := enqueuing.get(t, Props{Name: "chain", WorkerEnqueues: true})
	for name, tm := range map[string]assertions.Template{"demo": std(t), "chain": tmpl} {
		n := 0
		for _, role := range []string{"Producer", "JobsWorkerRole"} {
			for _, st := range roleStatements(t, tm, role) {
				if !slices.Contains(st.Actions, "iam:PassRole") {
					continue
				}
				n++
				if len(st.Actions) != 1 {
					t.Errorf("%s %s: PassRole shares a statement with %v", name, role, st.Actions)
				}
				if want := `{"StringEquals":{"iam:PassedToService":"scheduler.amazonaws.com"}}`; st.Condition != want {
					t.Errorf("%s %s: PassRole condition %s, want %s", name, role, st.Condition, want)
				}
			}
		}
		if want := map[string]int{"demo": 1, "chain": 2}[name]; n != want {
			t.Errorf("%s: %d PassRole statements, want %d", name, n, want)
		}
	}
}

// TestCustomerKeyGrants: with a customer key, WorkerEnqueues and deletion protection, each role
// gets only the data-key actions on the key, on top of its queue grants.
func TestCustomerKeyGrants(t *testing.T) {
	tmpl, _ := keyedShape(t)
	keyArn := "JobsKey.Arn"
	checkGrants(t, "JobsWorkerRole", grants(t, tmpl, "JobsWorkerRole"), map[string][]string{
		logsArn:                 {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                union(consume, send),
		dlqArn:                  send,
		tableArn:                workerTable,
		schedulesOf("enc-jobs"): schedules,
		schedRole:               {"iam:PassRole"},
		keyArn:                  {"kms:Decrypt", "kms:GenerateDataKey"},
	})
	for _, role := range []string{"Producer", "JobsSchedulerRole"} {
		if got := grants(t, tmpl, role)[keyArn]; !slices.Equal(got, []string{"kms:Decrypt", "kms:GenerateDataKey"}) {
			t.Errorf("%s on the key: %v", role, got)
		}
	}
}

// keyedShape is the customer-key stack: a key of the stack's own, WorkerEnqueues, and deletion
// protection.
func keyedShape(t *testing.T) (assertions.Template, *JobQueue) {
	return keyed.getWith(t, func(stack awscdk.Stack) Props {
		key := awskms.NewKey(stack, jsii.String("JobsKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
		return Props{Name: "enc", EncryptionKey: key, WorkerEnqueues: true, DeletionProtection: true}
	})
}

var statusQueries synth

// TestWorkerStatusQueriesGrants: for a worker main that calls pkg/status lookups, Query on each
// index by name (no index wildcard) and BatchGetItem on the table, on top of the usual.
func TestWorkerStatusQueriesGrants(t *testing.T) {
	tmpl, _ := statusQueries.get(t, Props{Name: "st", WorkerStatusQueries: true, DisableScheduling: true})
	checkGrants(t, "JobsWorkerRole", grants(t, tmpl, "JobsWorkerRole"), map[string][]string{
		logsArn:                       {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                      union(consume, send),
		dlqArn:                        send,
		tableArn:                      union(workerTable, []string{"dynamodb:BatchGetItem"}),
		tableArn + "/index/by_status": {"dynamodb:Query"},
		tableArn + "/index/by_id":     {"dynamodb:Query"},
	})
}
