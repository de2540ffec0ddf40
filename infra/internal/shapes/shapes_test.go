package shapes

import (
	"encoding/json"
	"fmt"
	"github.com/sqsworker/sqsworker/infra/internal/cfnread"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
	"github.com/sqsworker/sqsworker/infra/jobqueue"
)

var asset string

func TestMain(m *testing.M) { testasset.Main(m, &asset) }

// The tests below check rules every shape must keep, whatever part it turns on, so that a part
// added later cannot break them unnoticed: add a shape for it to All.

// synthesized is every shape, synthesized once (with cdk-nag's AwsSolutions pack on each stack),
// with its template parsed.
var synthesized = sync.OnceValues(func() ([]shape, error) {
	dir, err := os.MkdirTemp(filepath.Dir(asset), "shapes") // removed with the asset's directory
	if err != nil {
		return nil, err
	}
	results, err := synthReporting(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var manifest struct {
		Artifacts map[string]struct {
			Metadata map[string][]struct {
				Type string
				Data any
			}
		}
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		return nil, err
	}
	var out []shape
	for _, r := range results {
		b, err := os.ReadFile(r.Path)
		if err != nil {
			return nil, err
		}
		s := shape{Result: r, stack: "shape-" + r.Shape.Name}
		if err := json.Unmarshal(b, &s.tmpl); err != nil {
			return nil, err
		}
		for path, entries := range manifest.Artifacts[s.stack].Metadata {
			for _, e := range entries {
				if e.Type == "aws:cdk:error" {
					s.errors = append(s.errors, path+": "+render(e.Data))
				}
			}
		}
		out = append(out, s)
	}
	return out, nil
})

// synthReporting synthesizes the shapes with cdk-nag's AwsSolutions pack on each JobQueue (not
// on the shape's own resources). An error finding makes the synthesis fail ("Validation
// failed"): the error then carries the validation report.
func synthReporting(dir string) (results []Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			report, _ := os.ReadFile(filepath.Join(dir, "validation-report.json"))
			err = fmt.Errorf("synth: %v\n%s", r, report)
		}
	}()
	return Synth(dir, "../../cdk.json", asset, func(jq *jobqueue.JobQueue) {
		awscdk.Aspects_Of(jq.Construct).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	})
}

// shape is a synthesized shape: its template and the errors its stack's metadata records.
type shape struct {
	Result
	stack  string
	tmpl   template
	errors []string
}

type template struct {
	Resources map[string]resource
}

type resource struct {
	Type                string
	Properties          map[string]any
	DeletionPolicy      string
	UpdateReplacePolicy string
	DependsOn           any // a logical id or a list of them
	Metadata            map[string]any
}

// path is the resource's construct path below the stack ("Jobs/Table/Resource").
func (s shape) path(r resource) string {
	p, _ := r.Metadata["aws:cdk:path"].(string)
	return strings.TrimPrefix(p, s.stack+"/")
}

// inConstruct reports whether r belongs to the JobQueue (not to the shape's own key, VPC or
// producer role).
func (s shape) inConstruct(r resource) bool { return strings.HasPrefix(s.path(r), "Jobs/") }

// ofType returns the template's resources of a type, by logical id.
func (s shape) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.tmpl.Resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

func shapes(t *testing.T) []shape {
	t.Helper()
	all, err := synthesized()
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// render and list are cfnread's (shared by the infra tests).
var (
	render = cfnread.Render
	list   = cfnread.List
)

// TestSynth: every shape synthesizes to a template holding the worker and its event source, and
// each part's functions, URL, tables and schedules when it is on.
func TestSynth(t *testing.T) {
	all := shapes(t)
	if len(all) != len(All) {
		t.Fatalf("%d templates for %d shapes", len(all), len(All))
	}
	for _, s := range all {
		p := s.JobQueue.Props
		on := func(b bool) int {
			if b {
				return 1
			}
			return 0
		}
		api, outbox, pg, events := on(p.Api != nil), on(p.Outbox != nil), on(p.PostgresOutbox != nil), on(p.Events != nil)
		n := map[string]int{}
		for _, r := range s.tmpl.Resources {
			n[r.Type]++
		}
		if n["AWS::Lambda::Function"] != 1+api+outbox+pg+events || n["AWS::Lambda::Url"] != api || n["AWS::Lambda::EventSourceMapping"] != 1+outbox+len(p.Queues)+events ||
			n["AWS::SQS::Queue"] < 2 || n["AWS::DynamoDB::Table"] != 1+outbox || n["AWS::Scheduler::Schedule"] != outbox+pg ||
			n["AWS::S3::Bucket"] != on(p.PayloadBucket) {
			t.Errorf("%s: resources %v", s.stack, n)
		}
	}
}

// globRegexp turns an IAM ArnLike pattern (* any run of characters, ? one) into a regexp.
func globRegexp(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// TestEveryAlarmCanNotify: in every shape, every alarm notifies the alarm topic and has a name
// (AlarmName, not one CloudFormation generates) that the topic policy's ArnLike aws:SourceArn
// covers; otherwise SNS refuses the alarm's publish (issue 19.1). The pattern is read from the
// policy itself.
func TestEveryAlarmCanNotify(t *testing.T) {
	for _, s := range shapes(t) {
		topics := s.ofType("AWS::SNS::Topic")
		if len(topics) != 1 {
			t.Errorf("%s: %d topics, want the alarm topic only", s.stack, len(topics))
			continue
		}
		var topic string
		for id := range topics {
			topic = render(map[string]any{"Ref": id})
		}
		var pattern string
		for _, pol := range s.ofType("AWS::SNS::TopicPolicy") {
			for _, st := range list(pol.Properties["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if st["Effect"] != "Allow" || render(st["Principal"]) != `{"Service":"cloudwatch.amazonaws.com"}` {
					continue
				}
				cond, _ := st["Condition"].(map[string]any)
				like, _ := cond["ArnLike"].(map[string]any)
				arn := render(like["aws:SourceArn"])
				const prefix = "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:"
				if !strings.HasPrefix(arn, prefix) {
					t.Errorf("%s: the topic policy's aws:SourceArn %s is not this account's alarms", s.stack, arn)
					continue
				}
				pattern = strings.TrimPrefix(arn, prefix)
			}
		}
		if pattern == "" {
			t.Errorf("%s: no topic policy statement lets CloudWatch publish", s.stack)
			continue
		}
		re := globRegexp(pattern)
		alarms := s.ofType("AWS::CloudWatch::Alarm")
		if len(alarms) < 4 {
			t.Errorf("%s: %d alarms", s.stack, len(alarms))
		}
		names := map[string]string{}
		for id, a := range alarms {
			name, ok := a.Properties["AlarmName"].(string)
			switch {
			case !ok:
				t.Errorf("%s: alarm %s has no AlarmName of its own (%v): CloudFormation's generated name is outside the topic policy's %s",
					s.stack, id, a.Properties["AlarmName"], pattern)
			case !re.MatchString(name):
				t.Errorf("%s: alarm %s is named %q, outside the topic policy's %s", s.stack, id, name, pattern)
			case names[name] != "":
				t.Errorf("%s: alarms %s and %s are both named %q", s.stack, names[name], id, name)
			}
			names[name] = id
			if acts := list(a.Properties["AlarmActions"]); len(acts) != 1 || render(acts[0]) != topic {
				t.Errorf("%s: alarm %s notifies %v, want the alarm topic %s", s.stack, id, acts, topic)
			}
		}
	}
}

// TestDeletionProtectionRetainsOnlyTables: in every shape, with deletion protection the job table
// and, with the DynamoDB outbox, the outbox table (it holds jobs committed but not yet sent) are
// retained and protected; nothing else of the construct is retained (log groups, queues,
// schedule groups and schedules, functions, the payload bucket), and without deletion
// protection nothing is. Every part is checked protected in at least one shape.
func TestDeletionProtectionRetainsOnlyTables(t *testing.T) {
	protectedParts := map[string]bool{}
	for _, s := range shapes(t) {
		p := s.JobQueue.Props
		var want []string
		if p.DeletionProtection {
			want = append(want, "Jobs/Table/Resource")
			if p.Outbox != nil {
				want = append(want, "Jobs/OutboxTable/Resource")
			}
			protectedParts["core"] = true
			protectedParts["api"] = protectedParts["api"] || p.Api != nil
			protectedParts["outbox"] = protectedParts["outbox"] || p.Outbox != nil
			protectedParts["postgres outbox"] = protectedParts["postgres outbox"] || p.PostgresOutbox != nil
			protectedParts["payload bucket"] = protectedParts["payload bucket"] || p.PayloadBucket
		}
		var retained []string
		for id, r := range s.tmpl.Resources {
			if !s.inConstruct(r) {
				if s.path(r) == "" {
					t.Errorf("%s: resource %s has no aws:cdk:path", s.stack, id)
				}
				continue
			}
			if r.DeletionPolicy == "Retain" || r.UpdateReplacePolicy == "Retain" || r.DeletionPolicy == "RetainExceptOnCreate" {
				retained = append(retained, s.path(r))
				if r.Type != "AWS::DynamoDB::Table" || r.Properties["DeletionProtectionEnabled"] != true {
					t.Errorf("%s: %s (%s) is retained but not a protected table", s.stack, s.path(r), r.Type)
				}
			}
		}
		slices.Sort(retained)
		slices.Sort(want)
		if !slices.Equal(retained, want) {
			t.Errorf("%s (deletion protection %v): retained %v, want %v", s.stack, p.DeletionProtection, retained, want)
		}
	}
	for _, part := range []string{"core", "api", "outbox", "postgres outbox", "payload bucket"} {
		if !protectedParts[part] {
			t.Errorf("no shape has the %s with deletion protection: add one to All", part)
		}
	}
}

// TestSchedulerTrust: every role EventBridge Scheduler may assume trusts it only for this
// account (aws:SourceAccount) and for one schedule group of the stack (aws:SourceArn, the group's
// ARN: AWS's "Confused deputy prevention" page for Scheduler requires a group's ARN there), and
// every schedule in the template is in the group its role names, so that the condition holds
// when the schedule fires.
func TestSchedulerTrust(t *testing.T) {
	for _, s := range shapes(t) {
		groups := s.ofType("AWS::Scheduler::ScheduleGroup")
		trustedGroup := map[string]string{} // role → the group's logical id (rendered)
		for id, r := range s.ofType("AWS::IAM::Role") {
			for _, st := range list(r.Properties["AssumeRolePolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if render(st["Principal"]) != `{"Service":"scheduler.amazonaws.com"}` {
					continue
				}
				role := render(map[string]any{"Ref": id})
				cond, _ := st["Condition"].(map[string]any)
				eq, _ := cond["StringEquals"].(map[string]any)
				if len(cond) != 1 || len(eq) != 2 || render(eq["aws:SourceAccount"]) != "${AWS::AccountId}" {
					t.Errorf("%s: role %s trusts Scheduler with %s, want StringEquals aws:SourceAccount and aws:SourceArn", s.stack, role, render(cond))
					continue
				}
				ga, _ := eq["aws:SourceArn"].(map[string]any)["Fn::GetAtt"].([]any)
				if len(ga) != 2 || ga[1] != "Arn" || groups[ga[0].(string)].Type == "" {
					t.Errorf("%s: role %s: aws:SourceArn %s is not the ARN of one of the stack's schedule groups", s.stack, role, render(eq["aws:SourceArn"]))
					continue
				}
				trustedGroup[role] = render(map[string]any{"Ref": ga[0]})
			}
		}
		for id, sch := range s.ofType("AWS::Scheduler::Schedule") {
			target := sch.Properties["Target"].(map[string]any)
			ga, _ := target["RoleArn"].(map[string]any)["Fn::GetAtt"].([]any)
			if len(ga) != 2 {
				t.Errorf("%s: schedule %s: role %s", s.stack, id, render(target["RoleArn"]))
				continue
			}
			role := render(map[string]any{"Ref": ga[0]})
			group, ok := trustedGroup[role]
			if !ok {
				t.Errorf("%s: schedule %s runs with %s, which does not trust Scheduler for one schedule group", s.stack, id, role)
				continue
			}
			if got := render(sch.Properties["GroupName"]); got != group {
				t.Errorf("%s: schedule %s is in group %s, but its role %s trusts Scheduler only for %s", s.stack, id, got, role, group)
			}
		}
	}
}

// statements returns every statement of the template's IAM policies, with the policy's id.
func (s shape) statements() map[string][]map[string]any {
	out := map[string][]map[string]any{}
	for id, p := range s.ofType("AWS::IAM::Policy") {
		for _, st := range list(p.Properties["PolicyDocument"].(map[string]any)["Statement"]) {
			out[id] = append(out[id], st.(map[string]any))
		}
	}
	return out
}

// TestPassRoleCondition: in every shape, each iam:PassRole is alone in its statement, on the
// stack's scheduler role only, and conditioned on iam:PassedToService scheduler.amazonaws.com.
func TestPassRoleCondition(t *testing.T) {
	for _, s := range shapes(t) {
		for id, sts := range s.statements() {
			for _, st := range sts {
				actions := list(st["Action"])
				if !slices.Contains(actions, any("iam:PassRole")) {
					continue
				}
				if len(actions) != 1 {
					t.Errorf("%s %s: iam:PassRole shares a statement with %v", s.stack, id, actions)
				}
				if r := list(st["Resource"]); len(r) != 1 || render(r[0]) != "JobsSchedulerRole.Arn" {
					t.Errorf("%s %s: iam:PassRole on %v, want the scheduler role only", s.stack, id, r)
				}
				if c := render(st["Condition"]); c != `{"StringEquals":{"iam:PassedToService":"scheduler.amazonaws.com"}}` {
					t.Errorf("%s %s: iam:PassRole condition %s", s.stack, id, c)
				}
			}
		}
	}
}

// TestSchedulerActionsOnOwnGroup: in every shape, each EventBridge Scheduler action a role is
// allowed (producers', the worker's with WorkerEnqueues, the relays', the API's when a kind
// allows debounce) is on the schedules of the stack's job group only, never on the relays'
// group, another group or "*"; and the API role has Scheduler actions exactly when a kind of
// its allows debounce.
func TestSchedulerActionsOnOwnGroup(t *testing.T) {
	apiScheduling := 0
	for _, s := range shapes(t) {
		own := "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/" + jobqueue.ScheduleGroupName(s.JobQueue.Props.Name) + "/*"
		debounces := false
		if a := s.JobQueue.Props.Api; a != nil {
			for _, k := range a.Kinds {
				debounces = debounces || slices.Contains(k.Dedup, jobqueue.ApiRuleDebounce)
			}
		}
		apiHas := false
		for id, sts := range s.statements() {
			onAPI := strings.Contains(render(s.tmpl.Resources[id].Properties["Roles"]), "JobsApiRole")
			for _, st := range sts {
				var actions []string
				for _, a := range list(st["Action"]) {
					if a := a.(string); strings.HasPrefix(a, "scheduler:") {
						actions = append(actions, a)
					}
				}
				if len(actions) == 0 {
					continue
				}
				apiHas = apiHas || onAPI
				for _, r := range list(st["Resource"]) {
					if render(r) != own {
						t.Errorf("%s %s: %v on %s, want the schedules of the stack's group, %s", s.stack, id, actions, render(r), own)
					}
				}
				if onAPI && !slices.Equal(slices.Sorted(slices.Values(actions)), jobqueue.ApiSchedulerActions) {
					t.Errorf("%s %s: the API is allowed %v, want %v", s.stack, id, actions, jobqueue.ApiSchedulerActions)
				}
			}
		}
		if apiHas != debounces {
			t.Errorf("%s: the API has Scheduler actions: %v; a kind allows debounce: %v", s.stack, apiHas, debounces)
		}
		if apiHas {
			apiScheduling++
		}
	}
	if apiScheduling == 0 {
		t.Error("no shape's API debounces: add one (api-dedup)")
	}
}

// TestNoActionOnEveryResource: no statement of any shape names Resource "*", except
// dynamodb:ListStreams, which has no resource-level permission (the stream event source needs it),
// and the EC2 network-interface actions Lambda needs to attach a function to a VPC (eniActions,
// which Lambda documents on "*" only), alone in a statement of their own.
func TestNoActionOnEveryResource(t *testing.T) {
	for _, s := range shapes(t) {
		for id, sts := range s.statements() {
			for _, st := range sts {
				for _, r := range list(st["Resource"]) {
					if r == "*" && render(st["Action"]) != "dynamodb:ListStreams" && !onlyENIActions(st["Action"]) {
						t.Errorf("%s %s: %s on *", s.stack, id, render(st["Action"]))
					}
				}
			}
		}
	}
}

// onlyENIActions reports whether a statement's actions are all eniActions.
func onlyENIActions(actions any) bool {
	l := list(actions)
	for _, a := range l {
		if s, _ := a.(string); !slices.Contains(eniActions, s) {
			return false
		}
	}
	return len(l) > 0
}

// TestNag: cdk-nag's AwsSolutions pack (and the construct's own, with the API's public URL)
// finds no error in any shape's construct: each finding is fixed or suppressed with a reason.
func TestNag(t *testing.T) {
	for _, s := range shapes(t) {
		for _, e := range s.errors {
			if strings.HasPrefix(e, "/"+s.stack+"/Jobs/") {
				t.Errorf("%s: %s", s.stack, e)
			}
		}
	}
}

// nameLimits are the services' limits on the names the construct sets, written here apart from
// jobqueue/names.go so that the templates are checked against them independently (cfn-lint
// 1.51's schema of AWS::SQS::Queue has no length for QueueName): the property, its length range
// and its characters.
var nameLimits = map[string]struct {
	prop     string
	min, max int
	chars    *regexp.Regexp
}{
	"AWS::SQS::Queue":               {"QueueName", 1, 80, regexp.MustCompile(`^[A-Za-z0-9_-]+(\.fifo)?$`)},
	"AWS::DynamoDB::Table":          {"TableName", 3, 255, regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)},
	"AWS::Scheduler::ScheduleGroup": {"Name", 1, 64, regexp.MustCompile(`^[0-9A-Za-z_.-]+$`)},
	"AWS::Scheduler::Schedule":      {"Name", 1, 64, regexp.MustCompile(`^[0-9A-Za-z_.-]+$`)},
	"AWS::CloudWatch::Alarm":        {"AlarmName", 1, 255, regexp.MustCompile(`^[^\x00-\x1f]+$`)},
	"AWS::CloudWatch::Dashboard":    {"DashboardName", 1, 255, regexp.MustCompile(`^[A-Za-z0-9_-]+$`)},
	"AWS::S3::Bucket":               {"BucketName", 3, 63, regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)},
	// EventBridge CreateEventBus: 1–256 of [/.-_A-Za-z0-9] (names with '/' are partner buses).
	"AWS::Events::EventBus": {"Name", 1, 256, regexp.MustCompile(`^[/.\-_A-Za-z0-9]+$`)},
}

// TestNamesWithinLimits: every name the construct writes into any shape's template is within its
// service's limits, and the long-names shapes (the longest Name jobqueue.MaxNameLength allows for
// each part) reach a limit exactly, so that Validate's check is neither loose nor stricter than
// it must be. A named resource of a type without a limit here fails: add its limit.
func TestNamesWithinLimits(t *testing.T) {
	for _, s := range shapes(t) {
		name := s.JobQueue.Props.Name
		atLimit := false
		for id, r := range s.tmpl.Resources {
			if !s.inConstruct(r) {
				continue
			}
			lim, known := nameLimits[r.Type]
			if !known {
				for prop, v := range r.Properties {
					if str, ok := v.(string); ok && strings.HasSuffix(prop, "Name") && strings.HasPrefix(str, name) {
						t.Errorf("%s: %s (%s) is named %q by %s: add its service's limit to nameLimits", s.stack, id, r.Type, str, prop)
					}
				}
				continue
			}
			v, ok := r.Properties[lim.prop].(string)
			if !ok {
				continue // generated by CloudFormation, or a token
			}
			if len(v) < lim.min || len(v) > lim.max || !lim.chars.MatchString(v) {
				t.Errorf("%s: %s %s %q (%d characters) breaks the service's limit (%d–%d, %s)", s.stack, r.Type, lim.prop, v, len(v), lim.min, lim.max, lim.chars)
			}
			atLimit = atLimit || len(v) == lim.max
		}
		if strings.HasPrefix(s.Shape.Name, "long-names") && !atLimit {
			t.Errorf("%s: Name has %d characters and no derived name reaches its limit: MaxNameLength is stricter than the limits", s.stack, len(name))
		}
	}
}
