package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
	"github.com/sqsworker/sqsworker/infra/jobqueue"
)

// The app tests share one Node process (jsii) with nothing else in this package: no t.Parallel.

var workerZip string

func TestMain(m *testing.M) { testasset.Main(m, &workerZip) }

func TestPropsFromContext(t *testing.T) {
	ctx := map[string]string{"stack": "demo", "fifo": "true", "timeout": "1m", "maxConcurrency": "50", "reservedConcurrency": "60", "workerEnqueues": "true",
		"workerStatusQueries": "true", "recursiveLoop": "Allow", "payloadBucket": "true"}
	p, err := PropsFromContext(func(k string) string { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "demo" || !p.FIFO || p.Timeout != time.Minute || p.MaxConcurrency != 50 || p.ReservedConcurrency != 60 || !p.WorkerEnqueues ||
		!p.WorkerStatusQueries || p.RecursiveLoop != awslambda.RecursiveLoop_ALLOW || !p.PayloadBucket {
		t.Fatalf("props = %+v", p)
	}
	if p.Outbox != nil {
		t.Fatalf("an outbox without -c outbox=true: %+v", p.Outbox)
	}
	p, err = PropsFromContext(func(k string) string { return map[string]string{"outbox": "true", "relayAsset": "r.zip"}[k] })
	if err != nil || p.Outbox == nil || p.Outbox.RelayAsset != "r.zip" {
		t.Fatalf("outbox=true: %+v, %v", p.Outbox, err)
	}
	p, err = PropsFromContext(func(k string) string {
		return map[string]string{"events": "true", "eventBus": "stack", "eventsAsset": "e.zip"}[k]
	})
	if err != nil || p.Events == nil || !p.Events.CreateBus || p.Events.Asset != "e.zip" {
		t.Fatalf("events=true: %+v, %v", p.Events, err)
	}
	if _, err := PropsFromContext(func(k string) string { return map[string]string{"events": "true", "eventBus": "mine"}[k] }); err == nil {
		t.Fatal("eventBus=mine accepted")
	}
	p, err = PropsFromContext(func(string) string { return "" })
	if err != nil || p.Name != "sqsworker" || p.Api != nil || p.Events != nil {
		t.Fatalf("defaults: %+v, %v", p, err)
	}
	p, err = PropsFromContext(func(k string) string {
		return map[string]string{"apiKinds": "email.send, report.build=262144", "apiShowDetails": "true", "apiReservedConcurrency": "5"}[k]
	})
	if err != nil || p.Api == nil || len(p.Api.Kinds) != 2 || p.Api.Kinds[0].Kind != "email.send" || p.Api.Kinds[1].MaxArgsBytes != 262144 ||
		!p.Api.ShowDetails || p.Api.ReservedConcurrency != 5 || p.Api.AuthType != "" {
		t.Fatalf("api context: %+v, %v", p.Api, err)
	}
	p, err = PropsFromContext(func(k string) string {
		return map[string]string{"apiKinds": "email.send,report.export,search.reindex", "apiDedup": "report.export=unique+debounce, search.reindex = throttle"}[k]
	})
	if err != nil || p.Api == nil || len(p.Api.Kinds) != 3 || p.Api.Kinds[0].Dedup != nil ||
		!slices.Equal(p.Api.Kinds[1].Dedup, []string{"unique", "debounce"}) || !slices.Equal(p.Api.Kinds[2].Dedup, []string{"throttle"}) {
		t.Fatalf("apiDedup context: %+v, %v", p.Api, err)
	}
	_, err = PropsFromContext(func(k string) string {
		return map[string]string{"apiKinds": "report.export", "apiDedup": "report.export=unique,report.export=debounce,email.send=unique,report.export"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), `context apiDedup: kind "report.export" is listed twice: join its rules with +`) ||
		!strings.Contains(err.Error(), `context apiDedup: kind "email.send" is not in apiKinds`) ||
		!strings.Contains(err.Error(), `context apiDedup: entry "report.export": want kind=rule`) {
		t.Fatalf("apiDedup errors: %v", err)
	}
	if _, err = PropsFromContext(func(k string) string { return map[string]string{"apiDedup": "report.export=unique"}[k] }); err == nil ||
		!strings.Contains(err.Error(), "context apiDedup needs apiKinds") {
		t.Fatalf("apiDedup without apiKinds: %v", err)
	}
	p, err = PropsFromContext(func(k string) string {
		return map[string]string{"queues": "critical:20, bulk, orders:fifo:4", "routes": "email.send=critical,import.csv=bulk"}[k]
	})
	if err != nil || len(p.Queues) != 3 || p.Queues[0] != (jobqueue.QueueProps{Name: "critical", MaxConcurrency: 20}) ||
		p.Queues[1].Name != "bulk" || p.Queues[2] != (jobqueue.QueueProps{Name: "orders", FIFO: true, MaxConcurrency: 4}) ||
		p.Routes["import.csv"] != "bulk" || len(p.Routes) != 2 {
		t.Fatalf("queues context: %+v, %v, %v", p.Queues, p.Routes, err)
	}
	_, err = PropsFromContext(func(k string) string {
		return map[string]string{"fifo": "maybe", "timeout": "30", "recursiveLoop": "off", "queues": "bulk:many", "routes": "email.send"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), `context queues: entry "bulk:many": "many" is neither fifo nor a MaxConcurrency`) ||
		!strings.Contains(err.Error(), `context routes: entry "email.send": want kind=queue`) {
		t.Fatalf("err = %v", err)
	}
	_, err = PropsFromContext(func(k string) string {
		return map[string]string{"fifo": "maybe", "timeout": "30", "recursiveLoop": "off"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), `context fifo="maybe" is not a boolean`) || !strings.Contains(err.Error(), `context timeout="30" is not a Go duration`) ||
		!strings.Contains(err.Error(), `context recursiveLoop="off" is neither Terminate nor Allow`) {
		t.Fatalf("err = %v", err)
	}
}

// newApp is the App `cdk synth` builds: every context value of cdk.json (feature flags and the
// defaults), then overrides, as `-c key=value` would give them.
func newApp(t *testing.T, overrides map[string]any) awscdk.App {
	t.Helper()
	b, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range overrides {
		cfg.Context[k] = v
	}
	return awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &cfg.Context})
}

// TestBuildWithKeyArn synthesizes the app with the kmsKeyArn context value: the job queue and its
// DLQ are encrypted with that key, and the roles that touch them get only the data-key actions on
// exactly that key.
func TestBuildWithKeyArn(t *testing.T) {
	const keyArn = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	app := newApp(t, map[string]any{"stack": "keyed", "kmsKeyArn": keyArn, "workerAsset": workerZip})
	stack, err := build(app)
	if err != nil {
		t.Fatal(err)
	}
	if got := *stack.StackName(); got != "keyed" {
		t.Errorf("stack name = %q, want keyed", got)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	check := func(f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%v", r)
			}
		}()
		f()
	}
	for _, name := range []string{"keyed-jobs", "keyed-jobs-dlq"} {
		check(func() {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
				"QueueName":            name,
				"KmsMasterKeyId":       keyArn,
				"SqsManagedSseEnabled": assertions.Match_Absent(),
			})
		})
	}
	// An imported key is referenced, never created.
	check(func() { tmpl.ResourceCountIs(jsii.String("AWS::KMS::Key"), jsii.Number(0)) })

	// Every statement on the key: its actions, and the roles whose policy holds it.
	var onKey []string
	for id, p := range *tmpl.FindResources(jsii.String("AWS::IAM::Policy"), nil) {
		props := (*p)["Properties"].(map[string]any)
		roles, _ := json.Marshal(props["Roles"])
		for _, s := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			res, _ := json.Marshal(st["Resource"])
			if !strings.Contains(string(res), "kms") {
				continue
			}
			if string(res) != `"`+keyArn+`"` {
				t.Errorf("policy %s: a KMS statement on %s, want exactly %s", id, res, keyArn)
			}
			actions, _ := json.Marshal(st["Action"])
			if string(actions) != `["kms:Decrypt","kms:GenerateDataKey"]` {
				t.Errorf("policy %s: actions on the key %s, want Decrypt and GenerateDataKey only", id, actions)
			}
			onKey = append(onKey, string(roles))
		}
	}
	all := strings.Join(onKey, " ")
	for _, role := range []string{"WorkerRole", "SchedulerRole"} {
		if !strings.Contains(all, role) {
			t.Errorf("no policy of %s may use the key (statements on the key belong to %v)", role, onKey)
		}
	}
}

// TestBuildWithApiDedup synthesizes the app with apiKinds and apiDedup: the API function gets
// SQSWORKER_API_DEDUP and, for the debounce, the stack's schedule group.
func TestBuildWithApiDedup(t *testing.T) {
	app := newApp(t, map[string]any{"stack": "dd", "workerAsset": workerZip, "apiAsset": testasset.ApiZip(workerZip),
		"apiKinds": "email.send,report.export", "apiDedup": "report.export=unique+debounce"})
	stack, err := build(app)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
			jobqueue.EnvAPIKinds: "email.send,report.export", jobqueue.EnvAPIDedup: "report.export=debounce+unique",
			jobqueue.EnvScheduleGroup: "dd-jobs",
		})},
	})
}

func TestBuildRejectsBadContext(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  map[string]any
		want string
	}{
		{"duration", map[string]any{"timeout": "30"}, `context timeout="30" is not a Go duration`},
		{"key alias", map[string]any{"kmsKeyArn": "alias/jobs"}, `context kmsKeyArn="alias/jobs" is not a KMS key ARN`},
		{"key id", map[string]any{"kmsKeyArn": "arn:aws:kms:us-east-1:111122223333:key/abc"}, `is not a KMS key ARN`},
		{"dedup rule", map[string]any{"apiKinds": "report.export", "apiDedup": "report.export=uniq", "apiAsset": testasset.ApiZip(workerZip)},
			`Api.Kinds[0].Dedup (report.export): "uniq" is not a rule`},
		{"debounce without scheduling", map[string]any{"apiKinds": "report.export", "apiDedup": "report.export=debounce", "disableScheduling": "true",
			"apiAsset": testasset.ApiZip(workerZip)}, `allows "debounce", which needs scheduling`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.ctx["stack"] = "bad"
			tc.ctx["workerAsset"] = workerZip
			if _, err := build(newApp(t, tc.ctx)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("build err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestKeyARN(t *testing.T) {
	for arn, ok := range map[string]bool{
		"arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab":       true,
		"arn:aws-cn:kms:cn-north-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab":   true,
		"arn:aws:kms:eu-west-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab":       true,
		"arn:aws:kms:us-east-1:111122223333:alias/jobs":                                     false,
		"1234abcd-12ab-34cd-56ef-1234567890ab":                                              false,
		"arn:aws:kms:us-east-1:1111:key/1234abcd-12ab-34cd-56ef-1234567890ab":               false,
		"arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab/extra": false,
	} {
		if got := keyARN.MatchString(arn); got != ok {
			t.Errorf("keyARN.MatchString(%q) = %v, want %v", arn, got, ok)
		}
	}
}

// TestBuildRejectsBadStackNames: the app names the stack after the "stack" context value, so a
// value CloudFormation does not accept as a stack name fails with a message, not a jsii panic;
// one the construct cannot derive names from fails with the construct's message.
func TestBuildRejectsBadStackNames(t *testing.T) {
	for _, tc := range []struct{ stack, want string }{
		{"my_app", `context stack="my_app" names the CloudFormation stack, whose name must start with a letter and contain only letters, digits and hyphens`},
		{"1app", `context stack="1app" names the CloudFormation stack`},
		{strings.Repeat("a", 60), "the schedule group name"},
	} {
		t.Run(tc.stack, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("build panicked: %v", r)
					}
				}()
				_, err = build(newApp(t, map[string]any{"stack": tc.stack, "workerAsset": workerZip}))
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("build err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}
