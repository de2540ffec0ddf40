// Package cfnread reads synthesized CloudFormation templates for the infra tests: it renders
// intrinsic functions as readable strings, so that a test can compare a policy's resources with
// names it expects.
package cfnread

import (
	"encoding/json"
	"regexp"
	"strings"
)

// cdkHash is the 8-character suffix CDK appends to logical ids.
var cdkHash = regexp.MustCompile(`[0-9A-F]{8}$`)

// Render writes a CloudFormation value as a readable string: {"Fn::GetAtt": ["JobsQueue24944186",
// "Arn"]} is "JobsQueue.Arn", {"Ref": "AWS::Region"} is "${AWS::Region}", {"Ref": "JobsTopic…"}
// is "JobsTopic", a Join is its parts; anything else is its JSON.
func Render(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		if ga, ok := v["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			return cdkHash.ReplaceAllString(ga[0].(string), "") + "." + ga[1].(string)
		}
		if ref, ok := v["Ref"].(string); ok {
			if strings.HasPrefix(ref, "AWS::") {
				return "${" + ref + "}"
			}
			return cdkHash.ReplaceAllString(ref, "")
		}
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, Render(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// List returns v as a list: a policy's Action or Resource may be one value or a list of them.
// nil is an empty list.
func List(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// LogicalName returns a logical id without the hash CDK appends ("JobsQueue24944186" is
// "JobsQueue").
func LogicalName(id string) string { return cdkHash.ReplaceAllString(id, "") }
