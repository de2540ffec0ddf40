package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sqsworker/sqsworker/functions/internal/config"
)

// Policy is what POST /jobs admits, deny by default: only the kinds of the allow-list, each with
// its args limit and, optionally, a JSON Schema its args must match. Build it with NewPolicy.
type Policy struct {
	kinds map[string]*kindRule
}

type kindRule struct {
	maxArgs int
	schema  *jsonschema.Schema // nil: size only
}

// maxFieldErrors bounds the schema violations one answer lists.
const maxFieldErrors = 10

// NewPolicy compiles the allow-list of cfg: every kind's schema, inline or read with readFile
// (os.ReadFile in main). The error has one line per schema that cannot be read or compiled.
//
// Schemas follow JSON Schema draft 2020-12 unless they name another draft in "$schema" (4, 6,
// 7 and 2019-09 are understood), and "format" is asserted (an "email" that is not one fails).
// A schema may "$ref" files next to its own file; nothing is ever fetched over the network.
func NewPolicy(cfg config.API, readFile func(string) ([]byte, error)) (*Policy, error) {
	p := &Policy{kinds: make(map[string]*kindRule, len(cfg.Kinds))}
	for _, k := range cfg.Kinds {
		p.kinds[k.Kind] = &kindRule{maxArgs: k.MaxArgsBytes}
	}
	kinds := make([]string, 0, len(cfg.Schemas))
	for kind := range cfg.Schemas {
		kinds = append(kinds, kind)
	}
	sort.Strings(kinds)
	var errs []error
	for _, kind := range kinds {
		src := cfg.Schemas[kind]
		rule, ok := p.kinds[kind]
		if !ok { // config.LoadAPI already refuses this
			errs = append(errs, fmt.Errorf("%s: kind %q has a schema but is not allowed", config.EnvAPISchemas, kind))
			continue
		}
		sch, err := compileSchema(kind, src, readFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: kind %q: %s", config.EnvAPISchemas, kind, oneLine(err.Error())))
			continue
		}
		rule.schema = sch
	}
	return p, errors.Join(errs...)
}

// compileSchema compiles one kind's schema. A file's schema gets its file:// URL (so that
// relative $refs find the files beside it); an inline one a URL of its own that no loader
// serves.
func compileSchema(kind string, src config.SchemaSource, readFile func(string) ([]byte, error)) (*jsonschema.Schema, error) {
	raw, loc := []byte(src.Inline), "urn:sqsworker:api:schema:"+kind
	if src.File != "" {
		b, err := readFile(src.File)
		if err != nil {
			return nil, fmt.Errorf("read the schema: %v", err)
		}
		abs, err := filepath.Abs(src.File)
		if err != nil {
			return nil, err
		}
		raw, loc = b, (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(jsonschema.SchemeURLLoader{"file": jsonschema.FileLoader{}})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("the schema: %v", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("the schema does not compile: %v", err)
	}
	return sch, nil
}

// oneLine joins the lines of a validator's message (it indents nested causes), so that each
// configuration problem stays on one line of the cold-start error.
func oneLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}

// rule returns the rule of an allowed kind, or nil.
func (p *Policy) rule(kind string) *kindRule {
	if p == nil {
		return nil
	}
	return p.kinds[kind]
}

// Allowed reports whether kind is on the allow-list.
func (p *Policy) Allowed(kind string) bool { return p.rule(kind) != nil }

// FieldError is one way the args fail their kind's schema: the JSON pointer of the value at
// fault within the args ("" for the args object itself) and the validator's message.
type FieldError struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

var printer = message.NewPrinter(language.English)

// validate checks args (valid JSON) against the kind's schema, if it has one, and returns its
// violations, at most maxFieldErrors of them, sorted by field: what the schema refuses, and
// every key that differs from a property of the schema only by case (caseVariants).
func (r *kindRule) validate(args []byte) ([]FieldError, error) {
	if r.schema == nil {
		return nil, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return nil, err
	}
	// Keys the schema does not see but the worker's decoder would (caseVariants), as well as
	// what the schema refuses.
	out := caseVariants(r.schema, v)
	err = r.schema.Validate(v)
	var ve *jsonschema.ValidationError
	switch {
	case err == nil:
		return capFields(out), nil
	case !errors.As(err, &ve):
		return nil, err
	}
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, FieldError{Field: pointer(e.InstanceLocation), Error: e.ErrorKind.LocalizedString(printer)})
			return
		}
		for _, c := range e.Causes {
			leaves(c)
		}
	}
	leaves(ve)
	return capFields(out), nil
}

// capFields sorts violations by field and keeps the first maxFieldErrors.
func capFields(out []FieldError) []FieldError {
	sort.SliceStable(out, func(a, b int) bool { return out[a].Field < out[b].Field })
	if len(out) > maxFieldErrors {
		out = out[:maxFieldErrors]
	}
	return out
}

// pointer is the JSON pointer (RFC 6901) of an instance location.
func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		sb.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return sb.String()
}

// describe joins violations into one sentence for the error message.
func describe(fields []FieldError) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		at := f.Field
		if at == "" {
			at = "(the args object)"
		}
		parts[i] = "at " + at + ": " + f.Error
	}
	return strings.Join(parts, "; ")
}
