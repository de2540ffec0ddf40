package cfnread

import (
	"fmt"
	"testing"
)

func TestRenderAndList(t *testing.T) {
	for _, tt := range []struct {
		in   any
		want string
	}{
		{"arn:aws:sqs:x", "arn:aws:sqs:x"},
		{map[string]any{"Fn::GetAtt": []any{"JobsQueue24944186", "Arn"}}, "JobsQueue.Arn"},
		{map[string]any{"Ref": "AWS::Region"}, "${AWS::Region}"},
		{map[string]any{"Ref": "JobsTopicABCDEF12"}, "JobsTopic"},
		{map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":x"}}}, "arn:${AWS::Partition}:x"},
		{42.0, "42"},
	} {
		if got := Render(tt.in); got != tt.want {
			t.Errorf("Render(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if fmt.Sprint(List("a"), List([]any{"a", "b"}), len(List(nil))) != "[a] [a b] 0" {
		t.Error("List")
	}
}
