package shapes

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/infra/internal/testasset"
)

var asset string

func TestMain(m *testing.M) { testasset.Main(m, &asset) }

// TestSynth: every shape synthesizes to a template holding the worker and its event source, and
// the API's function and URL in the API shapes.
func TestSynth(t *testing.T) {
	paths, err := Synth(t.TempDir(), "../../cdk.json", asset)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(All) {
		t.Fatalf("%d templates for %d shapes", len(paths), len(All))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var tmpl struct {
			Resources map[string]struct{ Type string }
		}
		if err := json.Unmarshal(b, &tmpl); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		n := map[string]int{}
		for _, r := range tmpl.Resources {
			n[r.Type]++
		}
		api := 0
		if strings.Contains(p, "shape-api") {
			api = 1
		}
		outbox := 0 // the outbox's relay, its event source mapping and its table
		if strings.Contains(p, "shape-outbox") {
			outbox = 1
		}
		pgOutbox := 0 // the PostgreSQL outbox's relay (and its schedule)
		if strings.Contains(p, "shape-postgres-outbox") {
			pgOutbox = 1
		}
		if n["AWS::Lambda::Function"] != 1+api+outbox+pgOutbox || n["AWS::Lambda::Url"] != api || n["AWS::Lambda::EventSourceMapping"] != 1+outbox ||
			n["AWS::SQS::Queue"] < 2 || n["AWS::DynamoDB::Table"] != 1+outbox || n["AWS::Scheduler::Schedule"] != outbox+pgOutbox {
			t.Errorf("%s: resources %v", p, n)
		}
	}
}
