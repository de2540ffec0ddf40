package jobs

import (
	"encoding/json"
	"testing"
)

type benchEmail struct {
	To      string   `json:"to"`
	Subject string   `json:"subject"`
	N       int      `json:"n"`
	Tags    []string `json:"tags"`
}

// BenchmarkDecodeArgs compares the args decoder (goccy/go-json) with encoding/json on a small
// args object.
func BenchmarkDecodeArgs(b *testing.B) {
	raw := []byte(`{"to":"ada@example.com","subject":"Welcome aboard","n":3,"tags":["a","b"]}`)
	b.Run("goccy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v benchEmail
			if err := decodeArgs(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var v benchEmail
			if err := json.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
