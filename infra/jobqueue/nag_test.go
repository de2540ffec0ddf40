package jobqueue

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func TestNag(t *testing.T) { nagCheck(t, func(awscdk.Stack, *Props) {}) }

// TestNagCustomerKey runs the pack over a stack whose queues use a customer-managed key.
func TestNagCustomerKey(t *testing.T) {
	nagCheck(t, func(stack awscdk.Stack, p *Props) {
		p.EncryptionKey = awskms.NewKey(stack, jsii.String("JobsKey"), &awskms.KeyProps{EnableKeyRotation: jsii.Bool(true)})
	})
}

// TestNagWorkerEnqueues runs the pack over a stack whose worker may enqueue and schedule jobs.
func TestNagWorkerEnqueues(t *testing.T) {
	nagCheck(t, func(_ awscdk.Stack, p *Props) { p.WorkerEnqueues = true })
}

func nagCheck(t *testing.T, configure func(awscdk.Stack, *Props)) {
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
					Rules []struct{ ID, Reason string } `json:"rules_to_suppress"`
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
		}
	}
	if n != 2 {
		t.Errorf("%d suppressions, want 2 (update this test when adding one, with its reason)", n)
	}
}
