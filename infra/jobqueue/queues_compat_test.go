package jobqueue

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

var updateTemplates = flag.Bool("update-templates", false, "rewrite testdata/*.template.json from the current construct")

// TestSingleQueueTemplatesUnchanged synthesizes stacks of one queue (no Props.Queues) and compares
// them with the templates the construct synthesized before stacks could have several queues
// (testdata/*.template.json, written then with -update-templates): a stack deployed before keeps
// its template, resource for resource. Rewrite them only for a change meant to reach every stack.
func TestSingleQueueTemplatesUnchanged(t *testing.T) {
	for name, props := range map[string]Props{
		"single-standard": {Name: "compat", MaxConcurrency: 20, LogLevel: "debug"},
		"single-fifo":     {Name: "compat", FIFO: true, WorkerEnqueues: true},
		"single-api-outbox": {Name: "compat", PayloadBucket: true,
			Api: &ApiProps{Kinds: []ApiKind{{Kind: "email.send"}}}, Outbox: &OutboxProps{}},
		// The API with its options but no deduplication rule (ApiKind.Dedup): written before the
		// rules could be allowed, so that a stack whose kinds allow none keeps its template.
		"single-api-options": {Name: "compat", Api: &ApiProps{
			Kinds: []ApiKind{
				{Kind: "email.send", Schema: `{"type": "object", "required": ["to"]}`},
				{Kind: "report.build", MaxArgsBytes: 262144},
			},
			MaxArgsBytes: 16 << 10, ShowDetails: true, LogLevel: "debug", ReservedConcurrency: 5,
		}},
	} {
		t.Run(name, func(t *testing.T) {
			app := newTestApp(t)
			stack := awscdk.NewStack(app, jsii.String("Compat"), nil)
			props.WorkerAsset = assetPath
			if props.Api != nil {
				props.Api.Asset = testasset.ApiZip(assetPath)
			}
			if props.Outbox != nil {
				props.Outbox.RelayAsset = assetPath
			}
			if _, err := New(stack, "Jobs", props); err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(assertions.Template_FromStack(stack, nil).ToJSON(), "", " ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".template.json")
			if *updateTemplates {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(append(got, '\n')) != string(want) {
				t.Errorf("the template of %s changed (a stack of one queue must synthesize as before); got:\n%s", name, got)
			}
		})
	}
}
