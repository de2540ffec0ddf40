package shapes

import (
	"slices"
	"strings"
	"testing"
)

// The tests below check, on every shape, what would fail the first deploy or grant more than the
// functions call (issue 23, items 1–4; issue 24, item 9: the queues' message size).

// queueMaxMessageSize is the MaximumMessageSize every queue of the construct must have: SQS's
// largest (1 MiB, CreateQueue's documented range 1,024–1,048,576 bytes), which is what the
// producer assumes (pkg/producer MaxMessageSize and MaxBatchRequestSize). Written here apart
// from jobqueue's constant.
const queueMaxMessageSize = 1 << 20

// TestQueuesTakeOneMiB: every queue the construct creates in every shape (the job queue, its DLQ,
// the scheduler DLQ, the DynamoDB outbox's failures queue) says MaximumMessageSize 1,048,576,
// so that a queue created under SQS's old default of 262,144 (or left by an earlier deploy) does
// not refuse a job the producer accepted, or its dead letter.
func TestQueuesTakeOneMiB(t *testing.T) {
	for _, s := range shapes(t) {
		n := 0
		for id, r := range s.ofType("AWS::SQS::Queue") {
			if !s.inConstruct(r) {
				continue
			}
			n++
			if got, _ := r.Properties["MaximumMessageSize"].(float64); got != queueMaxMessageSize {
				t.Errorf("%s: queue %s (%s) has MaximumMessageSize %v, want %d", s.stack, id, s.path(r), r.Properties["MaximumMessageSize"], queueMaxMessageSize)
			}
		}
		if n < 2 {
			t.Errorf("%s: %d queues in the construct, want at least the queue and its DLQ", s.stack, n)
		}
	}
}

// eniActions are what Lambda's developer guide ("Giving Lambda functions access to resources in
// an Amazon VPC", Required IAM permissions) lists for the execution role of a function attached
// to a VPC, all allowed on "*" (DescribeNetworkInterfaces works only so). The AWS managed policy
// AWSLambdaVPCAccessExecutionRole (v3) holds them. Written here apart from jobqueue's list.
var eniActions = []string{
	"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
	"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses",
}

const vpcAccessManagedPolicy = "iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"

// roleID returns the logical id of a function's role (its Role is a GetAtt of the role's Arn).
func roleID(fn resource) string {
	ga, _ := fn.Properties["Role"].(map[string]any)["Fn::GetAtt"].([]any)
	if len(ga) != 2 {
		return ""
	}
	id, _ := ga[0].(string)
	return id
}

// rolePolicies returns the logical ids of the AWS::IAM::Policy resources attached to a role.
func (s shape) rolePolicies(role string) []string {
	var out []string
	for id, p := range s.ofType("AWS::IAM::Policy") {
		for _, r := range list(p.Properties["Roles"]) {
			if ref, _ := r.(map[string]any)["Ref"].(string); ref == role {
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}

// allowed returns, for each action the role's attached policies allow, the resources (rendered)
// and the policies that allow it.
func (s shape) allowed(role string) map[string][]grant {
	out := map[string][]grant{}
	sts := s.statements()
	for _, pol := range s.rolePolicies(role) {
		for _, st := range sts[pol] {
			for _, a := range list(st["Action"]) {
				for _, r := range list(st["Resource"]) {
					out[a.(string)] = append(out[a.(string)], grant{policy: pol, resource: render(r), condition: st["Condition"]})
				}
			}
		}
	}
	return out
}

type grant struct {
	policy, resource string
	condition        any
}

// dependsOn returns a resource's DependsOn as a list.
func dependsOn(r resource) []string {
	var out []string
	for _, d := range list(r.DependsOn) {
		out = append(out, d.(string))
	}
	return out
}

// TestVpcFunctionsCanAttach: every function of the construct that is in a VPC, in every shape,
// has an execution role allowed the ENI actions Lambda needs to attach it (the managed policy
// AWSLambdaVPCAccessExecutionRole, or a policy allowing each of eniActions on "*" that the
// function depends on, so that the permissions exist when CloudFormation creates it: CDK attaches
// the managed policy only to a role it creates itself, and without them the function's create
// fails). A function outside a VPC is allowed no EC2 action at all. At least one shape has a
// function in a VPC.
func TestVpcFunctionsCanAttach(t *testing.T) {
	inVpc := 0
	for _, s := range shapes(t) {
		for id, fn := range s.ofType("AWS::Lambda::Function") {
			if !s.inConstruct(fn) {
				continue
			}
			role := roleID(fn)
			if role == "" {
				t.Errorf("%s: function %s has no role of the template (%s)", s.stack, id, render(fn.Properties["Role"]))
				continue
			}
			acts := s.allowed(role)
			_, vpc := fn.Properties["VpcConfig"]
			if !vpc {
				for a := range acts {
					if strings.HasPrefix(a, "ec2:") {
						t.Errorf("%s: function %s is in no VPC, but its role %s is allowed %s", s.stack, id, role, a)
					}
				}
				continue
			}
			inVpc++
			if strings.Contains(render(s.tmpl.Resources[role].Properties["ManagedPolicyArns"]), vpcAccessManagedPolicy) {
				continue
			}
			deps := dependsOn(fn)
			for _, a := range eniActions {
				ok := false
				for _, g := range acts[a] {
					if g.resource == "*" && g.condition == nil && slices.Contains(deps, g.policy) {
						ok = true
					}
				}
				if !ok {
					t.Errorf("%s: function %s is in a VPC, but its role %s is not allowed %s on * by a policy it depends on (grants %v, DependsOn %v)",
						s.stack, id, role, a, acts[a], deps)
				}
			}
		}
	}
	if inVpc == 0 {
		t.Error("no shape has a function in a VPC: add one to All")
	}
}

// TestReservedConcurrencyOptIn: in every shape a function reserves concurrency only when its
// props ask for it, with that value: the worker with Props.ReservedConcurrency, the API with
// Api.ReservedConcurrency, the relays never. Lambda refuses a reservation that would leave the
// account under 100 unreserved executions, and new accounts often have a quota far below 1,000,
// so a reservation by default would fail the deploy there. Both cases of the API are in All.
func TestReservedConcurrencyOptIn(t *testing.T) {
	seen := map[bool]bool{}
	for _, s := range shapes(t) {
		p := s.JobQueue.Props
		want := map[string]int{"Jobs/Worker/Resource": p.ReservedConcurrency}
		if p.Api != nil {
			want["Jobs/Api/Function/Resource"] = p.Api.ReservedConcurrency
			seen[p.Api.ReservedConcurrency > 0] = true
		}
		for id, fn := range s.ofType("AWS::Lambda::Function") {
			if !s.inConstruct(fn) {
				continue
			}
			got, has := fn.Properties["ReservedConcurrentExecutions"]
			w := want[s.path(fn)]
			switch {
			case w == 0 && has:
				t.Errorf("%s: function %s (%s) reserves %v concurrent executions, which its props do not ask for", s.stack, id, s.path(fn), got)
			case w > 0 && got != float64(w):
				t.Errorf("%s: function %s (%s) reserves %v, want %d", s.stack, id, s.path(fn), got, w)
			}
		}
	}
	if !seen[true] || !seen[false] {
		t.Errorf("the shapes' APIs cover reserved concurrency set %v and unset %v: add the missing case to All", seen[true], seen[false])
	}
}

// sendOnlyRoles are the roles whose code or service only sends to the stack's queues: EventBridge
// Scheduler (the scheduler role: its SQS target and its dead-letter queue need sqs:SendMessage),
// the API and both outbox relays (their producer calls SendMessage and SendMessageBatch, which
// sqs:SendMessage authorizes, and nothing else of SQS). By construct path.
var sendOnlyRoles = []string{"Jobs/SchedulerRole/Resource", "Jobs/Api/Role/Resource", "Jobs/RelayRole/Resource", "Jobs/PgRelayRole/Resource"}

// TestSendOnlyRolesOnlySend: in every shape, the roles of sendOnlyRoles are allowed no SQS action
// but sqs:SendMessage on the stack's job queue and scheduler DLQ (no GetQueueAttributes, no
// GetQueueUrl: none of them looks a queue up). The DynamoDB relay's on-failure queue is the event
// source's grant (Lambda sends there), not the relay's, and is not checked here.
func TestSendOnlyRolesOnlySend(t *testing.T) {
	checked := map[string]bool{}
	for _, s := range shapes(t) {
		for id, r := range s.ofType("AWS::IAM::Role") {
			if !slices.Contains(sendOnlyRoles, s.path(r)) {
				continue
			}
			checked[s.path(r)] = true
			for a, gs := range s.allowed(id) {
				if !strings.HasPrefix(a, "sqs:") {
					continue
				}
				for _, g := range gs {
					if strings.HasPrefix(g.resource, "JobsOutboxRelayFailures") {
						continue
					}
					if a != "sqs:SendMessage" {
						t.Errorf("%s: %s is allowed %s on %s (policy %s): it only sends", s.stack, s.path(r), a, g.resource, g.policy)
					}
				}
			}
		}
	}
	for _, r := range sendOnlyRoles {
		if !checked[r] {
			t.Errorf("no shape has %s", r)
		}
	}
}

// TestNoRoleDeletesPayloads: in every shape with the payload bucket the worker runs with payload
// cleanup "mark" (it tags a settled job's object, and the bucket's lifecycle rule expires it), so
// no role of the construct is allowed s3:DeleteObject (pkg/worker deletes only in cleanup mode
// "delete").
func TestNoRoleDeletesPayloads(t *testing.T) {
	withBucket := 0
	for _, s := range shapes(t) {
		if !s.JobQueue.Props.PayloadBucket {
			continue
		}
		withBucket++
		for id, fn := range s.ofType("AWS::Lambda::Function") {
			if s.path(fn) != "Jobs/Worker/Resource" {
				continue
			}
			env, _ := fn.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			if env["SQSWORKER_PAYLOAD_CLEANUP"] != "mark" {
				t.Errorf("%s: worker %s runs with SQSWORKER_PAYLOAD_CLEANUP=%v, want mark", s.stack, id, env["SQSWORKER_PAYLOAD_CLEANUP"])
			}
		}
		for id, r := range s.ofType("AWS::IAM::Role") {
			if !s.inConstruct(r) {
				continue
			}
			if gs := s.allowed(id)["s3:DeleteObject"]; len(gs) > 0 {
				t.Errorf("%s: %s is allowed s3:DeleteObject on %v", s.stack, s.path(r), gs)
			}
		}
	}
	if withBucket == 0 {
		t.Error("no shape has the payload bucket")
	}
}

// TestRelaySecretKeyGrant: in every shape whose PostgreSQL relay reads a secret under a customer
// key (the key the secret names, or PostgresOutboxProps.DatabaseSecretKey for an imported one),
// the relay's role is allowed kms:Decrypt on that key, through Secrets Manager only; without it
// every read of the secret is refused. At least one shape has such a secret.
func TestRelaySecretKeyGrant(t *testing.T) {
	keyed := 0
	for _, s := range shapes(t) {
		o := s.JobQueue.Props.PostgresOutbox
		if o == nil || o.DatabaseSecret == nil {
			continue
		}
		var keys []string
		for _, k := range []interface{ KeyArn() *string }{o.DatabaseSecret.EncryptionKey(), o.DatabaseSecretKey} {
			if k != nil && k.KeyArn() != nil && !strings.Contains(*k.KeyArn(), "${Token") {
				keys = append(keys, *k.KeyArn())
			}
		}
		var role string
		for id, r := range s.ofType("AWS::IAM::Role") {
			if s.path(r) == "Jobs/PgRelayRole/Resource" {
				role = id
			}
		}
		gs := s.allowed(role)["kms:Decrypt"]
		for _, k := range keys {
			keyed++
			ok := false
			for _, g := range gs {
				if g.resource == k && strings.HasPrefix(render(g.condition), `{"StringEquals":{"kms:ViaService":{"Fn::Join":["",["secretsmanager.",{"Ref":"AWS::Region"},".amazonaws.com"]]}}}`) {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s: the relay's secret is under the key %s, but its role is allowed kms:Decrypt only on %v", s.stack, k, gs)
			}
		}
	}
	if keyed == 0 {
		t.Error("no shape's relay reads a secret under a customer key of a known ARN: add one to All")
	}
}
