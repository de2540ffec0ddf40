package jobqueue

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

// apiShape is a stack with the HTTP producer and a role "Caller" given GrantInvokeApi,
// synthesized on the first get (except with noTemplate: a stack that must not synthesize).
type apiShape struct {
	once       sync.Once
	tmpl       assertions.Template
	stack      awscdk.Stack
	jq         *JobQueue
	noTemplate bool
}

var apiIAM, apiPublic, apiNoStatus apiShape

// schemaDir is a directory with one schema file, for the layer.
var schemaDir = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "api-schemas")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte(`{"type":"object","required":["name"]}`), 0o600); err != nil {
		panic(err)
	}
	return dir
})

func (s *apiShape) get(t *testing.T, mk func() Props, configure func(jq *JobQueue)) (assertions.Template, *JobQueue, awscdk.Stack) {
	t.Helper()
	s.once.Do(func() {
		app := newTestApp(t)
		s.stack = awscdk.NewStack(app, jsii.String("Api"), nil)
		props := mk()
		props.WorkerAsset = assetPath
		jq, err := New(s.stack, "Jobs", props)
		if err != nil {
			panic(err)
		}
		caller := awsiam.NewRole(s.stack, jsii.String("Caller"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		})
		jq.GrantInvokeApi(caller)
		if configure != nil {
			configure(jq)
		}
		s.jq = jq
		if !s.noTemplate {
			s.tmpl = assertions.Template_FromStack(s.stack, nil)
		}
	})
	return s.tmpl, s.jq, s.stack
}

func apiProps(name string, a ApiProps) Props {
	if a.Asset == "" {
		a.Asset = testasset.ApiZip(assetPath)
	}
	return Props{Name: name, Api: &a}
}

var defaultApi = ApiProps{
	Kinds: []ApiKind{
		{Kind: "email.send", Schema: `{"type": "object", "required": ["to"]}`},
		{Kind: "report.build", MaxArgsBytes: 262144, SchemaFile: "report.json"},
	},
}

func iamShape(t *testing.T) (assertions.Template, *JobQueue, awscdk.Stack) {
	return apiIAM.get(t, func() Props {
		a := defaultApi
		a.SchemaDir = schemaDir()
		return apiProps("demo", a)
	}, nil)
}

// TestApiDefaultShape: the function with its allow-list and the schema layer and no reserved
// concurrency, a function URL with AuthType AWS_IAM, the output JobsApiUrl, and nothing public.
func TestApiDefaultShape(t *testing.T) {
	tmpl, _, _ := iamShape(t)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{"AuthType": "AWS_IAM"})
	})
	check(t, func() { tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Url"), jsii.Number(1)) })
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Runtime": "provided.al2023", "Architectures": []any{"arm64"}, "Handler": "bootstrap",
			"ReservedConcurrentExecutions": assertions.Match_Absent(), "MemorySize": 256, "Timeout": 10,
			"Layers": assertions.Match_AnyValue(),
			"Environment": map[string]any{"Variables": map[string]any{
				EnvAPIKinds:        "email.send,report.build=262144",
				EnvAPISchemas:      `{"email.send":{"type":"object","required":["to"]},"report.build":"/opt/report.json"}`,
				EnvQueueURL:        assertions.Match_AnyValue(),
				EnvTable:           assertions.Match_AnyValue(),
				EnvAPIShowDetails:  assertions.Match_Absent(),
				EnvAPIMaxArgsBytes: assertions.Match_Absent(),
			}},
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::LayerVersion"), map[string]any{"CompatibleRuntimes": []any{"provided.al2023"}})
	})
	// Nothing public: no resource policy statement of the functions names the principal "*"
	// (CDK writes AWS::Lambda::Permission resources for those).
	for id, p := range *tmpl.FindResources(jsii.String("AWS::Lambda::Permission"), nil) {
		b, _ := json.Marshal(p)
		t.Errorf("permission %s in the default shape: %s", id, b)
	}
	// The worker knows the API records jobs before they run.
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
				EnvDLQURL: assertions.Match_AnyValue(), EnvExpectRecords: "true",
			})},
		})
	})
	outputs := *tmpl.FindOutputs(jsii.String("JobsApiUrl"), nil)
	if len(outputs) != 1 {
		t.Fatalf("outputs named JobsApiUrl: %v", outputs)
	}
	if b, _ := json.Marshal(outputs["JobsApiUrl"]); !strings.Contains(string(b), `"FunctionUrl"`) {
		t.Errorf("JobsApiUrl = %s, want the URL's FunctionUrl attribute", b)
	}
}

// TestApiGrants checks the API function's role exactly: send to the queue (no Scheduler action,
// no iam:PassRole: it refuses delays beyond 15 minutes), the table calls of pkg/status GetByID
// and of the reservation, Query on the by_id index only, and its log group.
func TestApiGrants(t *testing.T) {
	tmpl, _, _ := iamShape(t)
	checkGrants(t, "JobsApiRole", grants(t, tmpl, "JobsApiRole"), map[string][]string{
		"JobsApiLogs.Arn":         {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:                  sendOnly,
		tableArn:                  ApiTableActions,
		tableArn + "/index/by_id": {"dynamodb:Query"},
	})
	tmpl, _, _ = apiNoStatus.get(t, func() Props { return apiProps("nostatus", ApiProps{Kinds: defaultApi.Kinds[:1], DisableStatus: true}) }, nil)
	checkGrants(t, "JobsApiRole", grants(t, tmpl, "JobsApiRole"), map[string][]string{
		"JobsApiLogs.Arn": {"logs:CreateLogStream", "logs:PutLogEvents"},
		queueArn:          sendOnly,
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": map[string]any{EnvAPIKinds: "email.send", EnvTable: assertions.Match_Absent()}},
		})
	})
}

// TestGrantInvokeApi: the grantee may invoke the function through its URL only, as AWS
// documents for AWS_IAM URLs: lambda:InvokeFunctionUrl with lambda:FunctionUrlAuthType =
// AWS_IAM, and lambda:InvokeFunction with lambda:InvokedViaFunctionUrl, on the API function.
func TestGrantInvokeApi(t *testing.T) {
	tmpl, _, _ := iamShape(t)
	sts := roleStatements(t, tmpl, "Caller")
	want := map[string]string{
		"lambda:InvokeFunctionUrl": `{"StringEquals":{"lambda:FunctionUrlAuthType":"AWS_IAM"}}`,
		"lambda:InvokeFunction":    `{"Bool":{"lambda:InvokedViaFunctionUrl":true}}`,
	}
	if len(sts) != len(want) {
		t.Fatalf("Caller has %d statements, want %d: %+v", len(sts), len(want), sts)
	}
	for _, st := range sts {
		if len(st.Actions) != 1 || want[st.Actions[0]] == "" {
			t.Errorf("unexpected statement %+v", st)
			continue
		}
		if st.Condition != want[st.Actions[0]] {
			t.Errorf("%s: condition %s, want %s", st.Actions[0], st.Condition, want[st.Actions[0]])
		}
		if len(st.Resources) != 1 || st.Resources[0] != "JobsApiFunction.Arn" {
			t.Errorf("%s on %v, want the API function only", st.Actions[0], st.Resources)
		}
	}
}

// TestApiAlarms: 5xx and throttles of the API, named <name>-jobs-… (which the alarm topic's
// policy lets publish), on the API function's metrics.
func TestApiAlarms(t *testing.T) {
	tmpl, _, _ := iamShape(t)
	for name, metric := range map[string]string{"demo-jobs-api-5xx": "Url5xxCount", "demo-jobs-api-throttles": "Throttles"} {
		check(t, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
				"AlarmName": name, "MetricName": metric, "Namespace": "AWS/Lambda", "Statistic": "Sum", "Threshold": 1,
				"AlarmActions": assertions.Match_AnyValue(),
				"Dimensions":   []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^JobsApiFunction"))}}},
			})
		})
	}
}

// TestApiNag: cdk-nag's AwsSolutions pack finds nothing in the default API shape, and the
// construct adds no suppression for it.
func TestApiNag(t *testing.T) {
	nagCheck(t, 1, func(_ awscdk.Stack, p *Props) {
		a := defaultApi
		a.SchemaDir = schemaDir()
		a.Asset = testasset.ApiZip(assetPath)
		p.Api = &a
	})
}

// publicShape is an API whose URL takes unsigned requests, with the suppression of
// ApiPublicUrlRule when suppressed.
func publicShape(t *testing.T, s *apiShape, name string, suppressed bool) (assertions.Template, *JobQueue, awscdk.Stack) {
	return s.get(t, func() Props {
		return apiProps(name, ApiProps{Kinds: defaultApi.Kinds[:1], AuthType: awslambda.FunctionUrlAuthType_NONE})
	}, func(jq *JobQueue) {
		if suppressed {
			cdknag.NagSuppressions_AddResourceSuppressions(jq.Api.Url, &[]*cdknag.NagPackSuppression{{
				Id:     jsii.String(ApiPublicUrlRule),
				Reason: jsii.String("Public on purpose: a CloudFront function in front of it checks a signed token."),
			}}, jsii.Bool(true))
		}
	})
}

var apiPublicSuppressed apiShape

// TestApiPublicURL: AuthType NONE, set explicitly, makes the URL public (CDK's two permissions
// for the principal "*": lambda:InvokeFunctionUrl with the NONE condition, lambda:InvokeFunction
// via the URL only) and raises the cdk-nag error ApiPublicUrlRule on
// it: the stack does not synthesize until that finding is suppressed with a reason.
func TestApiPublicURL(t *testing.T) {
	apiPublic.noTemplate = true
	_, _, stack := publicShape(t, &apiPublic, "pub", false)
	// CDK refuses to synthesize a stack with an error annotation: it panics naming its report.
	var report struct {
		PluginReports []struct {
			Violations []struct {
				Description         string
				ViolatingConstructs []struct{ ConstructPath string }
			}
		}
	}
	func() {
		defer func() {
			r := recover()
			m := regexp.MustCompile(`Validation failed\. A copy of this report can be found in: (\S+)`).FindStringSubmatch(fmt.Sprint(r))
			if m == nil {
				t.Fatalf("synthesizing with the finding unsuppressed: recovered %v, want CDK's validation failure", r)
			}
			b, err := os.ReadFile(m[1])
			if err == nil {
				err = json.Unmarshal(b, &report)
			}
			if err != nil {
				t.Fatal(err)
			}
		}()
		assertions.Template_FromStack(stack, nil)
	}()
	var found []string
	for _, pr := range report.PluginReports {
		for _, v := range pr.Violations {
			for _, c := range v.ViolatingConstructs {
				found = append(found, c.ConstructPath+" "+strings.SplitN(v.Description, ":", 2)[0])
			}
		}
	}
	if want := "Api/Jobs/Api/Function/FunctionUrl/Resource " + ApiPublicUrlRule; len(found) != 1 || found[0] != want {
		t.Fatalf("violations %q, want exactly [%s]", found, want)
	}

	tmpl, _, stack := publicShape(t, &apiPublicSuppressed, "pubok", true)
	ann := assertions.Annotations_FromStack(stack)
	if errs := *ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("Sqsworker-.*"))); len(errs) != 0 {
		t.Errorf("the suppressed finding still reports %d errors: %v", len(errs), errs[0].Entry.Data)
	}
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{"AuthType": "NONE"})
	})
	// Function URLs created since October 2025 need both actions in the resource policy (AWS's
	// "Control access to Lambda function URLs"): lambda:InvokeFunctionUrl for the NONE auth type
	// and lambda:InvokeFunction through the URL only; CDK adds both, to the API function alone.
	onAPI := map[string]any{"Fn::GetAtt": []any{assertions.Match_StringLikeRegexp(jsii.String("^JobsApiFunction")), "Arn"}}
	check(t, func() {
		tmpl.ResourceCountIs(jsii.String("AWS::Lambda::Permission"), jsii.Number(2))
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
			"Action": "lambda:InvokeFunctionUrl", "Principal": "*", "FunctionUrlAuthType": "NONE", "FunctionName": onAPI,
		})
	})
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
			"Action": "lambda:InvokeFunction", "Principal": "*", "InvokedViaFunctionUrl": true, "FunctionName": onAPI,
		})
	})
}

// TestApiValidate: every rule of ApiProps is checked before anything is built, each with its
// own message.
func TestApiValidate(t *testing.T) {
	dir := schemaDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"type":`), 0o600); err != nil {
		t.Fatal(err)
	}
	api := testasset.ApiZip(assetPath)
	for _, tc := range []struct {
		name string
		api  ApiProps
		want []string
	}{
		{"valid", ApiProps{Kinds: defaultApi.Kinds, SchemaDir: dir, Asset: api}, nil},
		{"no kinds", ApiProps{Asset: api}, []string{"Api.Kinds is empty"}},
		{"missing asset", ApiProps{Kinds: defaultApi.Kinds[:1], Asset: "/nonexistent/api.zip"}, []string{"Api.Asset /nonexistent/api.zip is missing: run `make build`"}},
		{"bad kinds", ApiProps{Asset: api, Kinds: []ApiKind{{Kind: "Email"}, {Kind: "a"}, {Kind: "a", MaxArgsBytes: 1 << 20}}},
			[]string{`Api.Kinds[0].Kind="Email" is not a kind`, `Api.Kinds[2]: kind "a" is listed twice`, "Api.Kinds[2].MaxArgsBytes=1048576 must be between 2 and 1036288"}},
		{"schemas", ApiProps{Asset: api, SchemaDir: dir, Kinds: []ApiKind{
			{Kind: "a", Schema: "{}", SchemaFile: "report.json"}, {Kind: "b", Schema: `[1]`}, {Kind: "c", SchemaFile: "../etc/passwd"},
			{Kind: "d", SchemaFile: "broken.json"}, {Kind: "e", SchemaFile: "missing.json"}}},
			[]string{"Api.Kinds[0] (a) has both Schema and SchemaFile", "Api.Kinds[1].Schema (b): a JSON Schema is an object or a boolean",
				`Api.Kinds[2].SchemaFile="../etc/passwd" must be a clean path`, "Api.Kinds[3].SchemaFile (d): not valid JSON", "Api.Kinds[4].SchemaFile (e): open"}},
		{"schema file without a dir", ApiProps{Asset: api, Kinds: []ApiKind{{Kind: "a", SchemaFile: "a.json"}}}, []string{"needs SchemaDir"}},
		{"auth and limits", ApiProps{Asset: api, Kinds: defaultApi.Kinds[:1], AuthType: "AWS", ReservedConcurrency: -1, MemoryMB: 64, Timeout: 1500e6},
			[]string{`Api.AuthType="AWS"`, "Api.ReservedConcurrency=-1", "Api.MemoryMB=64", "Api.Timeout=1.5s"}},
		{"large reservation", ApiProps{Asset: api, Kinds: defaultApi.Kinds[:1], ReservedConcurrency: 3000}, nil},
		{"environment too large", ApiProps{Asset: api, Kinds: []ApiKind{{Kind: "a", Schema: `{"description":"` + strings.Repeat("x", 4000) + `"}`}}},
			[]string{"above Lambda's 4 KB for all variables"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.api
			err := Props{Name: "v", Api: &a}.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d lines, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want %q", i, lines[i], w)
				}
			}
		})
	}
}

var apiReserved apiShape

// TestApiReservedConcurrency: the API reserves concurrency only when ApiProps.ReservedConcurrency
// asks for it (issue 23.2: a reservation by default failed the deploy on accounts whose quota
// leaves less than 100 unreserved); the default shape reserves none (TestApiDefaultShape).
func TestApiReservedConcurrency(t *testing.T) {
	tmpl, jq, _ := apiReserved.get(t, func() Props {
		return apiProps("reserved", ApiProps{Kinds: defaultApi.Kinds[:1], ReservedConcurrency: 25})
	}, nil)
	check(t, func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Description": "sqsworker HTTP producer: POST /jobs, GET /jobs/{id}", "ReservedConcurrentExecutions": 25,
		})
	})
	if jq.Props.Api.ReservedConcurrency != 25 {
		t.Errorf("Props.Api.ReservedConcurrency = %d", jq.Props.Api.ReservedConcurrency)
	}
	tmpl, _, _ = iamShape(t)
	for id, fn := range *tmpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		if r, ok := (*fn)["Properties"].(map[string]any)["ReservedConcurrentExecutions"]; ok {
			t.Errorf("default API shape: function %s reserves %v", id, r)
		}
	}
}

// TestGrantInvokeApiWithoutApi: asking for the grant on a stack without the API is a mistake
// that says so.
func TestGrantInvokeApiWithoutApi(t *testing.T) {
	_, jq := standard.get(t, Props{Name: "demo", MaxConcurrency: 20, ReservedConcurrency: 25, LogLevel: "debug"})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "needs Props.Api") {
			t.Errorf("recovered %v, want the panic naming Props.Api", r)
		}
	}()
	jq.GrantInvokeApi(nil)
}
