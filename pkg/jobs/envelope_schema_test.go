package jobs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sqsworker/sqsworker/pkg/jobs"
)

// These tests keep docs/envelope.schema.json and docs/envelope.md in step with the codec. They
// use a small validator for the JSON Schema keywords the schema uses (no new dependency), and
// fail if the schema starts using a keyword that validator does not know.

const (
	schemaPath      = "../../docs/envelope.schema.json"
	envelopeDocPath = "../../docs/envelope.md"
	draft2020_12    = "https://json-schema.org/draft/2020-12/schema"
)

// loadEnvelopeSchema reads the schema with numbers kept as json.Number.
func loadEnvelopeSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("%s is not valid JSON", schemaPath)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var s map[string]any
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("%s: %v", schemaPath, err)
	}
	return s
}

func schemaProperties(t *testing.T, s map[string]any) map[string]any {
	t.Helper()
	props, ok := s["properties"].(map[string]any)
	if !ok {
		t.Fatal("schema has no properties object")
	}
	return props
}

func TestEnvelopeSchemaIsDraft2020_12WithKnownKeywords(t *testing.T) {
	t.Parallel()
	s := loadEnvelopeSchema(t)
	if s["$schema"] != draft2020_12 {
		t.Errorf("$schema = %v, want %s", s["$schema"], draft2020_12)
	}
	if s["type"] != "object" {
		t.Errorf("type = %v, want object", s["type"])
	}
	if err := checkSchemaKeywords(s, "#"); err != nil {
		t.Error(err)
	}
}

func TestEnvelopeSchemaRequiredMatchesDecoder(t *testing.T) {
	t.Parallel()
	s := loadEnvelopeSchema(t)
	var required []string
	for _, r := range s["required"].([]any) {
		required = append(required, r.(string))
	}
	if want := []string{"v", "id", "kind", "args"}; !slices.Equal(required, want) {
		t.Errorf("required = %q, want %q", required, want)
	}
	// Leave each field out of the full golden envelope in turn: the decoder must reject the
	// body exactly when the schema says the field is required.
	full := goldenFields(t, filepath.Join(goldenEnvelopeDir, "full.json"))
	for name := range full {
		body := withoutField(t, full, name)
		_, err := jobs.DecodeEnvelope(body)
		if isRequired := slices.Contains(required, name); isRequired != (err != nil) {
			t.Errorf("without %q: DecodeEnvelope error = %v, schema required = %v", name, err, isRequired)
		}
	}
}

func TestEnvelopeSchemaPropertiesMatchEncoder(t *testing.T) {
	t.Parallel()
	s := loadEnvelopeSchema(t)
	props := schemaProperties(t, s)
	// The full golden envelope sets every field the encoder knows.
	full := goldenFields(t, filepath.Join(goldenEnvelopeDir, "full.json"))
	got, want := slices.Sorted(maps.Keys(props)), slices.Sorted(maps.Keys(full))
	if !slices.Equal(got, want) {
		t.Errorf("schema properties %q, encoder fields %q", got, want)
	}
	// Every golden file only uses fields of the schema.
	files, _ := filepath.Glob(filepath.Join(goldenEnvelopeDir, "*.json"))
	for _, f := range files {
		for name := range goldenFields(t, f) {
			if _, ok := props[name]; !ok {
				t.Errorf("%s: field %q is not in the schema", f, name)
			}
		}
	}
	// Unknown fields are allowed (forward compatibility).
	if ap, ok := s["additionalProperties"]; ok && ap != true {
		t.Errorf("additionalProperties = %v, want true or absent", ap)
	}
	meta := props["meta"].(map[string]any)
	if ap, _ := meta["additionalProperties"].(map[string]any); ap["type"] != "string" {
		t.Errorf("meta.additionalProperties = %v, want string values", meta["additionalProperties"])
	}
}

func TestEnvelopeSchemaKindPatternIsTheDocumentedRule(t *testing.T) {
	t.Parallel()
	props := schemaProperties(t, loadEnvelopeSchema(t))
	kind := props["kind"].(map[string]any)
	if kind["pattern"] != kindPattern {
		t.Errorf("kind pattern = %v, want %s", kind["pattern"], kindPattern)
	}
	// ValidateKind's own message quotes the same rule.
	if err := jobs.ValidateKind("A"); err == nil || !strings.Contains(err.Error(), kindPattern) {
		t.Errorf("ValidateKind error %v does not quote %s", err, kindPattern)
	}
	doc, err := os.ReadFile(envelopeDocPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), kindPattern) {
		t.Errorf("%s does not state the kind rule %s", envelopeDocPath, kindPattern)
	}
}

func TestEnvelopeSchemaTimePatternOnlyAcceptsWhatDecoderReads(t *testing.T) {
	t.Parallel()
	props := schemaProperties(t, loadEnvelopeSchema(t))
	for _, field := range []string{"enqueued_at", "run_at"} {
		p := props[field].(map[string]any)
		re := regexp.MustCompile(p["pattern"].(string))
		if p["format"] != "date-time" {
			t.Errorf("%s: format = %v, want date-time", field, p["format"])
		}
		for _, s := range []string{
			"2026-11-29T10:00:00Z", "2026-11-29T10:00:00.1Z", "2026-11-29T10:00:00.123Z",
			"2026-11-29T10:00:00.123456789Z", "2026-11-29T12:00:00+02:00", "2026-11-29T05:30:00-04:30",
			"2026-11-29T10:00:00-00:00", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z",
		} {
			if !re.MatchString(s) {
				t.Errorf("%s: pattern rejects %q", field, s)
			}
			body := fmt.Sprintf(`{"v":1,"id":"x","kind":"a","args":{},%q:%q}`, field, s)
			if _, err := jobs.DecodeEnvelope([]byte(body)); err != nil {
				t.Errorf("%s: pattern accepts %q, DecodeEnvelope rejects it: %v", field, s, err)
			}
		}
		for _, s := range []string{"", "2026-11-29", "2026-11-29 10:00:00Z", "2026-11-29T10:00:00", "2026-11-29t10:00:00z",
			"2026-13-01T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T10:00:00+0200", "1764410400"} {
			if re.MatchString(s) {
				t.Errorf("%s: pattern accepts %q", field, s)
			}
		}
	}
}

// TestEnvelopeSchemaAcceptsEveryGoldenBody: what the encoder writes and what producers may send
// (the decode-only inputs) is valid against the schema.
func TestEnvelopeSchemaAcceptsEveryGoldenBody(t *testing.T) {
	t.Parallel()
	s := loadEnvelopeSchema(t)
	var files []string
	for _, dir := range []string{goldenEnvelopeDir, decodeOnlyDir} {
		f, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		files = append(files, f...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d golden files", len(files))
	}
	for _, f := range files {
		if err := validateJSONSchema(s, decodeWithNumbers(t, readGolden(t, f)), "$"); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestEnvelopeSchemaRejectsEveryInvalidBody: every JSON body the decoder rejects, the schema
// rejects too.
func TestEnvelopeSchemaRejectsEveryInvalidBody(t *testing.T) {
	t.Parallel()
	s := loadEnvelopeSchema(t)
	for _, tc := range invalidEnvelopes() {
		if !json.Valid([]byte(tc.body)) {
			continue // not JSON at all: nothing for a schema to judge
		}
		if err := validateJSONSchema(s, decodeWithNumbers(t, []byte(tc.body)), "$"); err == nil {
			t.Errorf("%s: schema accepts %s", tc.name, tc.body)
		}
	}
}

func TestEnvelopeDocDescribesEveryField(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(envelopeDocPath)
	if err != nil {
		t.Fatal(err)
	}
	for name := range schemaProperties(t, loadEnvelopeSchema(t)) {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s does not describe `%s`", envelopeDocPath, name)
		}
	}
	for _, must := range []string{"sqsworker.failure", jobs.ReasonMalformed, "envelope.schema.json", jobs.MetaTraceParent} {
		if !strings.Contains(string(doc), must) {
			t.Errorf("%s does not mention %q", envelopeDocPath, must)
		}
	}
}

func goldenFields(t *testing.T, path string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(readGolden(t, path), &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

func withoutField(t *testing.T, fields map[string]json.RawMessage, name string) []byte {
	t.Helper()
	m := maps.Clone(fields)
	delete(m, name)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeWithNumbers(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// Keywords validateJSONSchema applies, and annotations it may ignore.
var (
	schemaAssertions  = []string{"type", "const", "minLength", "pattern", "minimum", "required", "properties", "additionalProperties"}
	schemaAnnotations = []string{"$schema", "$id", "$comment", "title", "description", "format", "examples", "default"}
)

func checkSchemaKeywords(s map[string]any, at string) error {
	for k, v := range s {
		switch {
		case slices.Contains(schemaAnnotations, k):
		case slices.Contains(schemaAssertions, k):
			switch k {
			case "properties":
				for name, sub := range v.(map[string]any) {
					if err := checkSchemaKeywords(sub.(map[string]any), at+"/properties/"+name); err != nil {
						return err
					}
				}
			case "additionalProperties":
				if sub, ok := v.(map[string]any); ok {
					if err := checkSchemaKeywords(sub, at+"/additionalProperties"); err != nil {
						return err
					}
				}
			case "pattern":
				if _, err := regexp.Compile(v.(string)); err != nil {
					return fmt.Errorf("%s/pattern: %v", at, err)
				}
			}
		default:
			return fmt.Errorf("%s: keyword %q is not checked by this test's validator; teach it", at, k)
		}
	}
	return nil
}

// validateJSONSchema applies the keywords in schemaAssertions with draft 2020-12 semantics
// (integer = a number with no fraction; minLength counts code points; patterns search, unanchored).
func validateJSONSchema(s map[string]any, v any, at string) error {
	if typ, ok := s["type"].(string); ok && !jsonSchemaType(v, typ) {
		return fmt.Errorf("%s: %v is not of type %s", at, v, typ)
	}
	if c, ok := s["const"]; ok && !jsonSchemaEqual(c, v) {
		return fmt.Errorf("%s: %v is not %v", at, v, c)
	}
	if str, ok := v.(string); ok {
		if n, ok := s["minLength"].(json.Number); ok {
			if min, _ := n.Int64(); int64(utf8.RuneCountInString(str)) < min {
				return fmt.Errorf("%s: %q is shorter than %d", at, str, min)
			}
		}
		if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", at, str, p)
		}
	}
	if num, ok := v.(json.Number); ok {
		if m, ok := s["minimum"].(json.Number); ok {
			x, _ := strconv.ParseFloat(num.String(), 64)
			min, _ := strconv.ParseFloat(m.String(), 64)
			if x < min {
				return fmt.Errorf("%s: %v is below %v", at, num, m)
			}
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := obj[r.(string)]; !ok {
				return fmt.Errorf("%s: %q is required", at, r)
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	for name, val := range obj {
		if sub, ok := props[name].(map[string]any); ok {
			if err := validateJSONSchema(sub, val, at+"."+name); err != nil {
				return err
			}
			continue
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if !ap {
				return fmt.Errorf("%s: %q is not allowed", at, name)
			}
		case map[string]any:
			if err := validateJSONSchema(ap, val, at+"."+name); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonSchemaType(v any, typ string) bool {
	switch typ {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	case "number":
		_, ok := v.(json.Number)
		return ok
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		return err == nil && f == math.Trunc(f)
	}
	return false
}

func jsonSchemaEqual(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		fx, _ := strconv.ParseFloat(x.String(), 64)
		fy, _ := strconv.ParseFloat(y.String(), 64)
		return fx == fy
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
