package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sqsworker/sqsworker/functions/internal/config"
)

// TestPolicySchemaFiles: a schema read from a file may $ref the files beside it; a boolean
// schema false admits no args at all; a kind without a schema is checked for size only.
func TestPolicySchemaFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("defs.json", `{"$defs":{"name":{"type":"string","pattern":"^[a-z0-9-]+$"}}}`)
	write("report.json", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"name":{"$ref":"defs.json#/$defs/name"}},"required":["name"]}`)
	cfg := config.API{
		Kinds: []config.AllowedKind{{Kind: "report.build", MaxArgsBytes: 100}, {Kind: "never", MaxArgsBytes: 100}, {Kind: "free", MaxArgsBytes: 100}},
		Schemas: map[string]config.SchemaSource{
			"report.build": {File: filepath.Join(dir, "report.json")},
			"never":        {Inline: []byte(`false`)},
		},
	}
	p, err := NewPolicy(cfg, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind, args string
		want       []FieldError
	}{
		{"report.build", `{"name":"q4-2026"}`, nil},
		{"report.build", `{"name":"Q4 2026"}`, []FieldError{{Field: "/name", Error: "'Q4 2026' does not match pattern '^[a-z0-9-]+$'"}}},
		{"report.build", `{}`, []FieldError{{Field: "", Error: "missing property 'name'"}}},
		{"never", `{}`, []FieldError{{Field: "", Error: "false schema"}}},
		{"free", `{"anything":[1,2,3]}`, nil},
	} {
		got, err := p.rule(tc.kind).validate([]byte(tc.args))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: %+v, %v; want %+v", tc.kind, tc.args, got, err, tc.want)
		}
	}
	if p.Allowed("payment.refund") || !p.Allowed("free") || (*Policy)(nil).Allowed("free") {
		t.Error("Allowed answers wrong")
	}
}

// TestPolicyRefusesNetworkRefs: a schema that $refs a URL fails at cold start; nothing is fetched.
func TestPolicyRefusesNetworkRefs(t *testing.T) {
	t.Parallel()
	cfg := config.API{
		Kinds:   []config.AllowedKind{{Kind: "email.send", MaxArgsBytes: 100}},
		Schemas: map[string]config.SchemaSource{"email.send": {Inline: []byte(`{"$ref":"https://example.com/email.json"}`)}},
	}
	_, err := NewPolicy(cfg, os.ReadFile)
	if err == nil || !strings.Contains(err.Error(), `kind "email.send": the schema does not compile`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v; want one line saying the schema does not compile", err)
	}
}
