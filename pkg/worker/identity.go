package worker

import (
	"encoding/json"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// salvageIdentity reads what it can of the job a body that is no valid envelope names: its "id"
// (a non-empty JSON string), its "kind" when that is a valid kind, and its "key" (its id when
// absent), matching the envelope's field names exactly. It returns empty strings when the body is
// not a JSON object or names no id. A malformed message with an id is then logged, reported and
// recorded (DeadLetterRecorder: a dead record under that id) like a job, although it never runs.
func salvageIdentity(body string) (id, kind, key string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &fields) != nil {
		return "", "", ""
	}
	str := func(name string) string {
		var s string
		if raw, ok := fields[name]; !ok || json.Unmarshal(raw, &s) != nil {
			return ""
		}
		return s
	}
	if id = str("id"); id == "" {
		return "", "", ""
	}
	if kind = str("kind"); jobs.ValidateKind(kind) != nil {
		kind = ""
	}
	if key = str("key"); key == "" {
		key = id
	}
	return id, kind, key
}
