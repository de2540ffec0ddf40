package jobqueue

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// nagRule is one cdk-nag suppression. The construct writes cdk-nag's metadata itself (the
// "cdk_nag" key NagSuppressions uses) so that users of the construct do not need cdk-nag.
type nagRule struct {
	ID        string
	Reason    string
	AppliesTo []any
}

// suppress records rules on c's CloudFormation resource (c itself or its default child).
func suppress(c constructs.IConstruct, rules ...nagRule) {
	if c == nil {
		panic("jobqueue: no construct to attach cdk-nag suppressions to")
	}
	res, ok := c.(awscdk.CfnResource)
	if !ok {
		res = c.Node().DefaultChild().(awscdk.CfnResource)
	}
	var list []any
	for _, r := range rules {
		m := map[string]any{"id": r.ID, "reason": r.Reason}
		if r.AppliesTo != nil {
			m["applies_to"] = r.AppliesTo
		}
		list = append(list, m)
	}
	res.AddMetadata(jsii.String("cdk_nag"), map[string]any{"rules_to_suppress": list})
}
