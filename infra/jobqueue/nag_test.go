package jobqueue

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Suppressions, each with its reason: SQS3 on the scheduler DLQ (a DLQ itself), and with
// WorkerEnqueues IAM5 on the worker's schedule/<group>/* (one-time schedules are named per job).

func TestNag(t *testing.T) { nagCheck(t, 1, func(awscdk.Stack, *Props) {}) }

// TestNagCustomerKey runs the pack over a stack whose queues use a customer-managed key.
func TestNagCustomerKey(t *testing.T) {
	nagCheck(t, 1, func(stack awscdk.Stack, p *Props) {
		p.EncryptionKey = awskms.NewKey(stack, jsii.String("JobsKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
	})
}

// TestNagWorkerEnqueues runs the pack over a stack whose worker may enqueue and schedule jobs.
func TestNagWorkerEnqueues(t *testing.T) {
	nagCheck(t, 2, func(_ awscdk.Stack, p *Props) { p.WorkerEnqueues = true })
}

// TestNagStatusQueries: the status grants name both indexes, so they need no suppression.
func TestNagStatusQueries(t *testing.T) {
	nagCheck(t, 1, func(_ awscdk.Stack, p *Props) { p.WorkerStatusQueries = true })
}

// TestNagNoScheduling: without scheduling there is nothing to suppress.
func TestNagNoScheduling(t *testing.T) {
	nagCheck(t, 0, func(_ awscdk.Stack, p *Props) { p.DisableScheduling = true; p.WorkerEnqueues = true })
}

func nagCheck(t *testing.T, suppressions int, configure func(awscdk.Stack, *Props)) {
	app := newTestApp(t)
	stack := awscdk.NewStack(app, jsii.String("Nag"), nil)
	props := Props{Name: "nag", WorkerAsset: assetPath}
	configure(stack, &props)
	if _, err := New(stack, "Jobs", props); err != nil {
		t.Fatal(err)
	}
	awscdk.Aspects_Of(stack).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	ann := assertions.Annotations_FromStack(stack)
	for _, m := range *ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Errorf("error %s: %v", *m.Id, m.Entry.Data)
	}
	for _, m := range *ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Logf("warning %s: %v", *m.Id, m.Entry.Data)
	}
	// Every suppression carries a written reason.
	b, _ := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
	var tmpl struct {
		Resources map[string]struct {
			Metadata struct {
				CdkNag struct {
					Rules []struct {
						ID, Reason string
						AppliesTo  []any `json:"applies_to"`
					} `json:"rules_to_suppress"`
				} `json:"cdk_nag"`
			}
		}
	}
	if err := json.Unmarshal(b, &tmpl); err != nil {
		t.Fatal(err)
	}
	n := 0
	for id, r := range tmpl.Resources {
		for _, rule := range r.Metadata.CdkNag.Rules {
			n++
			if len(rule.Reason) < 40 {
				t.Errorf("%s: suppression %s has no real reason: %q", id, rule.ID, rule.Reason)
			}
			if b, _ := json.Marshal(rule.AppliesTo); strings.Contains(string(b), "index") {
				t.Errorf("%s: suppression %s still covers an index wildcard: %s", id, rule.ID, b)
			}
		}
	}
	if n != suppressions {
		t.Errorf("%d suppressions, want %d (update this test when adding one, with its reason)", n, suppressions)
	}
}
