package main

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema compares property names exactly; Go's JSON decoding does not. encoding/json, and
// github.com/goccy/go-json that the worker decodes args with (pkg/jobs), match an object key
// to a struct field case-insensitively, by strings.EqualFold: Unicode simple case folding, so
// "TO", "tO", "ſubject" (U+017F, long s) and "\u212A" (KELVIN SIGN, for "k") all name the
// fields "to", "subject" and "k"; a later key overwrites an earlier one. Measured on goccy/go-json
// v0.12.0 against encoding/json of Go 1.26, which agree key for key: '_' and '-' are compared
// as they are (the "case:ignore" rule of encoding/json/v2, which drops them, does not apply to
// Unmarshal), the "case:strict" and "case:ignore" tag options are not honoured, and nothing
// else folds (no Unicode normalisation, "İ" is not "i", no ligatures). So with a schema
// {"required":["to"],"properties":{"to":{"format":"email"}}}, the args
// {"to":"ada@example.com","TO":"anything"} pass the schema (it knows nothing of "TO") and the
// worker's job gets To = "anything".
//
// caseVariants finds such keys: at every place in the args the schema describes, an object
// key that is not one of the property names the schema gives there (in "properties",
// "required" or "dependentRequired", through "$ref", "allOf", "anyOf", "oneOf", "if"/"then"/
// "else" and "dependentSchemas") but folds to one of them. The API refuses the args with each
// such key named. foldKey is the decoders' folding: two names fold to the same string exactly
// when strings.EqualFold reports them equal.

// caseVariants returns a violation for every key of v (the args as the validator decoded them)
// that differs from a property the schema gives at its place only by case, sorted by field.
func caseVariants(sch *jsonschema.Schema, v any) []FieldError {
	var out []FieldError
	walkCase([]*jsonschema.Schema{sch}, v, nil, &out)
	slices.SortFunc(out, func(a, b FieldError) int { return strings.Compare(a.Field, b.Field) })
	return out
}

// walkCase checks the value v at path against the schemas that apply there, then its members
// against the subschemas that apply to them. The API caps the args' nesting before anything
// decodes them, so the recursion is shallow.
func walkCase(schemas []*jsonschema.Schema, v any, path []string, out *[]FieldError) {
	schemas = inPlace(schemas)
	if len(schemas) == 0 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		names := map[string]bool{}
		for _, s := range schemas {
			for name := range s.Properties {
				names[name] = true
			}
			for _, name := range s.Required {
				names[name] = true
			}
			for name := range s.DependentRequired {
				names[name] = true
			}
		}
		folded := make(map[string]string, len(names))
		for name := range names {
			f := foldKey(name)
			if prev, ok := folded[f]; !ok || name < prev { // one name per fold, the same every time
				folded[f] = name
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !names[k] {
				if name, ok := folded[foldKey(k)]; ok {
					*out = append(*out, FieldError{Field: pointer(append(path[:len(path):len(path)], k)),
						Error: fmt.Sprintf("%s differs from the property %s only by case: refused, since Go's JSON decoding (case-insensitive) would take it for %s",
							quote(k), quote(name), quote(name))})
				}
			}
			walkCase(memberSchemas(schemas, k), v[k], append(path[:len(path):len(path)], k), out)
		}
	case []any:
		for i, item := range v {
			walkCase(itemSchemas(schemas, i), item, append(path[:len(path):len(path)], fmt.Sprint(i)), out)
		}
	}
}

// inPlace returns schemas with every schema they apply to the same value, transitively: $ref,
// $recursiveRef, $dynamicRef (its static target), allOf, anyOf, oneOf, if, then, else, and
// dependentSchemas / dependencies (all of them: which apply depends on the keys, and a schema
// that names a property describes it). "not" is left out: what it names is what must not match.
func inPlace(schemas []*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
		add(s.Ref)
		add(s.RecursiveRef)
		if s.DynamicRef != nil {
			add(s.DynamicRef.Ref)
		}
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for _, sub := range list {
				add(sub)
			}
		}
		add(s.If)
		add(s.Then)
		add(s.Else)
		for _, sub := range s.DependentSchemas {
			add(sub)
		}
		for _, dep := range s.Dependencies {
			if sub, ok := dep.(*jsonschema.Schema); ok {
				add(sub)
			}
		}
	}
	for _, s := range schemas {
		add(s)
	}
	return out
}

// memberSchemas returns the subschemas that apply to the member key of an object: its
// "properties" entry, the "patternProperties" it matches, else "additionalProperties"; and
// "unevaluatedProperties" (which may apply: included, to be safe).
func memberSchemas(schemas []*jsonschema.Schema, key string) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range schemas {
		matched := false
		if sub, ok := s.Properties[key]; ok {
			out, matched = append(out, sub), true
		}
		for re, sub := range s.PatternProperties {
			if re.MatchString(key) {
				out, matched = append(out, sub), true
			}
		}
		if sub, ok := s.AdditionalProperties.(*jsonschema.Schema); ok && !matched {
			out = append(out, sub)
		}
		if s.UnevaluatedProperties != nil {
			out = append(out, s.UnevaluatedProperties)
		}
	}
	return out
}

// itemSchemas returns the subschemas that apply to item i of an array: "prefixItems" /
// "items" (both drafts' forms), "additionalItems", "contains" and "unevaluatedItems".
func itemSchemas(schemas []*jsonschema.Schema, i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range schemas {
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			out = append(out, items)
		case []*jsonschema.Schema:
			if i < len(items) {
				out = append(out, items[i])
			} else if sub, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				out = append(out, sub)
			}
		}
		if i < len(s.PrefixItems) {
			out = append(out, s.PrefixItems[i])
		} else if s.Items2020 != nil {
			out = append(out, s.Items2020)
		}
		if s.Contains != nil {
			out = append(out, s.Contains)
		}
		if s.UnevaluatedItems != nil {
			out = append(out, s.UnevaluatedItems)
		}
	}
	return out
}

// foldKey folds a name as Go's JSON decoders compare names: ASCII letters to upper case, every
// other rune to the smallest rune of its Unicode simple-folding orbit (so "s", "S" and "ſ"
// fold alike). foldKey(a) == foldKey(b) exactly when strings.EqualFold(a, b).
func foldKey(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			sb.WriteRune(r)
			continue
		}
		sb.WriteRune(smallestFold(r))
	}
	return sb.String()
}

// smallestFold returns the smallest rune of r's simple-folding orbit.
func smallestFold(r rune) rune {
	smallest := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		smallest = min(smallest, f)
	}
	return smallest
}

// quote quotes a key for a message: in single quotes, as the validator's messages quote
// properties, with anything unprintable escaped.
func quote(s string) string {
	q := fmt.Sprintf("%+q", s) // ASCII only: "ſ" shows as \u017f
	return "'" + q[1:len(q)-1] + "'"
}
