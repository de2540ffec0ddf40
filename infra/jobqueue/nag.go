package jobqueue

import (
	"fmt"
	"strings"

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
	// Merge with the rules already recorded on the resource (several areas may suppress rules on
	// one policy; AddMetadata replaces the key's value): one entry per rule id, its AppliesTo
	// patterns joined, since cdk-nag reads the first entry of an id.
	var list []any
	if prev, ok := res.GetMetadata(jsii.String("cdk_nag")).(map[string]any); ok {
		if l, ok := prev["rules_to_suppress"].([]any); ok {
			list = append(list, l...)
		}
	}
	for _, r := range rules {
		merged := false
		for _, e := range list {
			m, ok := e.(map[string]any)
			if !ok || m["id"] != r.ID {
				continue
			}
			merged = true
			if !strings.Contains(fmt.Sprint(m["reason"]), r.Reason) {
				m["reason"] = fmt.Sprint(m["reason"]) + " " + r.Reason
			}
			prevApplies, _ := m["applies_to"].([]any)
			for _, a := range r.AppliesTo {
				dup := false
				for _, b := range prevApplies {
					if fmt.Sprint(a) == fmt.Sprint(b) {
						dup = true
					}
				}
				if !dup {
					prevApplies = append(prevApplies, a)
				}
			}
			if prevApplies != nil {
				m["applies_to"] = prevApplies
			}
		}
		if merged {
			continue
		}
		m := map[string]any{"id": r.ID, "reason": r.Reason}
		if r.AppliesTo != nil {
			m["applies_to"] = r.AppliesTo
		}
		list = append(list, m)
	}
	res.AddMetadata(jsii.String("cdk_nag"), map[string]any{"rules_to_suppress": list})
}
