package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEnqueueDedupGolden: enqueue's deduplication flags on the emulator, as a user sees them:
// a unique job and its duplicate (table and JSON), a debounced job moved by a second enqueue, a
// throttled enqueue (exit 1, saying when the period ends), and the usage errors.
func TestEnqueueDedupGolden(t *testing.T) {
	t.Parallel()
	stack := newUpStack(t, "dedup", false)
	tr := newTranscript(t, stack)
	first := tr.must("enqueue", "report.export", `{"user":7}`, "--unique", "1h", "--unique-while", "active")
	id := strings.Fields(strings.Split(first, "\n")[1])[2]
	dup := tr.must("enqueue", "report.export", `{"user":7}`, "--unique", "1h", "--unique-while", "active", "-o", "json")
	var doc enqueueJSON
	if err := json.Unmarshal([]byte(dup), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Dedup == nil || doc.Dedup.Outcome != "duplicate" || doc.JobID != id || doc.MessageID != "" || doc.Dedup.State != "queued" {
		t.Fatalf("the duplicate's JSON: %+v (dedup %+v), want a duplicate of %s, queued, no message", doc, doc.Dedup, id)
	}
	tr.must("enqueue", "report.export", `{"user":8}`, "--unique", "1h", "--dedup-fields", "user")
	tr.must("enqueue", "search.reindex", `{"doc":42,"rev":1}`, "--debounce", "2m", "--dedup-fields", "doc")
	tr.must("enqueue", "search.reindex", `{"doc":42,"rev":2}`, "--debounce", "2m", "--dedup-fields", "doc")
	tr.must("enqueue", "email.digest", `{"tenant":"t7"}`, "--throttle", "1/1h", "--dedup-key", "t7")
	if _, code := tr.run("", "enqueue", "email.digest", `{"tenant":"t7"}`, "--throttle", "1/1h", "--dedup-key", "t7"); code != exitError {
		t.Fatalf("throttled: exit %d, want %d", code, exitError)
	}
	for _, args := range [][]string{
		{"enqueue", "report.export", `{}`, "--unique", "1h", "--throttle", "1/1m"},
		{"enqueue", "report.export", `{}`, "--max-wait", "1h"},
		{"enqueue", "report.export", `{}`, "--dedup-key", "k"},
		{"enqueue", "report.export", `{}`, "--unique", "1h", "--unique-while", "forever"},
		{"enqueue", "report.export", `{}`, "--unique", "0s"},
		{"enqueue", "report.export", `{}`, "--unique", "72h"},
		{"enqueue", "report.export", `{}`, "--debounce", "10m", "--max-wait", "5m"},
		{"enqueue", "report.export", `{}`, "--debounce", "10m", "--delay", "1m"},
		{"enqueue", "report.export", `{}`, "--throttle", "ten/1m"},
		{"enqueue", "report.export", `{}`, "--throttle", "0/1m"},
	} {
		if _, code := tr.run("", args...); code != exitUsage {
			t.Errorf("sqsworker %v: exit %d, want %d", args, code, exitUsage)
		}
	}
	tr.check("enqueue_dedup")
}
